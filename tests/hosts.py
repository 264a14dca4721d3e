"""Several "hosts" on this machine, for multi-node tests: each a network namespace with its own
address on one private LAN, its own hostname (UTS namespace) and, where asked, disks of its
own (a mount namespace with a tmpfs over chosen paths), as separate machines would be.

    lan = Lan(2).start()            # hosts 0 and 1, at lan.address(0), lan.address(1)
    subprocess.Popen([*lan.exec_prefix(1), "sshd", ...])   # runs "on" host 1
    lan.stop()

The hosts are joined by a veth pair each to a bridge in this namespace, which also holds
`lan.laptop` (the address the tests, the "laptop", reach the hosts from): every host reaches
every other and the laptop reaches all, with no IP forwarding turned on anywhere.

`exec_prefix(i)` runs a command inside host i: its network, its hostname, its process table
(a pid namespace, the command its first process), and (when the Lan was made with
`private=[paths]`) a fresh tmpfs on each of those paths that only processes of that host see.
A Popen's pid is `unshare`'s; killing it kills the host's processes with it.

Needs root (ip netns, unshare). `unavailable()` says why it cannot run here.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence

_serial = itertools.count()


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (iproute2 / util-linux)"
    probe = f"rgtprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Lan:
    """`count` hosts on 10.(200+k).N.0/24 (k: this process's serial, so parallel tests and
    xdist workers do not collide: the subnet also carries the pid)."""

    def __init__(self, count: int, *, private: Sequence[str] = (), name: str = "node") -> None:
        serial = next(_serial)
        tag = f"{os.getpid() % 10000}{serial}"
        self.count = count
        self.private = list(private)
        self.bridge = f"rgtbr{tag}"[:15]
        self.namespaces = [f"rgt{tag}n{i}" for i in range(count)]
        self.hostnames = [f"{name}{i}" for i in range(count)]
        # 10.X.Y.0/24 from the pid and serial: distinct per test process
        x, y = 100 + (os.getpid() // 250) % 150, (os.getpid() % 250 + serial * 7) % 250
        self.prefix = f"10.{x}.{y}"
        self.laptop = f"{self.prefix}.254"
        self._made: list[str] = []

    def address(self, i: int) -> str:
        return f"{self.prefix}.{i + 1}"

    def start(self) -> Lan:
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._made.append("bridge")
            _ip("addr", "add", f"{self.laptop}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, ns in enumerate(self.namespaces):
                _ip("netns", "add", ns)
                self._made.append(ns)
                outer, inner = f"{self.bridge[:9]}h{i}o", f"{self.bridge[:9]}h{i}i"
                _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
                _ip("link", "set", outer, "master", self.bridge)
                _ip("link", "set", outer, "up")
                _ip("link", "set", inner, "netns", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", inner)
                _ip("-n", ns, "link", "set", inner, "up")
        except Exception:
            self.stop()
            raise
        return self

    def exec_prefix(self, i: int) -> list[str]:
        """argv that runs the rest "on" host i (network, hostname, processes, private disks)."""
        steps = [f"hostname {shlex.quote(self.hostnames[i])}"]
        for path in self.private:
            steps.append(f"mkdir -p {shlex.quote(path)} && mount -t tmpfs -o size=512m "
                         f"rgt-host{i} {shlex.quote(path)}")
        script = " && ".join(steps) + ' && exec "$@"'
        # its own process table too (a runner looks for a run's processes by their
        # environment; on one kernel it would see the other host's): pid namespace, /proc
        return ["ip", "netns", "exec", self.namespaces[i],
                "unshare", "--uts", "--mount", "--propagation", "private", "--pid", "--fork",
                "--kill-child", "--mount-proc", "sh", "-c", script, "host"]

    def run(self, i: int, command: str, **kwargs) -> subprocess.CompletedProcess[str]:
        """A shell command on host i (network and hostname; not its private disks)."""
        return subprocess.run(["ip", "netns", "exec", self.namespaces[i], "sh", "-c", command],
                              capture_output=True, text=True, **kwargs)

    def cut(self, i: int) -> None:
        """Host i drops off the LAN (its link goes down): it vanishes mid-run, as a dead
        machine does, while its processes live on unseen."""
        _ip("link", "set", f"{self.bridge[:9]}h{i}o", "down")

    def join(self, i: int) -> None:
        """Host i's link comes back up (after `cut`)."""
        _ip("link", "set", f"{self.bridge[:9]}h{i}o", "up")

    def stop(self) -> None:
        for ns in self.namespaces:
            if ns in self._made:
                # whatever still runs in the namespace goes with it
                pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                      text=True).stdout.split()
                for pid in pids:
                    with contextlib.suppress(OSError, ValueError):
                        os.kill(int(pid), 9)
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if "bridge" in self._made:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        self._made.clear()

    def __enter__(self) -> Lan:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


DISK = "/srv/rgt-node"  # each host's own disk, at the same path on all (as on real machines)


@contextlib.contextmanager
def machines(count: int, root, keys, *, port: int = 2222):
    """`count` hosts, each with its own disk at DISK and its own sshd on `port` (keys: a
    tests/sshd.SshKeys): yields (lan, servers). tmux's socket lives in /tmp, which the hosts
    share, so each sshd points tmux at its own disk."""
    from sshd import SshServer

    lan = Lan(count, private=[DISK]).start()
    servers = []
    try:
        for i in range(count):
            servers.append(SshServer(root / f"sshd{i}", keys, port=port,
                                     extra_config=f"SetEnv TMUX_TMPDIR={DISK}",
                                     host=lan.address(i), exec_prefix=lan.exec_prefix(i)).start())
        yield lan, servers
    finally:
        for server in servers:
            server.stop()
        lan.stop()


def two_machines(tmp_path_factory, sshd_keys):
    """A test module's two hosts (`machines(2, ...)`), skipped where namespaces cannot be made:
    a fixture body, `name = pytest.fixture(scope="module")(hosts.two_machines)`."""
    import pytest

    why = unavailable()
    if why:
        pytest.skip(why)
    with machines(2, tmp_path_factory.mktemp("group"), sshd_keys) as made:
        yield made
