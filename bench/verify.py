"""Pull-verify vs `sha256sum` over the same N small files on the same disk (issue 11 item 13).

    python bench/verify.py [--files 200000] [--dir DIR] [--keep]

Makes N small files (1–4 KiB, `.dat`: no checkpoint format to load, so this times the
hashing path; a `.bin` would be loaded as a torch file) in directories of 1,000 and their
manifest with rgt's on-box manifest code, reads every file once so both sides start from a
warm page cache, then times, each in its own child process:

- ``sha256sum``: ``xargs -0 sha256sum`` over the same list of files (what a user would run);
- rgt: what `rgt pull` does after the transfer — `untrusted.sweep_links` over the tree, then
  `pull_verify.verify_pulled` streaming the manifest, writing the per-file list to a JSONL file.

Prints both times, their ratio (target <= 1.5), rgt's peak RSS (target <= 300 MB: the child's
own VmHWM on Linux, not ru_maxrss, which there includes the forking parent's RSS; ru_maxrss
elsewhere) and the size of the evidence row the store would keep. Needs GNU or BSD
`sha256sum` (coreutils) and xargs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from pathlib import Path


def peak_kib():
    # VmHWM is this process's own high-water mark; ru_maxrss on Linux also counts the
    # parent's RSS at fork (it carries over exec), so it reports the bench's memory too
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None

from rgt.lifecycle.pull_verify import verify_pulled
from rgt.lifecycle.untrusted import read_manifest, sweep_links
root, manifest, files_list = map(Path, sys.argv[1:4])
started = time.perf_counter()
removed = sweep_links(root / "pull")
report = verify_pulled(root / "pull", read_manifest(manifest), run_status="succeeded",
                       expected=[("out (out)", "out/", "out")], files_list=files_list)
seconds = time.perf_counter() - started
row = {k: v for k, v in report.items() if k != "files"}
print(json.dumps({"seconds": seconds, "ok": report["ok"], "counts": report["counts"],
                  "removed": len(removed), "row_bytes": len(json.dumps(row)),
                  "problems": report["problems"][:3],
                  "hwm_kib": peak_kib(),
                  "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def make_tree(root: Path, count: int) -> None:
    out = root / "pull" / "out" / "out"
    for i in range(count):
        if i % 1000 == 0:
            directory = out / f"d{i // 1000:05d}"
            directory.mkdir(parents=True)
        (directory / f"f{i:07d}.dat").write_bytes(os.urandom(1024 + (i * 7919) % 3072))


def rss_mb(maxrss: int) -> float:
    return maxrss / (1 << 20) if sys.platform == "darwin" else maxrss / 1024  # bytes vs KiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--dir", type=Path, default=None, help="where to make the files")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if shutil.which("sha256sum") is None:
        print("sha256sum not found (coreutils)", file=sys.stderr)
        return 1
    root = Path(tempfile.mkdtemp(prefix="rgt-bench-verify-", dir=args.dir))
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    try:
        started = time.perf_counter()
        make_tree(root, args.files)
        made = time.perf_counter() - started
        manifest = root / "PULL_MANIFEST.jsonl"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rgt.onbox.manifest", str(root / "pull" / "out"),
                        str(manifest), "out"], env=env, check=True, stdout=subprocess.DEVNULL)
        listed = time.perf_counter() - started
        # the manifest was built under pull/out: its paths get the out/ prefix the pull adds.
        # Streamed, line by line: this process's memory must stay small, or a child forked
        # from it inherits it in ru_maxrss (the figure this bench used to report)
        names = root / "names"
        prefixed = manifest.with_name("prefixed.jsonl")
        with manifest.open() as lines, prefixed.open("w") as fixed, names.open("wb") as paths:
            for line in lines:
                e = json.loads(line)
                if "path" in e:
                    e = {**e, "path": "out/" + e["path"]}
                    paths.write(str(root / "pull" / e["path"]).encode() + b"\0")
                fixed.write(json.dumps(e) + "\n")
        prefixed.replace(manifest)
        subprocess.run(f"xargs -0 cat < {names} > /dev/null", shell=True, check=True)  # warm

        started = time.perf_counter()
        subprocess.run(f"xargs -0 sha256sum < {names} > /dev/null", shell=True, check=True)
        theirs = time.perf_counter() - started

        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", CHILD, str(root), str(manifest),
                                 str(root / "PULL_FILES.jsonl")], env=env, check=True,
                                capture_output=True, text=True)
        ours = time.perf_counter() - started
        report = json.loads(result.stdout)
        rss = report["hwm_kib"] / 1024 if report["hwm_kib"] else rss_mb(report["maxrss"])
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"files: {args.files:,} small files (1-4 KiB), made in {made:.1f} s; on-box manifest "
          f"built in {listed:.1f} s")
    print(f"sha256sum (xargs -0):        {theirs:8.2f} s")
    print(f"rgt pull-verify (process):   {ours:8.2f} s  (verify itself {report['seconds']:.2f} s,"
          f" ok={report['ok']}, {report['counts']['files']:,} files)")
    print(f"ratio rgt / sha256sum:       {ours / theirs:8.2f}   (target <= 1.5)")
    print(f"peak RSS of rgt's verify:    {rss:8.1f} MB (target <= 300; its process's VmHWM)")
    print(f"store evidence row:          {report['row_bytes']:,} bytes (counts + digest, no file "
          "list)")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
