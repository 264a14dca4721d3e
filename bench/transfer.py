"""Transfer benchmark: rgt's `put`/`get` against `rsync -a` and a parallel peer (`rclone` over
sftp with --transfers and --multi-thread-streams), to and from an sshd across real links of
several round trips, in one run; then a transfer cut half-way and resumed, each way.

One SSH channel moves at most its window (~2 MiB) per round trip, so a single stream's rate
falls with distance (rsync and scp have one); rgt splits the work across parallel connections
(rgt.transport.transfer.Streams decides how many, from the measured round trip and rate).
This bench checks that against the tools a user would otherwise reach for.

Each round trip gets its own link (bench/netlink.py: a network namespace behind a delayed,
rate-limited path, 1 Gbit/s by default) and an sshd in that namespace; rgt runs in a child
process as the CLI would (the delay line is Python threads in this one).

    python bench/transfer.py                          # 256 MiB + 1,000 x 2 KiB; 0/20/100/250 ms
    python bench/transfer.py --big-mb 1024            # the issue's tree: 1 GiB + 1,000 files
    python bench/transfer.py --rtts 100 --repeat 3    # one link, median of three
    python bench/transfer.py --streams 4              # rgt with a fixed number of streams

Targets (issue 17): at 100 ms, rgt >= 3x rsync's rate and >= the parallel peer's, each way;
at 0-20 ms rgt no slower than rsync (time <= 1.05x); a transfer cut half-way and resumed
sends <= 1.05x the bytes of a clean one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from netlink import SlowLink  # noqa: E402
from sshd import SshServer, unavailable  # noqa: E402

from rgt.transport import SshTransport  # noqa: E402
from rgt.transport.transfer import tree_size  # noqa: E402


def make_tree(root: Path, big_mb: int, small: int, small_bytes: int) -> None:
    root.mkdir(parents=True)
    with open(root / "big.bin", "wb") as f:
        for _ in range(big_mb):
            f.write(os.urandom(1 << 20))
    for i in range(small):
        d = root / "small" / f"d{i // 1000:03d}"
        if i % 1000 == 0:
            d.mkdir(parents=True)
        (d / f"f{i:05d}.txt").write_bytes(os.urandom(small_bytes))


# rgt runs in a process of its own, as the CLI does: the delay line of bench/netlink.py is
# Python threads in this process, and sharing their interpreter lock would slow rgt's
# engine (and no other tool) for a reason no user has.
_RGT = """
import json, sys
from pathlib import Path
from rgt.transport import SshTarget, SshTransport
host, port, key, known, direction, src, dst = sys.argv[1:]
t = SshTransport(SshTarget(host, port=int(port), user="root", identity=Path(key)),
                 known_hosts=Path(known))
try:
    s = t.put(Path(src), dst) if direction == "put" else t.get(src, Path(dst))
finally:
    t.close()
print(json.dumps({"sent": s.bytes_sent, "received": s.bytes_received, "attempts": s.attempts,
                  "streams": s.streams}))
"""


class Box:
    """One link of a given round trip, an sshd behind it, and the commands that reach it."""

    def __init__(self, work: Path, rtt_ms: float, rate_mbit: float) -> None:
        self.link = SlowLink(rtt_ms=rtt_ms, rate_mbit=rate_mbit).start()
        try:
            self.server = SshServer(work / f"sshd-{rtt_ms:g}", port=22,
                                    host=self.link.remote_ip,
                                    exec_prefix=self.link.netns_exec).start()
        except BaseException:
            self.link.stop()
            raise
        t = SshTransport(self.server.target, known_hosts=self.server.known_hosts)
        t.run("true")  # first contact: record the host key
        t.close()

    def stop(self) -> None:
        self.server.stop()
        self.link.stop()

    def rgt(self, direction: str, src: Path, dst: Path, streams: int) -> tuple[float, dict]:
        s = self.server
        env = dict(os.environ, RGT_STREAMS=str(streams)) if streams else None
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-c", _RGT, s.host, str(s.port), str(s.client_key),
             str(s.known_hosts), direction, str(src), str(dst)],
            check=True, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
        )
        return time.monotonic() - started, json.loads(out.stdout.splitlines()[-1])

    def ssh_opts(self) -> list[str]:
        """What a user would type: their key, host key checking on."""
        s = self.server
        return ["-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={s.known_hosts}",
                "-o", "StrictHostKeyChecking=accept-new", "-i", str(s.client_key)]

    def rsync(self, direction: str, src: Path, dst: Path, cipher: str = "") -> float:
        e = " ".join(["ssh", "-p", str(self.server.port), *(["-c", cipher] if cipher else []),
                      *self.ssh_opts()])
        far = f"root@{self.server.host}:"
        pair = ([f"{src}/", f"{far}{dst}/"] if direction == "put"
                else [f"{far}{src}/", f"{dst}/"])
        return timed(["rsync", "-a", "-e", e, *pair])

    def rclone(self, direction: str, src: Path, dst: Path, streams: int) -> float:
        s = self.server
        remote = (f":sftp,host={s.host},port={s.port},user=root,key_file={s.client_key},"
                  f"known_hosts_file={s.known_hosts}:")
        pair = [str(src), remote + str(dst)] if direction == "put" else [remote + str(src),
                                                                         str(dst)]
        # its fastest: files and big-file ranges in parallel, no per-file remote md5sum
        return timed(["rclone", "copy", *pair, "--transfers", str(streams),
                      "--multi-thread-streams", str(streams), "--multi-thread-cutoff", "64M",
                      "--checkers", "16", "--sftp-disable-hashcheck", "-q"])


def timed(argv: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def fresh(dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    os.sync()
    return dest


def cut_half_way(server: SshServer, total: int, dest: Path, transfer):
    """Run `transfer()` while every connection is killed once half the tree is under `dest`
    (partials included); return its stats (the kill must land before it finishes)."""
    cut = threading.Event()

    def saboteur() -> None:
        while not dest.exists() or tree_size(dest) < total / 2:
            time.sleep(0.02)
        server.kill()
        cut.set()
        time.sleep(1)
        server.start()

    threading.Thread(target=saboteur, daemon=True).start()
    stats = transfer()
    assert cut.is_set(), "the kill did not land before the transfer finished"
    assert stats["attempts"] > 1, stats
    return stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtts", default="0,20,100,250", help="round trips to measure, in ms")
    ap.add_argument("--rate-mbit", type=float, default=1000.0, help="link rate, each way")
    ap.add_argument("--big-mb", type=int, default=256, help="size of the big file (MiB)")
    ap.add_argument("--small", type=int, default=1000, help="number of small files")
    ap.add_argument("--small-bytes", type=int, default=2048, help="size of each small file")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tool (median)")
    ap.add_argument("--streams", type=int, default=0,
                    help="fix rgt's streams (default: rgt chooses per link)")
    ap.add_argument("--peer-streams", type=int, default=8,
                    help="rclone's --transfers and --multi-thread-streams")
    ap.add_argument("--resume-rtt", type=float, default=20.0,
                    help="round trip of the cut-and-resume runs (one of --rtts; -1 skips)")
    ap.add_argument("--rsync-cipher", default="",
                    help="the cipher rsync's ssh uses (default: ssh's own; rgt's connections "
                         "prefer aes128-gcm, e.g. --rsync-cipher aes128-gcm@openssh.com)")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    rtts = [float(x) for x in args.rtts.split(",") if x.strip()]
    if (reason := unavailable()) is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    if shutil.which("rsync") is None:
        print("cannot run: rsync not installed (the comparison needs it)", file=sys.stderr)
        return 2
    peer = shutil.which("rclone") is not None
    if not peer:
        print("note: rclone not installed (apt-get install rclone): no parallel peer",
              file=sys.stderr)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="rgt-bench-"))
    src, dest, back = work / "src", work / "dest", work / "back"
    print(f"building {args.big_mb} MiB + {args.small} x {args.small_bytes} B under {work} ...",
          flush=True)
    make_tree(src, args.big_mb, args.small, args.small_bytes)
    total = tree_size(src)
    rows: dict[str, list[dict]] = {"push": [], "pull": []}
    resumed: dict[str, tuple[int, int]] = {}
    method = ""
    try:
        for rtt in rtts:
            box = Box(work, rtt, args.rate_mbit)
            method = box.link.describe().split(" via ")[-1]
            try:
                for direction, verb, there, here in (("push", "put", src, dest),
                                                     ("pull", "get", src, back)):
                    times: dict[str, list[float]] = {}
                    streams_used, clean_bytes = 0, 0
                    for _ in range(args.repeat):
                        seconds, stats = box.rgt(verb, there, fresh(here), args.streams)
                        times.setdefault("rgt", []).append(seconds)
                        streams_used = stats["streams"]
                        clean_bytes = stats["sent" if verb == "put" else "received"]
                        fresh(here)
                        times.setdefault("rsync", []).append(
                            box.rsync(verb, there, here, args.rsync_cipher))
                        if peer:
                            fresh(here)
                            times.setdefault("rclone", []).append(
                                box.rclone(verb, there, here, args.peer_streams))
                    row = {"rtt": rtt, "streams": streams_used,
                           **{k: statistics.median(v) for k, v in times.items()}}
                    rows[direction].append(row)
                    print(f"  {rtt:g} ms {direction}: " + ", ".join(
                        f"{k} {v:.1f}s" for k, v in row.items() if k not in ("rtt", "streams"))
                        + f" (rgt: {streams_used} streams)", flush=True)
                    if rtt == args.resume_rtt:
                        cut = cut_half_way(box.server, total, fresh(here),
                                           lambda b=box, v=verb, t=there, h=here:
                                           b.rgt(v, t, h, args.streams)[1])
                        resumed[direction] = (cut["sent" if verb == "put" else "received"],
                                              clean_bytes)
            finally:
                box.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    mb = total / 1e6
    print(f"\ntree: {mb:,.0f} MB in {args.small + 1:,} files ({args.big_mb} MiB + "
          f"{args.small:,} x {args.small_bytes} B); links of {args.rate_mbit:g} Mbit/s each way "
          f"({method}); median of {args.repeat}; rclone {args.peer_streams} transfers/streams; "
          f"rsync cipher {args.rsync_cipher or 'ssh default'}; {os.cpu_count()} CPUs")
    for direction, found in rows.items():
        print(f"\n{direction}\n{'RTT ms':>7}{'rgt s':>8}{'MB/s':>7}{'streams':>8}"
              f"{'rsync s':>9}{'MB/s':>7}{'rclone s':>9}{'MB/s':>7}"
              f"{'rgt/rsync':>11}{'rgt/rclone':>12}")
        for r in found:
            rc = r.get("rclone")
            print(f"{r['rtt']:>7g}{r['rgt']:>8.1f}{mb / r['rgt']:>7.1f}{r['streams']:>8}"
                  f"{r['rsync']:>9.1f}{mb / r['rsync']:>7.1f}"
                  + (f"{rc:>9.1f}{mb / rc:>7.1f}" if rc else f"{'-':>9}{'-':>7}")
                  + f"{r['rsync'] / r['rgt']:>10.2f}x"
                  + (f"{rc / r['rgt']:>11.2f}x" if rc else f"{'-':>12}"))
        print("  rate ratios: rgt/rsync target >= 3 at 100 ms, >= 0.95 (time <= 1.05x) at "
              "0-20 ms; rgt/rclone target >= 1 at 100 ms")
        if direction in resumed:
            cut_bytes, clean = resumed[direction]
            print(f"  cut half-way at {args.resume_rtt:g} ms and resumed: {cut_bytes:,} bytes vs "
                  f"{clean:,} clean = {cut_bytes / clean:.3f}   (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
