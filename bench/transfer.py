"""Transfer benchmark: rgt's `put`/`get` vs plain `rsync -a` vs `scp -r`, to and from an sshd
across a real link.

One run, one table per direction. The tree is one big file plus many small ones, pushed to a
fresh remote directory (and pulled back into a fresh local one) by each tool in turn; then rgt
pushes and pulls it again with every connection killed about half-way, and we compare the
bytes that resumed transfer moved with a clean one.

rgt moves files with its own engine (rgt.onbox.xfer: Python at both ends of one ssh session),
so it needs no rsync on either machine; this is the measurement that decides whether that
engine is fast enough to be the only path. rgt runs in a child process, as the CLI would:
the delay line is Python threads in this one.

By default the sshd runs in a network namespace of its own, reached over a link with a 20 ms
round trip and 1 Gbit/s each way (bench/netlink.py): what a user pushing to a rented box sees.
Loopback hides the cost of every per-file round trip, which is where the tools differ most.

    python bench/transfer.py                        # 1 GiB + 2,000 small files, RTT 20 ms
    python bench/transfer.py --rtt-ms 40 --rate-mbit 200
    python bench/transfer.py --small 20000          # the full tree: scp -r alone takes ~30 min
    python bench/transfer.py --loopback             # the old measurement: 1 GiB + 20,000 files
    python bench/transfer.py --scp-repeat 0         # without scp -r (~3 minutes each way)

Targets: rgt within 1.05x of the best rsync's time each way, at least 5x faster than scp -r,
and a resumed transfer moving at most 10% more bytes than a clean one.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
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


def plain_ssh(server: SshServer) -> list[str]:
    """What a user would type: their key, the box's port, host key checking on."""
    return [
        "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={server.known_hosts}",
        "-o", "StrictHostKeyChecking=accept-new",
        "-i", str(server.client_key),
    ]


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
print(json.dumps({"sent": s.bytes_sent, "received": s.bytes_received, "attempts": s.attempts}))
"""


def run_rgt(server: SshServer, direction: str, src: Path, dst: Path) -> tuple[float, dict]:
    """(wall seconds, stats) of one `rgt` put or get, in a child process."""
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", _RGT, server.host, str(server.port), str(server.client_key),
         str(server.known_hosts), direction, str(src), str(dst)],
        check=True, stdin=subprocess.DEVNULL, capture_output=True, text=True,
    )
    return time.monotonic() - started, json.loads(out.stdout)


def timed(argv: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def fresh(dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    os.sync()
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loopback", action="store_true",
                    help="the old measurement: sshd on 127.0.0.1, no delay, no rate limit")
    ap.add_argument("--rtt-ms", type=float, default=20.0, help="round-trip time of the link")
    ap.add_argument("--rate-mbit", type=float, default=1000.0, help="link rate, each way")
    ap.add_argument("--big-mb", type=int, default=1024, help="size of the big file (MiB)")
    ap.add_argument("--small", type=int, default=None,
                    help="number of small files (default: 20,000 on loopback, 2,000 on the "
                         "link, where scp -r needs ~4 round trips per file)")
    ap.add_argument("--small-bytes", type=int, default=2048, help="size of each small file")
    ap.add_argument("--repeat", type=int, default=3, help="runs of rgt and rsync (median)")
    ap.add_argument("--scp-repeat", type=int, default=1,
                    help="runs of scp -r (median; 0 to skip it)")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    if args.small is None:
        args.small = 20_000 if args.loopback else 2_000
    if (reason := unavailable()) is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    for peer in ("rsync", "scp"):  # rgt needs neither; the comparison does
        if shutil.which(peer) is None:
            print(f"cannot run: {peer} not installed (the comparison needs it)", file=sys.stderr)
            return 2

    work = Path(args.workdir or tempfile.mkdtemp(prefix="rgt-bench-"))
    src, dest = work / "src", work / "dest"
    print(f"building {args.big_mb} MiB + {args.small} x {args.small_bytes} B under {work} ...",
          flush=True)
    make_tree(src, args.big_mb, args.small, args.small_bytes)
    total = tree_size(src)
    link: SlowLink | None = None
    server: SshServer | None = None
    transport: SshTransport | None = None
    try:
        if args.loopback:
            server = SshServer(work / "sshd").start()
            where = "loopback sshd on 127.0.0.1 (no delay, no rate limit)"
        else:
            link = SlowLink(rtt_ms=args.rtt_ms, rate_mbit=args.rate_mbit).start()
            # A namespace of its own: port 22 is free there, and sshd listens on its far end.
            server = SshServer(work / "sshd", port=22, host=link.remote_ip,
                               exec_prefix=link.netns_exec).start()
            where = link.describe()
        print(f"link: {where}", flush=True)
        transport = SshTransport(server.target, known_hosts=server.known_hosts)
        transport.run("true")  # first contact: record the host key, open the master
        port = str(server.port)
        ssh_opts = plain_ssh(server)
        rsync_e = shlex.join(["ssh", "-p", port, *ssh_opts])
        gcm_e = shlex.join(["ssh", "-p", port, "-c", "aes128-gcm@openssh.com", *ssh_opts])
        dst = f"root@{server.host}:{dest}/"

        back = work / "back"  # pulls land here; the box-side source is `src` itself
        src_remote = f"root@{server.host}:{src}/"
        push: dict[str, list[float]] = {}
        pull: dict[str, list[float]] = {}
        clean = {"push": 0, "pull": 0}
        for i in range(args.repeat):
            seconds, stats = run_rgt(server, "put", src, fresh(dest))
            clean["push"] = stats["sent"]
            push.setdefault("rgt put", []).append(seconds)
            seconds, stats = run_rgt(server, "get", src, fresh(back))
            clean["pull"] = stats["received"]
            pull.setdefault("rgt get", []).append(seconds)
            for label, e in (("rsync -a", rsync_e), ("rsync -a (aes128-gcm)", gcm_e)):
                fresh(dest)
                push.setdefault(label, []).append(timed(["rsync", "-a", "-e", e, f"{src}/", dst]))
                fresh(back)
                pull.setdefault(label, []).append(
                    timed(["rsync", "-a", "-e", e, src_remote, f"{back}/"]))
            print(f"  run {i + 1}/{args.repeat}: push " + ", ".join(
                f"{k} {v[-1]:.2f}s" for k, v in push.items()) + "; pull " + ", ".join(
                f"{k} {v[-1]:.2f}s" for k, v in pull.items()), flush=True)
        for _ in range(args.scp_repeat):
            fresh(dest)
            push.setdefault("scp -r", []).append(timed(
                ["scp", "-q", "-r", "-P", port, *ssh_opts, str(src), f"root@{server.host}:{dest}"]))
            fresh(back)
            pull.setdefault("scp -r", []).append(timed(
                ["scp", "-q", "-r", "-P", port, *ssh_opts, f"root@{server.host}:{src}",
                 str(back)]))
            print(f"  scp -r: push {push['scp -r'][-1]:.2f}s, pull {pull['scp -r'][-1]:.2f}s",
                  flush=True)

        # Resume: cut every connection once half of the tree has arrived, each way.
        resumed = {
            "push": cut_half_way(server, total, fresh(dest),
                                 lambda: run_rgt(server, "put", src, dest)[1])["sent"],
            "pull": cut_half_way(server, total, fresh(back),
                                 lambda: run_rgt(server, "get", src, back)[1])["received"],
        }
    finally:
        if transport is not None:
            transport.close()
        if server is not None:
            server.stop()
        if link is not None:
            link.stop()
        shutil.rmtree(work, ignore_errors=True)

    mb = total / 1e6
    print(f"\ntree: {mb:,.0f} MB in {args.small + 1:,} files ({args.big_mb} MiB + "
          f"{args.small:,} x {args.small_bytes} B); {where}; median of {args.repeat} for "
          f"rgt/rsync, of {args.scp_repeat} for scp; {os.cpu_count()} CPUs")
    for direction, runs, ours in (("push", push, "rgt put"), ("pull", pull, "rgt get")):
        results = {k: statistics.median(v) for k, v in runs.items()}
        best_rsync = min(v for k, v in results.items() if k.startswith("rsync"))
        rgt = results[ours]
        print(f"\n{direction}\n{'tool':<24}{'median s':>9}{'MB/s':>9}{'vs rgt':>9}  runs (s)")
        for label, seconds in results.items():
            each = ", ".join(f"{x:.2f}" for x in runs[label])
            print(f"{label:<24}{seconds:>9.2f}{mb / seconds:>9.0f}{seconds / rgt:>8.2f}x  {each}")
        print(f"{ours} / best rsync = {rgt / best_rsync:.3f}   (target <= 1.05)")
        if "scp -r" in results:  # --scp-repeat 0 skips it (~3 minutes each way here)
            print(f"scp -r / {ours}     = {results['scp -r'] / rgt:.2f}    (target >= 5)")
        print(f"resumed {direction}: {resumed[direction]:,} bytes vs {clean[direction]:,} clean "
              f"= {resumed[direction] / clean[direction]:.3f}   (target <= 1.10)")
    return 0


def cut_half_way(server: SshServer, total: int, dest: Path, transfer):
    """Run `transfer()` while every connection is killed once half the tree is under `dest`;
    return its stats (the kill must land before it finishes)."""
    cut = threading.Event()

    def saboteur() -> None:
        while not dest.exists() or tree_size(dest) < total / 2:
            time.sleep(0.05)
        server.kill()
        cut.set()
        time.sleep(1)
        server.start()

    threading.Thread(target=saboteur, daemon=True).start()
    stats = transfer()
    assert cut.is_set(), "the kill did not land before the transfer finished"
    assert stats["attempts"] > 1, stats
    return stats


if __name__ == "__main__":
    sys.exit(main())
