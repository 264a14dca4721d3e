"""The box is reached with the user's own OpenSSH client; files travel over it too, moved by
rgt's own engine (transport/transfer.py), which needs only the box's Python.

Why OpenSSH and not a Python SSH library: the user's ``~/.ssh/config`` (aliases, ProxyJump,
keys, agents) must just work, and a connection string pasted from a console (AutoDL hands
out ``ssh -p 38211 root@connect.region.example.com``) must mean exactly what it means to ssh.

Every connection shares one multiplexed master (ControlMaster), so a command costs a round
trip, not a handshake; keepalives notice a dead link within a minute; BatchMode means ssh
never stops to ask a question nobody is there to answer; host keys are accepted on first
contact and a changed key is refused, loudly — for the box and for every jump host on the way
(see transport/ssh_hosts.py, which also keeps OpenSSH < 7.6 strict without accept-new).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import socket
import stat
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rgt.errors import UserError
from rgt.transport.base import (
    AuthenticationFailed,
    BashMissing,
    CommandTimeout,
    HostKeyChanged,
    HostKeyUnknown,
    PassphraseNeeded,
    Progress,
    Result,
    Stalled,
    TransferStats,
    TransportError,
    Unreachable,
    _one_line,
    bash_missing,
)
from rgt.transport.local import TRUNCATED, IdleExpired, _make_dir, run_bytes, run_local
from rgt.transport.ssh_hosts import (
    Hop,
    KeyPolicy,
    client_version,
    dump_config,
    host_key_checking,
    is_known,
    known_name,
    locked_keys,
    log_sizes,
    option_path,
    proxy_command,
    read_hop_logs,
    record_first_contact,
    resolve_chain,
    split_url,
)
from rgt.transport.transfer import far_command, move

CONTROL_PERSIST = 60
_GCM = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
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
    ``-J JUMP``, ``[user@]host`` and ``ssh://[user@]host[:port]`` (as OpenSSH 7.7+ does: -p
    and -l win over the URL's); port forwards (-L/-R/-D) and cosmetic flags are ignored.
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
        if dest is not None:
            raise UserError(f"unexpected {tok!r} after the host in {text!r}: {_EXPECTED}")
        dest = tok

    if dest is None:
        raise UserError(f"no host in {text!r}: {_EXPECTED}")
    if dest.startswith("ssh://"):
        url_user, host, url_port = split_url(dest, text)
        return SshTarget(host, port if port is not None else url_port, user or url_user,
                         identity, config, tuple(options))
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
_OFFENDING = re.compile(r"Offending \S+ key in (.+?):(\d+)\r?$", re.M)
_CHANGED_FOR = re.compile(r"Host key for (\S+) has changed")
_NOT_KNOWN = re.compile(r"No \S+ host key is known for (\S+) and")
_TOO_OPEN = re.compile(r"Permissions (\d+) for '(.+?)' are too open")
# What ssh says when its proxy (a jump host's ssh) closes before the SSH banner
# ("ssh_exchange_identification" before OpenSSH 8.2).
_NO_BANNER = re.compile(r"(?:kex|ssh)_exchange_identification")
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
    there, a later different key raises `HostKeyChanged`. `bwlimit` caps every transfer, in
    bytes per second (e.g. on a shared uplink; 0: no cap). `python` is the box's
    interpreter that runs rgt's on-box scripts, as `rgt up` found it.
    """

    def __init__(
        self,
        target: SshTarget,
        *,
        known_hosts: Path,
        connect_timeout: int = 15,
        control_persist: int = CONTROL_PERSIST,
        bwlimit: int = 0,
        python: str = "python3",
        streams: int = 0,
    ) -> None:
        self.target = target
        self.streams = streams  # parallel streams per transfer; 0: chosen per link
        self.python = python  # the box's interpreter for rgt's on-box scripts (found at `up`)
        self.known_hosts = Path(known_hosts)
        self.connect_timeout = connect_timeout
        self.control_persist = control_persist
        self.bwlimit = bwlimit
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        # One master per (target, known_hosts, config, key): two RGT_HOMEs never share one.
        salt = "\0".join(map(str, (self.known_hosts.resolve(), target.config_file,
                                   target.identity, target.options)))
        tag = hashlib.sha256(salt.encode()).hexdigest()[:8]
        self.control_path = f"{_control_dir()}/{tag}-%C"
        self._resolved: dict[str, str] | None = None
        self._config: dict[str, list[str]] | None = None
        self._hops: list[Hop] | None = None
        self._argv: list[str] | None = None
        self._hop_marks: dict[int, int] = {}

    # -- the ssh command line ----------------------------------------------------------------

    @property
    def ssh_argv(self) -> list[str]:
        """``ssh`` and every option rgt uses, without the destination (for interactive use).

        Built on first use: it reads the user's ssh config for jump hosts (``ssh -G``), and
        with an OpenSSH older than 7.6 records the keys of hosts met for the first time.
        """
        if self._argv is None:
            hops = self.jump_hosts()
            strict = host_key_checking()
            if strict != "accept-new" and not self._first_contact(hops):
                self._mark_hop_logs()
                return self._build(hops, strict)  # not kept: the next command tries again
            self._argv = self._build(hops, strict)
        self._mark_hop_logs()
        return list(self._argv)

    def session_argv(self) -> list[str]:
        """`ssh_argv` for a session of the user's own (`rgt ssh`): a connection of its own,
        not the master's, so its port forwards close when it ends instead of staying in the
        master for ControlPersist seconds more."""
        self.ssh_argv  # noqa: B018  (first contact recorded, as for any command)
        return self._build(self.jump_hosts(), host_key_checking(), shared=False)

    def _mark_hop_logs(self) -> None:
        # A command is about to connect: what the hops log from here on is about it.
        if self._hops:
            self._hop_marks = log_sizes(self._hop_log, len(self._hops))

    def _build(self, hops: list[Hop], strict: str, *,
               probe: dict[str, Path] | None = None, shared: bool = True) -> list[str]:
        """The ssh command line. `probe` (first contact without accept-new): the known_hosts
        names to learn, each with the scratch file ssh records its key in; no master.
        `shared=False`: a connection of its own, not the master's (a transfer's extra
        streams: channels of one connection share its TCP window and its one ssh process)."""
        own = probe is not None or not shared
        t = self.target
        argv = ["ssh"]
        if t.config_file is not None:
            argv += ["-F", str(t.config_file)]
        scratch = probe.get(self.known_hosts_name()) if probe else None
        # Safety first: ssh keeps the first value it sees, so a pasted -o cannot undo these.
        argv += [
            "-o", "BatchMode=yes",
            "-o", f"StrictHostKeyChecking={'no' if scratch else strict}",
            "-o", f"UserKnownHostsFile={option_path(scratch or self.known_hosts)}",
        ]
        if scratch:  # learn the key from this host alone, never lean on a system-wide one
            argv += ["-o", "GlobalKnownHostsFile=/dev/null"]
        if not own:
            argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_path}"]
        else:
            argv += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        if hops:  # before the user's options: the first ProxyCommand/ProxyJump seen wins

            def policy(hop: Hop) -> KeyPolicy:
                if probe and hop.known_name in probe:
                    return KeyPolicy("no", (str(probe[hop.known_name]),), no_global=True)
                return KeyPolicy(strict, (str(self.known_hosts), *hop.known_files))

            argv += ["-o", "ProxyCommand=" + proxy_command(
                hops, policy, config_file=t.config_file, connect_timeout=self.connect_timeout,
                log=self._hop_log)]
        if probe is None and self._config is not None and (fast := self._fast_ciphers()):
            argv += ["-o", f"Ciphers={fast}"]
        for option in t.options:
            argv += ["-o", option]
        if not own:
            argv += ["-o", f"ControlPersist={self.control_persist}"]
        argv += [
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

    def _fast_ciphers(self) -> str | None:
        """The user's own cipher list (as ``ssh -G`` resolves it) with AES-GCM moved to the
        front, or None if it is already there or not in the list. Files are the bulk of what
        rgt sends: with AES instructions, aes128-gcm costs half the CPU per byte of the
        default chacha20-poly1305 (427 vs 218 MB/s on one core here), and on a link of
        several streams the CPU is what runs out. The set is the user's; only the order moves,
        and the server still has its say."""
        listed = [c for c in " ".join(self._dump().get("ciphers", [])).split(",") if c]
        gcm = [c for c in _GCM if c in listed]
        if not gcm or listed[0] in gcm:
            return None
        return ",".join(gcm + [c for c in listed if c not in gcm])

    def _hop_log(self, index: int) -> str:
        # Next to the master sockets: private to this user, short, no spaces.
        return f"{self.control_path.removesuffix('-%C')}-hop{index}.log"

    def jump_hosts(self) -> list[Hop]:
        """The jump hosts on the way to the box (-J, ProxyJump here or in the user's config),
        first first; empty for a direct connection or the user's own ProxyCommand."""
        if self._hops is None:
            spec = self.resolved().get("proxyjump", "none")
            self._hops = [] if spec == "none" else resolve_chain(spec, self.target.config_file)
        return self._hops

    def _first_contact(self, hops: list[Hop]) -> bool:
        """Without accept-new (OpenSSH < 7.6): record the key of every hop that has none in any
        file ssh will check, by connecting once with each such hop checked against an empty
        scratch file. Whether every hop's key is now known; raises `Unreachable` if the probe
        could not reach a hop (the command would only wait for the same timeout again)."""
        cfg = self._dump()
        box_files = [self.known_hosts, *" ".join(cfg.get("globalknownhostsfile", [])).split()]
        files = {self.known_hosts_name(): box_files}
        for hop in hops:
            files.setdefault(hop.known_name,
                             [self.known_hosts, *hop.known_files, *hop.global_files])
        unknown = [name for name, where in files.items() if not is_known(name, where)]
        if not unknown:
            return True

        def probe(scratch: dict[str, Path]) -> tuple[int, str]:
            argv = [*self._build(hops, "yes", probe=scratch), self.target.host, "exit 0"]
            self._mark_hop_logs()
            try:
                rc, _, err = run_local(argv, stdin=None,
                                       timeout=self.connect_timeout * (len(hops) + 1) + 15)
            except subprocess.TimeoutExpired:
                return 255, ""
            return rc, err

        recorded, rc, err = record_first_contact(unknown, probe, self.known_hosts)
        if set(unknown) <= recorded:
            return True
        if rc == 255 and isinstance(problem := self._diagnose(err), Unreachable):
            raise problem
        return False

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
        limit: int | None = None,
        idle: float | None = None,
    ) -> Result:
        """Run `command` under bash on the box. Secrets go in `stdin`, never in `command`.
        With `limit`, at most that many bytes of stdout are read (`Result.truncated`), and
        `idle` seconds without one raise `Stalled`."""
        argv = [*self.ssh_argv, self.target.host, "bash -c " + shlex.quote(command)]
        for attempt in (1, 2):
            try:
                rc, data, err = run_bytes(argv, stdin=stdin, timeout=timeout, limit=limit,
                                          idle=idle)
            except IdleExpired:
                raise Stalled.after_idle(self.where, command, idle or 0) from None
            except subprocess.TimeoutExpired:
                raise CommandTimeout.after(
                    self.where, command, timeout, "it may still be running on the box"
                ) from None
            if rc == 255 and attempt == 1 and any(m in err for m in _MUX_FAILURE):
                self.close()  # a master whose link died; the next ssh builds a fresh one
                continue
            break
        out = data.decode(errors="replace")
        if rc == TRUNCATED:
            return Result(rc, out, err, truncated=True, data=data)
        if rc == 255 and (problem := self._diagnose(err)) is not None:
            raise problem
        if bash_missing(rc, err):  # nothing ran, whatever `check` says
            raise BashMissing.on(self.where, err)
        result = Result(rc, out, err, data=data if limit is not None else b"")
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
        return self._move("send", local, remote, f"pushing {local} to {self.where}:{remote}",
                          timeout, retries, progress, exclude)

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
        return self._move("receive", local, remote, f"pulling {self.where}:{remote} to {local}",
                          timeout, retries, progress, exclude)

    def _move(self, local_role: str, local: Path, remote: str, what: str, timeout: float,
              retries: int, progress: Progress | None, exclude: Sequence[str]) -> TransferStats:
        """rgt's engine at both ends of one or more ssh sessions (the first over the shared
        master): it needs only the box's Python, and the user's login shell, not bash,
        starts it."""
        pushing = local_role == "send"
        far = shlex.join(far_command(self.python, "receive" if pushing else "send", remote,
                                     bwlimit=self.bwlimit))
        argv = [*self.ssh_argv, self.target.host, far]
        # the first session rides the master; each further stream opens its own connection
        own = [*self._build(self.jump_hosts(), host_key_checking(), shared=False),
               self.target.host, far]
        return move(argv, more_argv=own, local_role=local_role, root=local, what=what,
                    timeout=timeout, retries=retries, progress=progress, exclude=exclude,
                    bwlimit=self.bwlimit, python=self.python, diagnose=self._diagnose,
                    streams=self.streams, rtt_hint=self._tcp_round_trip)

    def _tcp_round_trip(self) -> float | None:
        """One TCP handshake's time to the box's sshd, or None where ssh does not connect
        to it directly (a jump host, the user's own ProxyCommand) or it does not answer in
        time. An ssh handshake is ~8 round trips (2 s at 100 ms): knowing the round trip
        before the first one is done lets a transfer open its extra streams alongside it."""
        cfg = self.resolved()
        if cfg.get("proxyjump", "none") != "none" or cfg.get("proxycommand", "none") != "none":
            return None
        try:
            port = int(cfg.get("port", self.target.port or 22))
            started = time.monotonic()
            with socket.create_connection((cfg.get("hostname", self.target.host), port),
                                          timeout=min(5, self.connect_timeout)):
                return time.monotonic() - started
        except (OSError, ValueError):
            return None

    # -- connection --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the shared master connection (the next command opens a new one)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(
                [*self._build([], host_key_checking()), "-O", "exit", self.target.host],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                timeout=10, check=False,
            )

    def __enter__(self) -> SshTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resolved(self) -> dict[str, str]:
        """What ssh makes of the target after reading its config (``ssh -G``): hostname,
        port, user, hostkeyalias, proxyjump..."""
        if self._resolved is None:
            self._resolved = {k: v[0] for k, v in self._dump().items()}
        return self._resolved

    def _dump(self) -> dict[str, list[str]]:
        if self._config is None:
            # Without jump hosts: ssh -G shows the ProxyJump we would otherwise replace.
            self._config = dump_config(
                [*self._build([], host_key_checking()), "-G", self.target.host])
        return self._config

    def known_hosts_name(self) -> str:
        """The name this box's key is filed under in known_hosts (``[host]:port`` off 22)."""
        return known_name(self._dump(), self.target.host, self.target.port)

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
        """Name an ssh-level failure from its stderr, or None if it is not one: its cause (host
        key changed or unknown, key refused, passphrase needed, unreachable) and its hop (a
        jump host, or the box)."""
        hops = self._hops or []
        hop = None
        # A jump host failed if the box's ssh lost its proxy before the banner and a hop said
        # something since this command began (-E: a hop's words never reach our stderr).
        if hops and _NO_BANNER.search(stderr) and (
            failed := read_hop_logs(self._hop_log, self._hop_marks)
        ) is not None:
            at, said = failed
            hop, stderr = hops[at], said  # the cause is in the hop's own words
            if "forwarding failed" in stderr:
                answered = f"(it answered: {_one_line(stderr, 120)})"
                if at + 1 < len(hops):
                    return Unreachable(
                        f"the jump host {hop.label} could not connect to the next jump host "
                        f"{hops[at + 1].label} {answered}: check that one's address and port "
                        "(-J, or ProxyJump in your ssh config)",
                        rc=255, stderr=stderr,
                    )
                return Unreachable(
                    f"the jump host {hop.label} could not connect to the box "
                    f"{self._host_port()} {answered}: check that the box is running, that "
                    "the host and port are current (rental consoles change them when an "
                    "instance restarts) and that the jump host allows forwarding "
                    "(AllowTcpForwarding)",
                    rc=255, stderr=stderr,
                )
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or _CHANGED_FOR.search(stderr) or (
            "Host key verification failed" in stderr and _OFFENDING.search(stderr)
        ):
            return self._key_changed(stderr, hop)
        if "Host key verification failed" in stderr or _NOT_KNOWN.search(stderr):
            return self._key_unknown(stderr, hop)
        if "Permission denied (" in stderr:
            return self._key_refused(stderr, hop)
        who = f"the jump host {hop.label}" if hop else None
        if m := _CONNECT.search(stderr):
            return self._unreachable(f"{m.group(1)}:{m.group(2)}", m.group(3).strip(), stderr,
                                     who)
        if m := _RESOLVE.search(stderr):
            return self._unreachable(m.group(1), m.group(2).strip(), stderr, who)
        if any(hint in stderr for hint in _UNREACHABLE_HINTS):
            return self._unreachable(self._host_port(), _one_line(stderr, 160), stderr, who)
        if hop is not None:  # the hop said something else: pass its words on, naming it
            return TransportError(
                f"the jump host {hop.label} failed before the box was reached: "
                f"{_one_line(stderr, 160)}",
                rc=255, stderr=stderr,
            )
        if "closed by remote host" in stderr or "Connection closed by" in stderr:
            return TransportError(
                f"the connection to {self._host_port()} dropped: {_one_line(stderr, 160)}",
                rc=255, stderr=stderr,
            )
        return None

    def _key_changed(self, stderr: str, hop: Hop | None) -> HostKeyChanged:
        m = _OFFENDING.search(stderr)
        file = m.group(1) if m else str(self.known_hosts)
        where = f"{file} line {m.group(2)}" if m else file
        named = _CHANGED_FOR.search(stderr)
        name = named.group(1) if named else (hop.known_name if hop else self.known_hosts_name())
        what = "jump host" if hop else "box"
        self._argv = None  # once the old key is forgotten, the next command is first contact
        since = ("since rgt first connected" if file == str(self.known_hosts)
                 else "from the one you recorded")  # a jump host trusted in the user's file
        return HostKeyChanged(
            f"the host key of {f'the jump host {hop.label}' if hop else name} changed {since} "
            f"(old key in {where}); refusing to connect, as this is also "
            f"what an impostor looks like. If the {what} was re-created and the change is "
            "expected, forget the old key with: "
            f"ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(file)}",
            rc=255, stderr=stderr,
        )

    def _key_unknown(self, stderr: str, hop: Hop | None) -> HostKeyUnknown:
        if hop is None:
            cfg = self.resolved()
            host, port = cfg.get("hostname", self.target.host), cfg.get("port", "22")
        else:
            host, port = hop.hostname, str(hop.real_port)
        who = f"the jump host {hop.label}" if hop else self.where
        version = client_version()
        why = (f" (this OpenSSH {version[0]}.{version[1]} cannot do it itself)"
               if version and version < (7, 6) else "")
        self._argv = None  # the next command tries first contact again
        return HostKeyUnknown(
            f"ssh refused {who}: no host key for it is recorded, and rgt records one only on "
            f"first contact{why}. Retry; if this persists, check the key with the provider and "
            f"record it with: ssh-keyscan -p {port} {shlex.quote(host)} >> "
            f"{shlex.quote(str(self.known_hosts))}",
            rc=255, stderr=stderr,
        )

    def _key_refused(self, stderr: str, hop: Hop | None) -> AuthenticationFailed:
        who = f"the jump host {hop.label}" if hop else self.where
        if m := _TOO_OPEN.search(stderr):
            key = shlex.quote(m.group(2))
            return AuthenticationFailed(
                f"cannot log in to {who}: ssh ignored your key {m.group(2)}, whose permissions "
                f"({m.group(1)}) let other users read it; fix them with: chmod 600 {key}",
                rc=255, stderr=stderr,
            )
        if hop is None:
            identities = self._dump().get("identityfile", [])
            agent = self.resolved().get("identityagent")
        else:
            identities, agent = list(hop.identities), hop.agent
        if locked := locked_keys(identities, agent):
            return PassphraseNeeded(
                f"cannot log in to {who}: your key {locked[0]} is passphrase-protected, no "
                "ssh-agent holds it, and rgt runs ssh in batch mode, which cannot ask for the "
                f"passphrase; load it into your agent once with: ssh-add {shlex.quote(locked[0])}",
                rc=255, stderr=stderr,
            )
        if hop is not None:
            return AuthenticationFailed(
                f"the jump host {hop.label} refused our ssh key (the box was not reached): add "
                "your public key to the jump host's ~/.ssh/authorized_keys, or name its key in "
                f"your ssh config (IdentityFile under Host {hop.host}); -i is for the box only",
                rc=255, stderr=stderr,
            )
        return AuthenticationFailed(
            f"{self.where} refused our ssh key: add your public key to the box's "
            "~/.ssh/authorized_keys, or give the right key with -i",
            rc=255, stderr=stderr,
        )

    def _host_port(self) -> str:
        cfg = self.resolved()
        return f"{cfg.get('hostname', self.target.host)}:{cfg.get('port', self.target.port or 22)}"

    def _unreachable(self, where: str, reason: str, stderr: str,
                     hop: str | None = None) -> Unreachable:
        if hop is not None:
            return Unreachable(  # the hop's label already names its host and port
                f"cannot reach {hop} ({reason}): check its address and port (-J, or "
                "ProxyJump in your ssh config) and that this network reaches it",
                rc=255, stderr=stderr,
            )
        return Unreachable(
            f"cannot reach {where} ({reason}): check that the box is running and that the "
            "host and port are current (rental consoles change them when an instance restarts)",
            rc=255, stderr=stderr,
        )


def _remote_path(path: str) -> str:
    """ssh starts in the home directory, so ``~/x`` is ``x`` (and survives quoting)."""
    if path in ("~", "~/"):
        return "."
    if path.startswith("~/"):
        return path[2:]
    if not path:
        raise UserError("empty remote path")
    return path
