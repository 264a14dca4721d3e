"""A slow, distant link for benchmarks: a network namespace reached over a delayed, rate-limited
path, so that per-file round trips cost what they cost between a laptop and a rented box.

    with SlowLink(rtt_ms=20, rate_mbit=1000) as link:
        subprocess.run([*link.netns_exec, "/usr/sbin/sshd", ...])   # a "remote" sshd
        ... connect to link.remote_ip from here ...

Two ways to build it, the first that this kernel allows:

* ``netem``: a veth pair, one end in the namespace, ``tc qdisc ... netem delay RTT/2 rate R``
  on both ends (the textbook way; needs CONFIG_NET_SCH_NETEM).
* ``tun``: where netem is missing (some VM kernels), two TUN devices (one in each namespace)
  joined by a userspace delay line in this process: every IP packet is held RTT/2 in each
  direction, and ``tc qdisc ... tbf`` limits the rate on both egresses. TCP sees a real
  round-trip time (its acks wait too), unlike a delaying TCP proxy. The MTU is 64 KB, so the
  delay line handles a few tens of thousands of packets per GB.

Needs root (ip netns, tc, /dev/net/tun). Everything is removed by `stop()` / leaving the
`with` block, also after an error.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import secrets
import select
import struct
import subprocess
import threading
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
TUN_MTU = 65000


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, stdin=subprocess.DEVNULL,
                   capture_output=True, text=True)


def _sh(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)


def _open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


class DelayLine:
    """Pairs of TUN devices joined in this process: every IP packet read from one end of a
    pair is written to the other end rtt_ms/2 after it arrived. One thread serves all pairs
    (a link of its own per host, as bench/multinode_start.py has, or just one). The devices
    are created by `pair` and removed by `stop` (closing a non-persistent TUN removes it and
    its routes); where each end goes (a namespace, addresses, routes) is the caller's."""

    def __init__(self, rtt_ms: float) -> None:
        self.one_way_s = rtt_ms / 2000
        self._peer: dict[int, int] = {}
        self._stop = threading.Event()
        self._pump: threading.Thread | None = None
        self.packets = 0

    def pair(self, near: str, far: str) -> None:
        """Create TUN devices `near` and `far` (in this namespace) and join them."""
        a = _open_tun(near)
        try:
            b = _open_tun(far)
        except OSError:
            os.close(a)
            raise
        self._peer[a], self._peer[b] = b, a

    def start(self) -> DelayLine:
        self._pump = threading.Thread(target=self._run, daemon=True,
                                      name="rgt-bench-delay-line")
        self._pump.start()
        return self

    def _run(self) -> None:
        """Forward every packet from one TUN to its peer, RTT/2 after it arrived."""
        fds = list(self._peer)
        queues: dict[int, collections.deque[tuple[float, bytes]]] = {
            fd: collections.deque() for fd in fds}
        while not self._stop.is_set():
            now = time.monotonic()
            due = None
            for src, q in queues.items():
                while q and q[0][0] <= now:
                    with contextlib.suppress(OSError):  # e.g. ENOBUFS: the packet is lost
                        os.write(self._peer[src], q.popleft()[1])
                if q and (due is None or q[0][0] < due):
                    due = q[0][0]
            timeout = 0.05 if due is None else max(0.0, due - now)
            ready, _, _ = select.select(fds, [], [], timeout)
            stamp = time.monotonic() + self.one_way_s
            for fd in ready:
                for _ in range(256):
                    try:
                        packet = os.read(fd, TUN_MTU + 4096)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        return
                    queues[fd].append((stamp, packet))
                    self.packets += 1

    def stop(self) -> None:
        self._stop.set()
        if self._pump is not None:
            self._pump.join(timeout=5)
            self._pump = None
        for fd in self._peer:  # closing a non-persistent TUN removes its device
            with contextlib.suppress(OSError):
                os.close(fd)
        self._peer.clear()


class SlowLink:
    """This namespace (the user's machine) ←RTT, rate→ a new namespace (the box)."""

    def __init__(self, rtt_ms: float = 20.0, rate_mbit: float = 1000.0,
                 subnet: str = "10.213.77") -> None:
        self.rtt_ms = rtt_ms
        self.rate_mbit = rate_mbit
        tag = secrets.token_hex(3)
        self.netns = f"rgtb-{tag}"
        self.local_dev, self.remote_dev = f"rgtb{tag}a", f"rgtb{tag}b"
        self.local_ip, self.remote_ip = f"{subnet}.1", f"{subnet}.2"
        self.method: str | None = None
        self._line: DelayLine | None = None

    @property
    def packets(self) -> int:
        """Packets that went through the delay line (0 with netem)."""
        return self._line.packets if self._line is not None else 0

    @property
    def netns_exec(self) -> list[str]:
        """Prefix a command with this to run it inside the box's namespace."""
        return ["ip", "netns", "exec", self.netns]

    def describe(self) -> str:
        how = ("veth + tc netem" if self.method == "netem"
               else "TUN pair + userspace delay line + tc tbf (this kernel has no netem)")
        return (f"RTT {self.rtt_ms:g} ms, {self.rate_mbit:g} Mbit/s each way, "
                f"network namespace {self.netns} via {how}")

    # -- building ---------------------------------------------------------------------------

    def start(self) -> SlowLink:
        _ip("netns", "add", self.netns)
        try:
            _ip("-n", self.netns, "link", "set", "lo", "up")
            if not self._try_netem():
                self._build_tun()
        except BaseException:
            self.stop()
            raise
        return self

    def _try_netem(self) -> bool:
        _ip("link", "add", self.local_dev, "type", "veth", "peer", "name", self.remote_dev)
        _ip("link", "set", self.remote_dev, "netns", self.netns)
        half = f"{self.rtt_ms / 2:g}ms"
        qdisc = ["root", "netem", "delay", half, "rate", f"{self.rate_mbit:g}mbit",
                 "limit", "100000"]
        r = _sh(["tc", "qdisc", "add", "dev", self.local_dev, *qdisc])
        if r.returncode != 0:
            _sh(["ip", "link", "del", self.local_dev])  # takes its peer with it
            return False
        r = _sh([*self.netns_exec, "tc", "qdisc", "add", "dev", self.remote_dev, *qdisc])
        if r.returncode != 0:
            raise RuntimeError(f"netem in {self.netns}: {r.stderr.strip()}")
        _ip("addr", "add", f"{self.local_ip}/30", "dev", self.local_dev)
        _ip("link", "set", self.local_dev, "up")
        _ip("-n", self.netns, "addr", "add", f"{self.remote_ip}/30", "dev", self.remote_dev)
        _ip("-n", self.netns, "link", "set", self.remote_dev, "up")
        self.method = "netem"
        return True

    def _build_tun(self) -> None:
        self._line = DelayLine(self.rtt_ms)
        self._line.pair(self.local_dev, self.remote_dev)
        _ip("link", "set", self.remote_dev, "netns", self.netns)
        _ip("addr", "add", self.local_ip, "peer", self.remote_ip, "dev", self.local_dev)
        _ip("link", "set", self.local_dev, "mtu", str(TUN_MTU), "up")
        _ip("-n", self.netns, "addr", "add", self.remote_ip, "peer", self.local_ip,
            "dev", self.remote_dev)
        _ip("-n", self.netns, "link", "set", self.remote_dev, "mtu", str(TUN_MTU), "up")
        # tbf: burst must hold at least one 64 KB packet; the queue about two bandwidth-delay
        # products, so a fast TCP sender meets the rate limit, not tail drops.
        rate_bps = self.rate_mbit * 1e6 / 8
        burst = max(256 * 1024, int(rate_bps / 250))
        limit = max(4 << 20, int(2 * rate_bps * self.rtt_ms / 1000))
        tbf = ["root", "tbf", "rate", f"{self.rate_mbit:g}mbit", "burst", str(burst),
               "limit", str(limit)]
        for prefix, dev in (([], self.local_dev), (self.netns_exec, self.remote_dev)):
            r = _sh([*prefix, "tc", "qdisc", "add", "dev", dev, *tbf])
            if r.returncode != 0:
                raise RuntimeError(f"tc tbf on {dev}: {r.stderr.strip()}")
        self.method = "tun"
        self._line.start()

    # -- tearing down -----------------------------------------------------------------------

    def stop(self) -> None:
        if self._line is not None:
            self._line.stop()
            self._line = None
        _sh(["ip", "link", "del", self.local_dev])  # the veth pair, if that was the method
        _sh(["ip", "netns", "del", self.netns])

    def __enter__(self) -> SlowLink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
