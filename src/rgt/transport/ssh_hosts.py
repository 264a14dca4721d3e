"""Host keys and jump hosts for `SshTransport`: every hop held to the same strict rules.

Three things the user's OpenSSH client does not do for us:

- **Jump hosts.** A ProxyJump hop is a second ssh that OpenSSH starts with only ``-F``: none
  of our ``-o`` options reach it, so the bastion's key would be checked against the user's own
  known_hosts only, with ssh asking a question nobody is there to answer. We start that hop
  ourselves (an explicit ProxyCommand) with rgt's known_hosts first and the user's files after
  it, so keys they already trust still count and a new key is recorded in rgt's file.
- **Old clients.** ``StrictHostKeyChecking=accept-new`` arrived in OpenSSH 7.6; RHEL/CentOS 7
  ship 7.4, which refuses the option and every connection with it. There, host keys are
  checked with ``yes`` and rgt records a key on first contact itself (`record_first_contact`).
- **Locked keys.** In batch mode ssh never asks for a passphrase; it silently skips a key it
  cannot unlock and the server says "Permission denied". `locked_keys` finds the keys that
  were skipped, so the error can say ``ssh-add KEY`` instead of "add your public key".
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from rgt.errors import UserError

MAX_HOPS = 8
"""Jump hosts that name jump hosts in the user's config: a cycle stops here."""


# -- the client's version ---------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _version_of(ssh: str) -> tuple[int, int] | None:
    proc = subprocess.run([ssh, "-V"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=10, check=False)
    # "OpenSSH_7.4p1, OpenSSL 1.0.2k-fips  26 Jan 2017" (on stderr); "OpenSSH_for_Windows_8.1p1"
    m = re.search(r"OpenSSH\w*?_(\d+)\.(\d+)", proc.stderr + proc.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else None


def client_version() -> tuple[int, int] | None:
    """(major, minor) of the `ssh` on PATH, asked once per process and ssh binary; None if it
    does not say (not OpenSSH: assume it is current)."""
    ssh = shutil.which("ssh")
    if ssh is None:
        raise UserError("the OpenSSH client `ssh` is not installed or not on PATH: install it "
                        "(apt-get install openssh-client, dnf install openssh-clients)")
    return _version_of(ssh)


def accepts_new() -> bool:
    """Whether this ssh knows ``StrictHostKeyChecking=accept-new`` (OpenSSH 7.6+)."""
    version = client_version()
    return version is None or version >= (7, 6)


def host_key_checking() -> str:
    """The StrictHostKeyChecking value for every hop: record a new key, refuse a changed one.
    Before 7.6 `yes`, with the first contact recorded by `record_first_contact`."""
    return "accept-new" if accepts_new() else "yes"


# -- destinations --------------------------------------------------------------------------


def split_host_port(text: str, whole: str) -> tuple[str, int | None]:
    """``host``, ``host:port`` or ``[v6-address]:port`` → (host, port)."""
    port: str | None = None
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise UserError(f"cannot read the host {text!r} in {whole!r}")
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    elif ":" in text:
        raise UserError(f"write an IPv6 address in brackets, [{text}], in {whole!r}")
    else:
        host = text
    if not host or host.startswith("-"):
        raise UserError(f"no host in {whole!r}")
    if port is None:
        return host, None
    if not port.isdecimal():  # isdigit() passes '²', which int() refuses
        raise UserError(f"ssh port must be a number, got {port!r} in {whole!r}")
    return host, int(port)


def split_url(url: str, whole: str) -> tuple[str | None, str, int | None]:
    """``ssh://[user[;params]@]host[:port]`` → (user, host, port), as OpenSSH 7.7+ reads it
    (a path is refused, as ssh refuses it)."""
    rest = url[len("ssh://"):]
    if any(c in rest for c in "/?#"):
        raise UserError(f"an ssh:// URL names a host, not a path: {url!r} in {whole!r}")
    user_part, at, hostport = rest.rpartition("@")
    user = unquote(user_part.split(";", 1)[0]) if at else None
    if at and not user:
        raise UserError(f"empty user name in {whole!r}")
    host, port = split_host_port(hostport, whole)
    return user, host, port


def split_jump(spec: str) -> list[tuple[str | None, str, int | None]]:
    """A ProxyJump value (``[user@]host[:port]`` or ``ssh://...``, comma-separated) → hops."""
    hops = []
    for part in spec.split(","):
        part = part.strip()
        if part.startswith("ssh://"):
            hops.append(split_url(part, spec))
            continue
        user, at, hostport = part.rpartition("@")
        hops.append((user if at else None, *split_host_port(hostport, spec)))
    return hops


# -- what ssh makes of a host (ssh -G) -------------------------------------------------------


def dump_config(argv: Sequence[str]) -> dict[str, list[str]]:
    """``ssh ... -G HOST`` as {option: [values]} (identityfile and a few others repeat)."""
    proc = subprocess.run([*argv], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=10, check=False)
    found: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        if value:
            found.setdefault(key.lower(), []).append(value)
    return found


def known_name(config: dict[str, list[str]], host: str, port: int | None) -> str:
    """The name a host's key is filed under in known_hosts (``[host]:port`` off port 22)."""
    if alias := config.get("hostkeyalias"):
        return alias[0]
    hostname = config.get("hostname", [host])[0]
    real = config.get("port", [str(port or 22)])[0]
    return hostname if real == "22" else f"[{hostname}]:{real}"


@dataclass(frozen=True)
class Hop:
    """One jump host on the way to the box, as written and as the user's config resolves it."""

    host: str
    """The destination as written (an alias, a name or an address)."""
    user: str | None
    port: int | None
    hostname: str
    real_port: int
    known_name: str
    known_files: tuple[str, ...]
    """The user's own known_hosts files for this host (read after rgt's)."""
    global_files: tuple[str, ...]
    identities: tuple[str, ...]
    agent: str | None
    proxyjump: str | None

    @property
    def label(self) -> str:
        where = f"{self.hostname}:{self.real_port}"
        return where if self.host == self.hostname else f"{self.host} ({where})"


def resolve_hop(user: str | None, host: str, port: int | None,
                config_file: Path | None) -> Hop:
    argv = ["ssh"] + (["-F", str(config_file)] if config_file else [])
    argv += (["-l", user] if user else []) + (["-p", str(port)] if port else [])
    cfg = dump_config([*argv, "-G", host])

    def many(key: str) -> tuple[str, ...]:
        return tuple(v for value in cfg.get(key, []) for v in value.split())

    jump = cfg.get("proxyjump", ["none"])[0]
    return Hop(
        host=host, user=user, port=port, hostname=cfg.get("hostname", [host])[0],
        real_port=int(cfg.get("port", [str(port or 22)])[0]),
        known_name=known_name(cfg, host, port), known_files=many("userknownhostsfile"),
        global_files=many("globalknownhostsfile"), identities=tuple(cfg.get("identityfile", [])),
        agent=cfg.get("identityagent", [None])[0], proxyjump=None if jump == "none" else jump,
    )


def resolve_chain(spec: str, config_file: Path | None) -> list[Hop]:
    """Every hop to the box, first first: the hops of `spec`, and before them those the user's
    config names for the first one (OpenSSH honours a jump host's own ProxyJump there only)."""
    hops: list[Hop] = []
    while spec and len(hops) < MAX_HOPS:
        these = [resolve_hop(u, h, p, config_file) for u, h, p in split_jump(spec)]
        hops[:0] = these
        spec = these[0].proxyjump or ""
    if spec:
        raise UserError(f"more than {MAX_HOPS} jump hosts (a ProxyJump loop in your ssh "
                        f"config?) before {hops[-1].label}")
    return hops


# -- the jump hop's own ssh ------------------------------------------------------------------


@dataclass(frozen=True)
class KeyPolicy:
    """How one hop's host key is checked: StrictHostKeyChecking and the files read, in order
    (ssh records a new key in the first)."""

    strict: str
    files: tuple[str, ...]
    no_global: bool = False
    """Hide the system-wide known_hosts (a first-contact probe must not lean on it)."""


def option_path(path: str | Path) -> str:
    """A path as an ssh option value: ssh splits some values on spaces unless quoted (macOS
    keeps app data under "Application Support")."""
    text = str(path)
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _literal(text: str) -> str:
    # ProxyCommand expands %h, %p, %r ...: a literal % must reach it doubled.
    return text.replace("%", "%%")


def proxy_command(hops: Sequence[Hop], policy: Callable[[Hop], KeyPolicy], *,
                  config_file: Path | None, connect_timeout: int,
                  log: Callable[[int], str]) -> str:
    """The ProxyCommand that reaches the last of `hops` (through the ones before it, each its
    own ssh) and forwards to the box: what OpenSSH's ProxyJump runs, plus our options.

    Each hop's ssh writes its errors to ``log(index)`` (-E): a ProxyCommand's stderr goes to
    /dev/null once the master persists (ControlPersist), and with it the only words saying why
    a jump host failed.
    """
    hop = hops[-1]
    rule = policy(hop)
    argv = ["ssh"] + (["-F", str(config_file)] if config_file else [])
    argv += [
        "-o", "BatchMode=yes",
        "-o", f"StrictHostKeyChecking={rule.strict}",
        "-o", "UserKnownHostsFile=" + " ".join(option_path(f) for f in rule.files),
    ]
    if rule.no_global:
        argv += ["-o", "GlobalKnownHostsFile=/dev/null"]
    if len(hops) > 1:
        inner = proxy_command(hops[:-1], policy, config_file=config_file,
                              connect_timeout=connect_timeout, log=log)
        argv += ["-o", f"ProxyCommand={inner}"]
    argv += [
        "-o", f"ConnectTimeout={connect_timeout}",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=4",
        "-o", "LogLevel=ERROR",
        "-E", log(len(hops) - 1),
    ]
    argv += (["-l", hop.user] if hop.user else []) + (["-p", str(hop.port)] if hop.port else [])
    words = [_literal(a) for a in argv] + ["-W", "[%h]:%p", _literal(hop.host)]
    return shlex.join(words)


def log_sizes(log: Callable[[int], str], count: int) -> dict[int, int]:
    """Where each hop's log ends now: what a hop says after this is about the next command."""
    sizes = {}
    for index in range(count):
        try:
            sizes[index] = os.stat(log(index)).st_size
        except OSError:
            sizes[index] = 0
    return sizes


def read_hop_logs(log: Callable[[int], str], since: dict[int, int]) -> tuple[int, str] | None:
    """The first hop whose ssh logged an error after `since` (see `log_sizes`), and what it
    said. A hop fails first: every hop after it (and the box) then only report their proxy
    closing."""
    for index in sorted(since):
        try:
            with open(log(index), errors="replace") as f:
                f.seek(0, os.SEEK_END)
                f.seek(since[index] if since[index] <= f.tell() else 0)  # shrank: read it all
                text = f.read()
        except OSError:
            continue
        if text.strip():
            return index, text
    return None


# -- first contact without accept-new --------------------------------------------------------


def is_known(name: str, files: Iterable[str | Path]) -> bool:
    """Whether any of `files` holds a key for `name` (hashed entries included)."""
    for path in files:
        path = Path(path).expanduser()
        if not path.is_file():
            continue
        proc = subprocess.run(["ssh-keygen", "-F", name, "-f", str(path)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=10, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            return True
    return False


def record_first_contact(
    unknown: Sequence[str],
    probe: Callable[[dict[str, Path]], tuple[int, str]],
    known_hosts: Path,
) -> tuple[set[str], int, str]:
    """For an ssh without accept-new: learn the keys of the hops named in `unknown` (known_hosts
    names, none of them in any file ssh will check) and add them to rgt's `known_hosts`.

    `probe(scratch)` connects once, checking each unknown hop with ``StrictHostKeyChecking=no``
    against its own empty scratch file (every other hop strictly, as usual); ssh writes each
    key it meets there. Nothing is learned for a name that already had a key anywhere, so a
    changed key is still refused afterwards. Returns the names recorded and the probe's rc and
    stderr (to diagnose a probe that reached nothing).
    """
    recorded: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="rgt-first-contact-") as scratch:
        files = {name: Path(scratch) / f"hop{i}" for i, name in enumerate(unknown)}
        rc, stderr = probe(files)
        lines = []
        for name, path in files.items():
            learned = path.read_text().splitlines() if path.exists() else []
            if learned:
                recorded.add(name)
                lines += learned
        if lines:
            try:
                known_hosts.parent.mkdir(parents=True, exist_ok=True)
                with open(known_hosts, "a") as f:
                    f.write("".join(line + "\n" for line in lines))
            except OSError as exc:
                raise UserError(f"cannot record host keys in {known_hosts}: {exc}") from None
    return recorded, rc, stderr


# -- keys ssh could not unlock ---------------------------------------------------------------


def _fingerprint(key: Path) -> str | None:
    pub = Path(f"{key}.pub")
    proc = subprocess.run(["ssh-keygen", "-l", "-f", str(pub if pub.is_file() else key)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10,
                          check=False)
    m = re.search(r"SHA256:\S+", proc.stdout)
    return m.group(0) if m else None


def _agent_fingerprints(agent: str | None) -> set[str]:
    """Fingerprints of the keys the agent ssh would ask holds (IdentityAgent, else
    SSH_AUTH_SOCK); empty when there is none."""
    sock = os.environ.get("SSH_AUTH_SOCK")
    if agent is not None and agent.lower() == "none":
        return set()
    if agent is not None and agent != "SSH_AUTH_SOCK":
        sock = os.path.expanduser(agent)
    if not sock:
        return set()
    proc = subprocess.run(["ssh-add", "-l"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=10, check=False,
                          env={**os.environ, "SSH_AUTH_SOCK": sock})
    return set(re.findall(r"SHA256:\S+", proc.stdout)) if proc.returncode == 0 else set()


def locked_keys(identities: Iterable[str], agent: str | None) -> list[str]:
    """The identity files ssh would offer that are passphrase-protected and that no agent holds:
    in batch mode ssh skips them without a word."""
    locked = []
    for name in identities:
        path = Path(name).expanduser()
        if not path.is_file():
            continue
        proc = subprocess.run(["ssh-keygen", "-y", "-P", "", "-f", str(path)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=10, check=False)
        if proc.returncode != 0 and "passphrase" in proc.stderr:
            locked.append(str(path))
    if not locked:
        return []
    held = _agent_fingerprints(agent)
    return [key for key in locked if _fingerprint(Path(key)) not in held]
