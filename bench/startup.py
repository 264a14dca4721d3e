"""How long `rgt --help` and `rgt ls` take to answer, against Python itself and the peers.

    python bench/startup.py [--repeat 10] [--src DIR]

Times, each as a fresh process, the median of N runs after one warm-up run (page cache warm,
as when a user types the command a second time), all in one run of this script:

- ``python -c pass``: the floor every Python CLI pays (interpreter + site);
- ``rgt --help``;
- ``rgt ls`` with an empty RGT_HOME and with a populated one (five boxes on five platforms,
  runs on each: `ls` then needs each box's platform facts; the warm-up run validates those
  profiles once and keeps their brief in RGT_HOME/cache, as a user's first `ls` does);
- ``rgt runs`` on that populated RGT_HOME;
- ``rgt watch BOX RUN`` on a finished run: a real job run to its end on a `local` box first
  (watch still asks the box: the probe is part of what it costs);
- ``sky --help`` / ``sky status`` (SkyPilot) and ``dstack --help`` / ``dstack ps`` where they
  are installed on PATH, else 'not installed'.

`rgt` is the console script installed next to this Python (what a user's shell runs), else
``python -m rgt``. ``--src DIR`` runs the rgt in another source tree instead (put first on
PYTHONPATH), e.g. a `git worktree` of an older commit, for a before/after comparison.
Prints each median and range, and the ratios: rgt to the interpreter floor (target: every rgt
command <= 0.3 s on an idle machine) and each peer to rgt.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.3

POPULATE = r"""
import sys, time
from pathlib import Path
from rgt.store import Box, Run, Store

store = Store(Path(sys.argv[1]) / "state.db")
now = time.time()
for i, profile in enumerate(("local", "autodl", "lambda", "vastai", "slurm")):
    name = f"box-{i}-{profile}"
    connection = {} if profile == "local" else {"host": f"10.0.0.{i}", "user": "root"}
    store.add_box(Box(name, profile, connection, "/data", "/durable", 1.0 + i,
                      "down" if profile == "lambda" else "up", now - 3600 * (i + 1),
                      now - 60 if profile == "lambda" else None,
                      {"instance_id": f"inst-{i}"} if profile in ("lambda", "vastai") else {}))
    for j in range(3):
        store.add_run(Run(f"run-{i}-{j}", name, "job", f"/data/rgt/run-{i}-{j}", {},
                          "succeeded" if j < 2 else "running", None, now - 600 * (3 - j), now))
"""


def _rgt_command(src: Path | None) -> list[str]:
    script = Path(sys.executable).parent / "rgt"
    if src is None and script.is_file():
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "rgt"]


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _time(command: list[str], env: dict[str, str], repeat: int) -> list[tuple[float, float]]:
    """(wall s, CPU s) of each timed run. CPU time is what the command itself cost; on a
    shared machine the wall time also holds the waits for a core."""
    samples = []
    for index in range(repeat + 1):
        cpu = _cpu_s()
        started = time.perf_counter()
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=120)
        seconds = time.perf_counter() - started, _cpu_s() - cpu
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {done.returncode}: "
                             f"{done.stderr.decode(errors='replace')[-500:]}")
        if index:  # the first run warms the page cache and .pyc files; not counted
            samples.append(seconds)
    return samples


def _peer(tool: str, args: list[str], repeat: int) -> list[tuple[float, float]] | None:
    found = shutil.which(tool)
    if found is None:
        return None
    try:
        return _time([found, *args], dict(os.environ), repeat)
    except subprocess.TimeoutExpired:
        print(f"  {tool} {' '.join(args)}: no answer in 120 s")
        return None
    except SystemExit as err:  # e.g. `sky status` without a configured cloud
        print(f"  {tool} {' '.join(args)}: {err}")
        return None


def _finished_run(rgt: list[str], env: dict[str, str], home: Path) -> tuple[str, str]:
    """A `local` box in HOME with one job run to its end (two log lines of metrics)."""
    job = home / "job"
    job.mkdir(parents=True)
    (job / "job.yaml").write_text("name: job\nworkdir: .\n"
                                  "run: echo step=1 loss=0.5; echo step=2 loss=0.25\n")

    def call(*words: str) -> str:
        done = subprocess.run([*rgt, *words], env=env, capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise SystemExit(f"rgt {' '.join(words)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    call("up", "bench")
    run_id = call("run", "bench", str(job / "job.yaml")).strip().splitlines()[-1]
    call("watch", "bench", run_id, "--until-done", "--timeout", "60")
    return "bench", run_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per command")
    parser.add_argument("--src", type=Path, help="time the rgt of this source tree (its src/)")
    args = parser.parse_args()
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    if args.src:
        env["PYTHONPATH"] = str(args.src.resolve()) + os.pathsep + env.get("PYTHONPATH", "")
    rgt = _rgt_command(args.src)
    results: dict[str, list[tuple[float, float]] | None] = {}
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as full:
        subprocess.run([sys.executable, "-c", POPULATE, full], env=env, check=True)
        results["python -c pass"] = _time([sys.executable, "-c", "pass"], env, args.repeat)
        results["rgt --help"] = _time([*rgt, "--help"], env, args.repeat)
        results["rgt ls (empty RGT_HOME)"] = _time([*rgt, "ls"], {**env, "RGT_HOME": empty},
                                                   args.repeat)
        results["rgt ls (5 boxes, 15 runs)"] = _time([*rgt, "ls"], {**env, "RGT_HOME": full},
                                                     args.repeat)
        # a local box with a finished run: `runs` asks live runs' boxes afresh, so the
        # populated home (made-up hosts) is no place for it
        local = {**env, "RGT_HOME": str(Path(empty) / "local")}
        box, run_id = _finished_run(rgt, local, Path(empty) / "local")
        results["rgt runs (1 finished run)"] = _time([*rgt, "runs"], local, args.repeat)
        results["rgt watch (finished run)"] = _time([*rgt, "watch", box, run_id], local,
                                                    args.repeat)
    for tool, verb in (("sky", "status"), ("dstack", "ps")):
        results[f"{tool} --help"] = _peer(tool, ["--help"], args.repeat)
        results[f"{tool} {verb}"] = _peer(tool, [verb], args.repeat)

    print(f"rgt: {' '.join(rgt)}" + (f" (PYTHONPATH {args.src})" if args.src else ""))
    print(f"median of {args.repeat} runs each, after one warm-up run; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n")
    print(f"{'command':28} {'wall s':>7} {'(min':>6} {'max)':>6} {'CPU s':>7}")
    medians: dict[str, float] = {}
    for name, samples in results.items():
        if samples is None:
            print(f"{name:28} not installed")
            continue
        walls = [wall for wall, _ in samples]
        medians[name] = statistics.median(walls)
        print(f"{name:28} {medians[name]:7.3f} {min(walls):6.3f} {max(walls):6.3f} "
              f"{statistics.median(cpu for _, cpu in samples):7.3f}")
    print()
    for name in [name for name in medians if name.startswith("rgt ")]:
        verdict = "met" if medians[name] <= TARGET_S else "NOT met"
        print(f"{name}: {medians[name]:.3f} s = {medians[name] / medians['python -c pass']:.1f}"
              f"x python -c pass (target <= {TARGET_S} s: {verdict})")
    for peer, ours in (("sky --help", "rgt --help"), ("sky status", "rgt ls (5 boxes, 15 runs)"),
                       ("dstack --help", "rgt --help"), ("dstack ps", "rgt ls (5 boxes, 15 runs)")):
        if peer in medians:
            print(f"{peer} / {ours} = {medians[peer] / medians[ours]:.1f}")

if __name__ == "__main__":
    main()
