"""A real OpenSSH server on 127.0.0.1 for tests and benchmarks.

Import it from any test folder (``tests/`` is on sys.path when pytest runs there, see
tests/transport/conftest.py) and use the `sshd_keys` + `sshd_server` fixtures, or drive
`SshServer` by hand (bench/transfer.py does)::

    server = SshServer(workdir, keys=SshKeys.generate(keydir)).start()
    transport = SshTransport(server.target, known_hosts=server.known_hosts)
    ...
    server.kill()      # every connection drops, as when a box's network dies
    server.restart()   # same port, same host key
    server.stop()

Needs root (sshd's privilege separation) and /usr/sbin/sshd; `unavailable()` says why not.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rgt.transport import SshTarget

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = next(
    (p for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                 "/usr/libexec/sftp-server") if os.path.exists(p)),
    "internal-sftp",
)


def unavailable() -> str | None:
    """Why a real sshd cannot run here, or None if it can."""
    if not os.path.exists(SSHD):
        return f"{SSHD} not installed (apt-get install openssh-server)"
    for tool in ("ssh", "ssh-keygen"):  # no rsync: rgt moves files with its own engine
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    if os.geteuid() != 0:
        return "sshd needs root here (privilege separation, login as root)"
    return None


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rgt-test", "-f", str(path)],
        check=True, stdin=subprocess.DEVNULL,
    )


@dataclass(frozen=True)
class SshKeys:
    """A server host key and a client login key (generated once per test session)."""

    host_key: Path
    client_key: Path

    @classmethod
    def generate(cls, directory: Path) -> SshKeys:
        directory.mkdir(parents=True, exist_ok=True)
        keys = cls(directory / "ssh_host_ed25519_key", directory / "client_ed25519")
        for key in (keys.host_key, keys.client_key):
            if not key.exists():
                _keygen(key)
        return keys


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    """All descendants of `pid`, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class SshServer:
    """One sshd on `host`:`port` (127.0.0.1 unless told), configured and logged under `workdir`.

    `exec_prefix` goes before sshd's own argv: bench/transfer.py starts it with
    ``ip netns exec NS`` (which execs sshd, so `proc` is still sshd) and listens on that
    namespace's address.
    """

    def __init__(self, workdir: Path, keys: SshKeys | None = None, port: int | None = None,
                 extra_config: str = "", *, host: str = "127.0.0.1",
                 exec_prefix: Sequence[str] = ()):
        self.workdir = Path(workdir)
        self.extra_config = extra_config  # more sshd_config lines, e.g. "SetEnv A=b"
        self.host = host
        self.exec_prefix = list(exec_prefix)
        self.workdir.mkdir(parents=True, exist_ok=True)
        shared = keys or SshKeys.generate(self.workdir / "keys")
        # A private copy of the host key, so regenerate_host_key() touches only this server.
        self.host_key = self.workdir / "ssh_host_ed25519_key"
        for suffix in ("", ".pub"):
            shutil.copy(f"{shared.host_key}{suffix}", f"{self.host_key}{suffix}")
        self.host_key.chmod(0o600)
        self.client_key = shared.client_key
        self.port = port or free_port()
        self.known_hosts = self.workdir / "known_hosts"
        self.authorized_keys = self.workdir / "authorized_keys"
        self.authorized_keys.write_text(Path(f"{self.client_key}.pub").read_text())
        self.config = self.workdir / "sshd_config"
        self.log = self.workdir / "sshd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> SshTarget:
        return SshTarget(self.host, port=self.port, user="root", identity=self.client_key)

    def _write_config(self) -> None:
        self.config.write_text(
            f"""\
Port {self.port}
ListenAddress {self.host}
HostKey {self.host_key}
PidFile {self.workdir / "sshd.pid"}
AuthorizedKeysFile {self.authorized_keys}
PermitRootLogin yes
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
MaxSessions 64
MaxStartups 64:30:128
LogLevel INFO
Subsystem sftp {SFTP_SERVER}
{self.extra_config}
"""
        )

    def start(self, timeout: float = 10) -> SshServer:
        if self.proc is not None and self.proc.poll() is None:
            return self
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
        self._write_config()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [*self.exec_prefix, SSHD, "-D", "-e", "-f", str(self.config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sshd did not accept on {self.host}:{self.port}: {self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the listener and every per-connection sshd: all connections drop at once.

        The users' processes (a remote rsync, a sleep) are left to find their pipes closed,
        exactly as on a box whose network vanished: rsync then saves its partial file.
        """
        if self.proc is None:
            return
        # per-connection processes: "sshd" up to OpenSSH 9.7, "sshd-session" from 9.8
        sessions = [p for p in _children(self.proc.pid) if _comm(p) in ("sshd", "sshd-session")]
        victims = [self.proc.pid, *sessions]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        """Kill sshd and everything it started."""
        if self.proc is None:
            return
        for pid in [self.proc.pid, *_children(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def restart(self) -> SshServer:
        """Back up on the same port with the same host key (after kill() or stop())."""
        self.kill()
        return self.start()

    def regenerate_host_key(self) -> None:
        """A new host key, as a re-created box has; restarts sshd if it was running."""
        running = self.proc is not None
        for suffix in ("", ".pub"):
            Path(f"{self.host_key}{suffix}").unlink(missing_ok=True)
        _keygen(self.host_key)
        if running:
            self.restart()

    def write_ssh_config(self, alias: str = "box-alias") -> Path:
        """An ssh config file where `alias` names this server (use as SshTarget.config_file)."""
        path = self.workdir / "ssh_config"
        path.write_text(
            f"""\
Host {alias}
    HostName {self.host}
    Port {self.port}
    User root
    IdentityFile {self.client_key}
    IdentitiesOnly yes
"""
        )
        return path

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> SshServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


try:
    import pytest
except ImportError:  # a benchmark run without pytest installed
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def sshd_keys(tmp_path_factory: pytest.TempPathFactory) -> SshKeys:
        """Host and client keys, generated once per test session."""
        if (reason := unavailable()) is not None:
            pytest.skip(reason)
        return SshKeys.generate(tmp_path_factory.mktemp("sshd-keys"))

    @pytest.fixture
    def sshd_server(sshd_keys: SshKeys, tmp_path_factory: pytest.TempPathFactory):
        """A fresh sshd for one test (fresh known_hosts too); stopped afterwards."""
        server = SshServer(tmp_path_factory.mktemp("sshd"), keys=sshd_keys).start()
        try:
            yield server
        finally:
            server.stop()


def echo_listener(host: str = "127.0.0.1") -> socket.socket:
    """A TCP server on HOST that answers each connection with b"echo:" + what it read: the
    service an ssh forward reaches (on the box, or on this machine for -R). Close it to stop."""
    listener = socket.socket()
    listener.bind((host, 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"echo:" + conn.recv(1024))

    threading.Thread(target=serve, daemon=True).start()
    return listener
