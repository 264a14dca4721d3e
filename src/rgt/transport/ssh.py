"""The box is reached with the user's own OpenSSH client, and files with rsync over it.

Why OpenSSH and not a Python SSH library: the user's ``~/.ssh/config`` (aliases, ProxyJump,
keys, agents) must just work, and a connection string pasted from a console (AutoDL hands
out ``ssh -p 38211 root@connect.region.example.com``) must mean exactly what it means to ssh.

Every connection shares one multiplexed master (ControlMaster), so a command costs a round
trip, not a handshake; keepalives notice a dead link within a minute; BatchMode means ssh
never stops to ask a question nobody is there to answer; host keys are accepted on first
contact and a changed key is refused, loudly.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rgt.errors import UserError
from rgt.transport.base import (
    AuthenticationFailed,
    BashMissing,
    CommandTimeout,
    HostKeyChanged,
    Progress,
    Result,
    TransferStats,
    TransportError,
    Unreachable,
    _one_line,
    bash_missing,
)
from rgt.transport.local import _make_dir, _source, run_local
from rgt.transport.rsync import rsync_argv, rsync_transfer, tree_size

CONTROL_PERSIST = 60
"""Seconds an idle master connection stays up for the next command."""


@dataclass(frozen=True)
class SshTarget:
    """Where a box is, in ssh's own terms. Only `host` is required: it may be an alias that
    the user's ssh config resolves (then user, port and key come from there)."""

    host: str
    port: int | None = None
    user: str | None = None
    identity: Path | None = None
    config_file: Path | None = None
    options: tuple[str, ...] = field(default=())
    """Extra ``-o Key=Value`` settings, as given on a pasted command line."""

    def __post_init__(self) -> None:
        if not self.host or self.host.startswith("-") or any(c.isspace() for c in self.host):
            raise UserError(f"not a usable ssh host: {self.host!r}")
        if self.port is not None and not 0 < self.port < 65536:
            raise UserError(f"ssh port must be between 1 and 65535, got {self.port}")

    def __str__(self) -> str:
        who = f"{self.user}@{self.host}" if self.user else self.host
        return f"{who}:{self.port}" if self.port else who


_EXPECTED = "expected an ssh command like 'ssh -p 38211 root@connect.example.com'"
_VALUE_FLAGS = {"-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D"}
_IGNORED_FLAGS = set("46ACNTqtvxXY")  # do not change which box we reach or how we log in


def parse_ssh_command(text: str) -> SshTarget:
    """Read the connection string a console hands out, pasted as is.

    Understands ``-p PORT``, ``-i KEY``, ``-l USER``, ``-o Key=Value``, ``-F FILE``,
    ``-J JUMP`` and ``[user@]host``; port forwards (-L/-R/-D) and cosmetic flags are ignored.
    A leading ``ssh`` is optional. Anything else is a UserError saying what was expected.
    """
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"cannot read {text!r} ({exc}): {_EXPECTED}") from None
    if tokens and (tokens[0] == "ssh" or tokens[0].endswith("/ssh")):
        tokens = tokens[1:]
    if not tokens:
        raise UserError(f"empty ssh command: {_EXPECTED}")

    port: int | None = None
    user: str | None = None
    identity: Path | None = None
    config: Path | None = None
    options: list[str] = []
    dest: str | None = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok.startswith("-") and len(tok) > 1:
            flag = tok[:2]
            if flag in _VALUE_FLAGS:
                value = tok[2:]
                if not value:
                    if i >= len(tokens):
                        raise UserError(f"ssh option {flag} needs a value in {text!r}: {_EXPECTED}")
                    value = tokens[i]
                    i += 1
                if flag == "-p":
                    if not value.isdecimal():  # isdigit() passes '²', which int() refuses
                        raise UserError(f"ssh port must be a number, got {value!r} in {text!r}")
                    port = int(value)
                elif flag == "-i":
                    identity = Path(value).expanduser()
                elif flag == "-l":
                    user = value
                elif flag == "-F":
                    config = Path(value).expanduser()
                elif flag == "-J":
                    options.append(f"ProxyJump={value}")
                elif flag == "-o":
                    if "=" not in value and " " not in value.strip():
                        raise UserError(
                            f"ssh option -o {value!r} should read Key=Value in {text!r}"
                        )
                    options.append(value)
                continue
            if all(c in _IGNORED_FLAGS for c in tok[1:]):
                continue
            raise UserError(
                f"unsupported ssh option {tok} in {text!r}: rgt understands -p, -i, -l, -o, -F "
                "and -J; put anything else in ~/.ssh/config"
            )
        if tok.startswith("ssh://"):
            raise UserError(f"ssh:// URLs are not supported: {_EXPECTED}")
        if dest is not None:
            raise UserError(f"unexpected {tok!r} after the host in {text!r}: {_EXPECTED}")
        dest = tok

    if dest is None:
        raise UserError(f"no host in {text!r}: {_EXPECTED}")
    if "@" in dest:
        user_part, _, dest = dest.rpartition("@")
        if not user_part:
            raise UserError(f"empty user name in {text!r}: {_EXPECTED}")
        user = user or user_part
    if dest.count(":") == 1:
        raise UserError(f"write the port as -p PORT, not host:port, in {text!r}: {_EXPECTED}")
    if not dest or dest.startswith("-"):
        raise UserError(f"no host in {text!r}: {_EXPECTED}")
    return SshTarget(dest, port, user, identity, config, tuple(options))


def _control_dir() -> Path:
    """A private directory for master sockets, short enough for the ~104-byte socket limit."""
    path = Path(f"/tmp/rgt-cm-{os.getuid()}")
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise UserError(f"cannot create {path} for ssh connection sharing: {exc}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise UserError(f"{path} is not a directory owned by you: remove it and retry")
    if info.st_mode & 0o077:
        path.chmod(0o700)
    return path


# ssh's own failure messages (it exits 255, which a remote command can also do).
_CONNECT = re.compile(r"connect to host (\S+) port (\d+): (.+)")
_RESOLVE = re.compile(r"Could not resolve hostname (\S+?):? (.+)")
_OFFENDING = re.compile(r"Offending \S+ key in (\S+):(\d+)")
_CHANGED_FOR = re.compile(r"Host key for (\S+) has changed")
_UNREACHABLE_HINTS = (
    "Connection timed out during banner exchange",
    "kex_exchange_identification",
    "Connection reset by peer",
    "Network is unreachable",
    "No route to host",
    "Connection refused",
    "Operation timed out",
)
# A mux client that could not get a session from a dying master: nothing ran; safe to retry.
_MUX_FAILURE = (
    "mux_client_request_session",
    "mux_client_hello_exchange",
    "Session open refused",
    "master is dead",
    "Control master terminated",
)


class SshTransport:
    """Commands and files over the user's OpenSSH client, multiplexed, strict on host keys.

    `known_hosts` is rgt's own file (one per RGT_HOME): first contact records the box's key
    there, a later different key raises `HostKeyChanged`. `rsync_options` are extra rsync
    flags for every transfer (e.g. ``--bwlimit=20m`` on a shared uplink). `python` is the box's
    interpreter that runs rgt's on-box scripts, as `rgt up` found it.
    """

    def __init__(
        self,
        target: SshTarget,
        *,
        known_hosts: Path,
        connect_timeout: int = 15,
        control_persist: int = CONTROL_PERSIST,
        rsync_options: Sequence[str] = (),
        python: str = "python3",
    ) -> None:
        self.target = target
        self.python = python  # the box's interpreter for rgt's on-box scripts (found at `up`)
        self.known_hosts = Path(known_hosts)
        self.connect_timeout = connect_timeout
        self.control_persist = control_persist
        self.rsync_options = tuple(rsync_options)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        # One master per (target, known_hosts, config, key): two RGT_HOMEs never share one.
        salt = "\0".join(map(str, (self.known_hosts.resolve(), target.config_file,
                                   target.identity, target.options)))
        tag = hashlib.sha256(salt.encode()).hexdigest()[:8]
        self.control_path = f"{_control_dir()}/{tag}-%C"
        self._resolved: dict[str, str] | None = None

    # -- the ssh command line ----------------------------------------------------------------

    @property
    def ssh_argv(self) -> list[str]:
        """``ssh`` and every option rgt uses, without the destination (for interactive use)."""
        t = self.target
        argv = ["ssh"]
        if t.config_file is not None:
            argv += ["-F", str(t.config_file)]
        # Safety first: ssh keeps the first value it sees, so a pasted -o cannot undo these.
        argv += [
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", f"UserKnownHostsFile={_option_path(self.known_hosts)}",
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={self.control_path}",
        ]
        for option in t.options:
            argv += ["-o", option]
        argv += [
            "-o", f"ControlPersist={self.control_persist}",
            "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4",
            "-o", f"ConnectTimeout={self.connect_timeout}",
            "-o", "LogLevel=ERROR",
        ]
        if t.port is not None:
            argv += ["-p", str(t.port)]
        if t.user is not None:
            argv += ["-l", t.user]
        if t.identity is not None:
            argv += ["-i", str(t.identity), "-o", "IdentitiesOnly=yes"]
        return argv

    @property
    def where(self) -> str:
        return str(self.target)

    # -- commands ----------------------------------------------------------------------------

    def run(
        self,
        command: str,
        *,
        stdin: bytes | None = None,
        timeout: float = 60,
        check: bool = True,
    ) -> Result:
        """Run `command` under bash on the box. Secrets go in `stdin`, never in `command`."""
        argv = [*self.ssh_argv, self.target.host, "bash -c " + shlex.quote(command)]
        for attempt in (1, 2):
            try:
                rc, out, err = run_local(argv, stdin=stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise CommandTimeout.after(
                    self.where, command, timeout, "it may still be running on the box"
                ) from None
            if rc == 255 and attempt == 1 and any(m in err for m in _MUX_FAILURE):
                self.close()  # a master whose link died; the next ssh builds a fresh one
                continue
            break
        if rc == 255 and (problem := self._diagnose(err)) is not None:
            raise problem
        if bash_missing(rc, err):  # nothing ran, whatever `check` says
            raise BashMissing.on(self.where, err)
        result = Result(rc, out, err)
        if check and not result.ok:
            raise TransportError.command_failed(self.where, command, rc, err)
        return result

    # -- files -------------------------------------------------------------------------------

    def put(
        self,
        local: Path,
        remote: str,
        *,
        timeout: float = 600,
        retries: int = 5,
        progress: Progress | None = None,
        exclude: Sequence[str] = (),
    ) -> TransferStats:
        """Copy `local` (a directory's contents, or one file) into the box's directory `remote`,
        creating it. Resumes interrupted files instead of resending them."""
        local = Path(local)
        if not local.exists():
            raise TransportError(f"cannot push {local}: it does not exist")
        remote = _remote_path(remote)
        # mkdir rides in the same ssh session as rsync, so it is retried with each attempt.
        mkdir = f"--rsync-path=mkdir -p {shlex.quote(remote)} && rsync"
        argv = rsync_argv(
            _source(local), f"{self._rsync_host}:{remote}/", exclude=exclude, ssh=self._rsync_ssh,
            extra=(mkdir, *self.rsync_options),
        )
        return rsync_transfer(
            argv, what=f"pushing {local} to {self.where}:{remote}", timeout=timeout,
            retries=retries, progress=progress, total=tree_size(local) if progress else 0,
            upload=True, diagnose=self._diagnose,
        )

    def get(
        self,
        remote: str,
        local: Path,
        *,
        timeout: float = 600,
        retries: int = 5,
        progress: Progress | None = None,
        exclude: Sequence[str] = (),
    ) -> TransferStats:
        """Copy the box's directory `remote` (its contents) into `local`, creating it."""
        local = Path(local)
        _make_dir(local)
        remote = _remote_path(remote)
        argv = rsync_argv(
            f"{self._rsync_host}:{remote}/", str(local) + "/", exclude=exclude,
            ssh=self._rsync_ssh, extra=self.rsync_options,
        )
        return rsync_transfer(
            argv, what=f"pulling {self.where}:{remote} to {local}", timeout=timeout,
            retries=retries, progress=progress, total=0, upload=False, diagnose=self._diagnose,
            arrived=lambda: tree_size(local),
        )

    @property
    def _rsync_ssh(self) -> str:
        # rsync splits -e on spaces and honours quotes: same ssh, same master.
        return shlex.join(self.ssh_argv)

    @property
    def _rsync_host(self) -> str:
        host = self.target.host
        return f"[{host}]" if ":" in host and not host.startswith("[") else host

    # -- connection --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the shared master connection (the next command opens a new one)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(
                [*self.ssh_argv, "-O", "exit", self.target.host],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                timeout=10, check=False,
            )

    def __enter__(self) -> SshTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resolved(self) -> dict[str, str]:
        """What ssh makes of the target after reading its config (``ssh -G``): hostname,
        port, user, hostkeyalias..."""
        if self._resolved is None:
            proc = subprocess.run(
                [*self.ssh_argv, "-G", self.target.host],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10,
                check=False,
            )
            pairs = (line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
            self._resolved = {k.lower(): v for k, v in pairs}
        return self._resolved

    def known_hosts_name(self) -> str:
        """The name this box's key is filed under in known_hosts (``[host]:port`` off 22)."""
        cfg = self.resolved()
        if alias := cfg.get("hostkeyalias"):
            return alias
        host = cfg.get("hostname", self.target.host)
        port = cfg.get("port", str(self.target.port or 22))
        return host if port == "22" else f"[{host}]:{port}"

    def host_key_fingerprint(self) -> str | None:
        """The recorded host key's SHA256 fingerprint, or None before first contact."""
        if not self.known_hosts.exists():
            return None
        proc = subprocess.run(
            ["ssh-keygen", "-l", "-F", self.known_hosts_name(), "-f", str(self.known_hosts)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10, check=False,
        )
        for line in proc.stdout.splitlines():
            if not line.startswith("#") and (m := re.search(r"SHA256:\S+", line)):
                return m.group(0)
        return None

    def _diagnose(self, stderr: str) -> TransportError | None:
        """Name an ssh-level failure from its stderr, or None if it is not one."""
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or (
            "Host key verification failed" in stderr
        ):
            m = _OFFENDING.search(stderr)
            where = f"{m.group(1)} line {m.group(2)}" if m else str(self.known_hosts)
            named = _CHANGED_FOR.search(stderr)
            name = named.group(1) if named else self.known_hosts_name()
            return HostKeyChanged(
                f"the host key of {name} changed since rgt first connected (old key in {where}); "
                "refusing to connect, as this is also what an impostor looks like. If the box "
                "was re-created and the change is expected, forget the old key with: "
                f"ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(str(self.known_hosts))}",
                rc=255, stderr=stderr,
            )
        if "Permission denied (" in stderr:
            return AuthenticationFailed(
                f"{self.where} refused our ssh key: add your public key to the box's "
                "~/.ssh/authorized_keys, or give the right key with -i",
                rc=255, stderr=stderr,
            )
        if m := _CONNECT.search(stderr):
            return self._unreachable(f"{m.group(1)}:{m.group(2)}", m.group(3).strip(), stderr)
        if m := _RESOLVE.search(stderr):
            return self._unreachable(m.group(1), m.group(2).strip(), stderr)
        if any(hint in stderr for hint in _UNREACHABLE_HINTS):
            return self._unreachable(self._host_port(), _one_line(stderr, 160), stderr)
        if "closed by remote host" in stderr or "Connection closed by" in stderr:
            return TransportError(
                f"the connection to {self._host_port()} dropped: {_one_line(stderr, 160)}",
                rc=255, stderr=stderr,
            )
        return None

    def _host_port(self) -> str:
        cfg = self.resolved()
        return f"{cfg.get('hostname', self.target.host)}:{cfg.get('port', self.target.port or 22)}"

    def _unreachable(self, where: str, reason: str, stderr: str) -> Unreachable:
        return Unreachable(
            f"cannot reach {where} ({reason}): check that the box is running and that the "
            "host and port are current (rental consoles change them when an instance restarts)",
            rc=255, stderr=stderr,
        )


def _option_path(path: Path) -> str:
    """A path as an ssh option value: ssh splits some values on spaces unless quoted (macOS
    keeps app data under "Application Support")."""
    text = str(path)
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _remote_path(path: str) -> str:
    """ssh starts in the home directory, so ``~/x`` is ``x`` (and survives quoting)."""
    if path in ("~", "~/"):
        return "."
    if path.startswith("~/"):
        return path[2:]
    if not path:
        raise UserError("empty remote path")
    return path
