"""How much laptop memory a hostile box can take (issue 28): each verb, in a child process of
its own, against a local box whose log, probe answer or manifest is adversarial.

    python bench/box_memory.py [--log-gb 1] [--probe-mb 300] [--manifest-mb 500] [--dir DIR]
    PYTHONPATH=/path/to/old/src python bench/box_memory.py   # the same cases, older code

Prints, per case, the child's peak RSS (its own ru_maxrss from wait4: not the largest of all
children so far, which RUSAGE_CHILDREN gives), its exit code and its first line of stderr.
Target: under 200 MB for every case. The box's side runs as the child's children (`bash`,
`tail`, the lying interpreter's `cat`), and wait4 counts a waited-for descendant's peak too:
so the box side is kept to programs that stream (tail, head, cat), never a Python that reads
the whole file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from garbagebox import GarbageBox, deep_json, rgt_env  # noqa: E402

MB = 1024 * 1024


def write_big(path: Path, size: int, head: bytes = b"", tail: bytes = b"",
              unit: bytes = b"x") -> None:
    """HEAD, SIZE bytes made of UNIT repeated, TAIL: written in 8 MB pieces."""
    block = unit * (8 * MB // len(unit))
    with open(path, "wb") as out:
        out.write(head)
        left = size
        while left > 0:
            out.write(block[:left])
            left -= len(block)
        out.write(tail)


def peak(box: GarbageBox, argv: list[str], stdin: bytes = b"") -> tuple[float, int, str, float]:
    """(peak RSS in MB, exit code, first stderr line, seconds) of ARGV as one child."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, env=rgt_env(box.home), stdin=subprocess.PIPE,
                                 stdout=out, stderr=err, cwd=box.root)
        child.stdin.write(stdin)
        child.stdin.close()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        said = err.read(4000).decode("utf-8", "replace").strip().splitlines()
    kb = usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)  # bytes on macOS
    return kb / 1024, child.returncode, (said[0] if said else "")[:110], \
        time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log-gb", type=float, default=1.0)
    parser.add_argument("--probe-mb", type=int, default=300)
    parser.add_argument("--manifest-mb", type=int, default=500)
    parser.add_argument("--dir", default=None, help="where the local boxes live")
    args = parser.parse_args()
    import rgt

    print(f"rgt from {Path(rgt.__file__).parent}")
    work = Path(tempfile.mkdtemp(prefix="rgt-box-memory-", dir=args.dir))
    rows = []

    def case(name: str, box: GarbageBox, verb: str, stdin: bytes = b"") -> None:
        argv = box.argv(verb)
        if verb == "follow":  # the whole log, however long it takes to stream
            argv[argv.index("--timeout") + 1] = "900"
        mb, rc, said, seconds = peak(box, argv, stdin)
        rows.append((name, mb, rc, seconds, said))
        print(f"{name:<34} {mb:8.0f} MB  exit {rc:<3} {seconds:6.1f} s  {said}", flush=True)

    print(f"{'case':<34} {'peak RSS':>11}  {'exit':<8} {'time':>6}    first line of stderr")
    honest = GarbageBox.make(work / "honest")
    case("honest: watch", honest, "watch")
    case("honest: logs -n 5", honest, "logs")

    box = GarbageBox.make(work / "log")
    # tqdm's way: one line of \r-separated bar updates, never a newline
    write_big(box.run_dir / "log", int(args.log_gb * 1024 * MB),
              unit=b"\r 42%|####      | 420/1000 [00:42<00:58, 10.0it/s]")
    case(f"{args.log_gb:g} GB log line: logs -n 5", box, "logs")
    case(f"{args.log_gb:g} GB log line: watch --follow", box, "follow")
    case(f"{args.log_gb:g} GB log line: pull", box, "pull")

    box = GarbageBox.make(work / "probe")
    answer = box.root / "answer.json"
    write_big(answer, args.probe_mb * MB, head=b'{"state": {"status": "running", "error": "',
              tail=b'"}}')
    box.lie(probe=answer)
    case(f"{args.probe_mb} MB probe answer: watch", box, "watch")
    case(f"{args.probe_mb} MB probe answer: pull", box, "pull")

    box = GarbageBox.make(work / "manifest")
    line = box.root / "manifest.jsonl"
    write_big(line, args.manifest_mb * MB,
              head=json.dumps({"manifest_version": 2, "created": 1.0}).encode()
              + b'\n{"path": "a", "bytes": 1, "pad": "', tail=b'"}\n')
    box.lie(manifest=line)
    case(f"{args.manifest_mb} MB manifest line: pull", box, "pull")

    box = GarbageBox.make(work / "deep")
    box.lie(probe=deep_json(200_000))
    for verb in ("watch", "pull", "down"):
        case(f"200,000-deep probe: {verb}", box, verb)
    case("200,000-deep probe: down --discard", box, "discard", b"box\n")

    worst = max(rows, key=lambda r: r[1])
    print(f"\nworst: {worst[0]}: {worst[1]:.0f} MB (target: under 200 MB each)")
    print(f"boxes left in {work} (rm -rf it)")


if __name__ == "__main__":
    main()
