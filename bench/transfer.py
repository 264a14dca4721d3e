"""Push benchmark: rgt's `put` vs plain `rsync -a` vs `scp -r`, over a loopback sshd.

One run, one table. The tree is one big file plus many small ones, pushed to a fresh remote
directory by each tool in turn; then rgt pushes it again with every connection killed about
half-way, and we compare the bytes that resumed push sent with a clean push.

    python bench/transfer.py                       # 1 GiB + 20,000 small files (needs root)
    python bench/transfer.py --big-mb 200 --small 5000

Targets: rgt within 1.05x of rsync's time, at least 5x faster than scp -r, and a resumed
push sending at most 10% more bytes than a clean one.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sshd import SshServer, unavailable  # noqa: E402

from rgt.transport import SshTransport  # noqa: E402
from rgt.transport.rsync import tree_size  # noqa: E402


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
    ap.add_argument("--big-mb", type=int, default=1024, help="size of the big file (MiB)")
    ap.add_argument("--small", type=int, default=20_000, help="number of small files")
    ap.add_argument("--small-bytes", type=int, default=2048, help="size of each small file")
    ap.add_argument("--repeat", type=int, default=2, help="best of N for rgt and rsync")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    if (reason := unavailable()) is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2

    work = Path(args.workdir or tempfile.mkdtemp(prefix="rgt-bench-"))
    src, dest = work / "src", work / "dest"
    print(f"building {args.big_mb} MiB + {args.small} x {args.small_bytes} B under {work} ...")
    make_tree(src, args.big_mb, args.small, args.small_bytes)
    total = tree_size(src)
    server = SshServer(work / "sshd").start()
    transport = SshTransport(server.target, known_hosts=server.known_hosts)
    try:
        transport.run("true")  # first contact: record the host key, open the master
        port = str(server.port)
        ssh_opts = plain_ssh(server)
        rsync_e = shlex.join(["ssh", "-p", port, *ssh_opts])
        gcm_e = shlex.join(["ssh", "-p", port, "-c", "aes128-gcm@openssh.com", *ssh_opts])
        dst = f"root@127.0.0.1:{dest}/"

        results: dict[str, float] = {}
        clean_bytes = 0
        for _ in range(args.repeat):
            fresh(dest)
            stats = transport.put(src, str(dest))
            clean_bytes = stats.bytes_sent
            results["rgt put"] = min(results.get("rgt put", 1e9), stats.seconds)
            for label, e in (("rsync -a", rsync_e), ("rsync -a (aes128-gcm)", gcm_e)):
                fresh(dest)
                seconds = timed(["rsync", "-a", "-e", e, f"{src}/", dst])
                results[label] = min(results.get(label, 1e9), seconds)
        fresh(dest)
        results["scp -r"] = timed(
            ["scp", "-q", "-r", "-P", port, *ssh_opts, str(src), f"root@127.0.0.1:{dest}"]
        )

        # Resume: cut every connection once half of the tree has arrived.
        fresh(dest)
        cut = threading.Event()

        def saboteur() -> None:
            while tree_size(dest) < total / 2 if dest.exists() else True:
                time.sleep(0.05)
            server.kill()
            cut.set()
            time.sleep(1)
            server.start()

        threading.Thread(target=saboteur, daemon=True).start()
        resumed = transport.put(src, str(dest))
        assert cut.is_set(), "the kill did not land before the push finished"
    finally:
        transport.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    best_rsync = min(v for k, v in results.items() if k.startswith("rsync"))
    rgt = results["rgt put"]
    mb = total / 1e6
    print(f"\ntree: {mb:,.0f} MB in {args.small + 1:,} files; loopback sshd; best of "
          f"{args.repeat} for rgt/rsync, 1 run for scp\n")
    print(f"{'tool':<24}{'seconds':>9}{'MB/s':>9}{'vs rgt':>9}")
    for label, seconds in results.items():
        print(f"{label:<24}{seconds:>9.2f}{mb / seconds:>9.0f}{seconds / rgt:>8.2f}x")
    print(f"\nrgt / best rsync   = {rgt / best_rsync:.3f}   (target <= 1.05)")
    print(f"scp -r / rgt       = {results['scp -r'] / rgt:.2f}    (target >= 5)")
    print(f"resumed push       = {resumed.attempts} attempts, {resumed.bytes_sent:,} bytes sent, "
          f"{resumed.seconds:.2f}s")
    print(f"clean push         = {clean_bytes:,} bytes sent")
    print(f"resumed / clean    = {resumed.bytes_sent / clean_bytes:.3f}   (target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
