"""How long `rgt ls`, `rgt runs`, `rgt top --once` and `rgt watch` take with a month of runs.

    python bench/many_runs.py [--boxes 100] [--runs 10000] [--repeat 5] [--keep DIR]

Generates an RGT_HOME whose store holds RUNS runs spread over BOXES boxes (all up, on five
platforms; every run ended — succeeded, failed or cancelled — a fifth of them pulled, every
tenth one resumed by a later attempt, each with a few probe events), plus one `local` box
with a real job run to its end and watched once. Then times each command as a fresh
process (median of N after one warm-up run) against the target of 0.5 s:

- ``rgt ls``: every box's line (money, live runs, clocks);
- ``rgt runs``: every run with its attempt chain and whether it was pulled;
- ``rgt top --once``: the board (ended runs until pulled);
- ``rgt watch BOX RUN``: the real ended run, among all the others.

Live runs are left out on purpose: each is a probe of its box, which is the network's time,
not the store's.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.5

GENERATE = r"""
import json, random, sys, time
from pathlib import Path
from rgt.store import Box, Run, Store

home, boxes, runs = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
random.seed(7)
store = Store(home / "state.db")
now = time.time()
profiles = ("generic-ssh", "autodl", "lambda", "vastai", "runpod")
with store.batch():
    for b in range(boxes):
        store.add_box(Box(f"box-{b:03d}", profiles[b % len(profiles)],
                          {"host": f"10.0.{b // 250}.{b % 250}", "user": "root"}, "/data",
                          "/durable", 0.5 + b % 7, "up", now - 40 * 86400 + b, None, {}))
    for r in range(runs):
        box = f"box-{r % boxes:03d}"
        created = now - 30 * 86400 + r * (30 * 86400 / runs)
        run_id = f"job{r % 37}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(created))}-{r:05x}"
        spec = {"name": f"job{r % 37}", "attempt": 1, "ckpt_home": f"/durable/ckpt/job{r % 37}"}
        if r % 10 == 1:  # the next attempt of the run before it on the same box
            prev = r - boxes
            if prev >= 0:
                spec.update(attempt=2, resumes=f"job{prev % 37}-" + time.strftime(
                    '%Y%m%d-%H%M%S', time.gmtime(now - 30 * 86400 + prev * (30 * 86400 / runs)))
                    + f"-{prev:05x}")
        status = random.choice(("succeeded", "succeeded", "succeeded", "failed", "cancelled"))
        store.add_run(Run(run_id, box, spec["name"], f"/data/rgt/{run_id}", spec, status,
                          0 if status == "succeeded" else 1, created, created + 3600))
        for k in range(3):
            store.db.execute("INSERT INTO events (at, box, run, kind, detail) VALUES "
                             "(?,?,?,?,?)", (created + 600 * k, box, run_id, "probe",
                                             json.dumps({"disks": {}, "step": 100 * k})))
        if r % 5 == 0:
            store.add_evidence("pull-verified", box, True, {"files": []}, run=run_id)
"""


def _rgt() -> list[str]:
    script = Path(sys.executable).parent / "rgt"
    return [sys.executable, str(script)] if script.is_file() else [sys.executable, "-m", "rgt"]


def _call(rgt: list[str], env: dict[str, str], *words: str) -> str:
    done = subprocess.run([*rgt, *words], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"rgt {' '.join(words)} exited {done.returncode}: "
                         f"{done.stderr[-800:]}")
    return done.stdout


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _median_wall(command: list[str], env: dict[str, str], repeat: int
                 ) -> list[tuple[float, float]]:
    """(wall s, CPU s) of each timed run: on a shared machine the wall time also holds the
    waits for a core; the CPU time is what the command itself cost."""
    walls = []
    for index in range(repeat + 1):
        cpu = _cpu_s()
        started = time.perf_counter()
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {done.returncode}: "
                             f"{done.stderr.decode(errors='replace')[-800:]}")
        if index:  # the first run warms the page cache (and the profile-brief cache)
            walls.append((time.perf_counter() - started, _cpu_s() - cpu))
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per command")
    parser.add_argument("--keep", type=Path, help="build the RGT_HOME here and keep it")
    args = parser.parse_args()
    rgt = _rgt()
    with tempfile.TemporaryDirectory() as scratch:
        home = args.keep or Path(scratch) / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "RGT_HOME": str(home), "COLUMNS": "100", "NO_COLOR": "1"}
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", GENERATE, str(home), str(args.boxes),
                        str(args.runs)], env=env, check=True)
        made = time.perf_counter() - started
        job = Path(scratch) / "job"
        job.mkdir()
        (job / "job.yaml").write_text("name: job\nworkdir: .\nrun: echo step=1 loss=0.5\n")
        _call(rgt, env, "up", "real")
        run_id = _call(rgt, env, "run", "real", str(job / "job.yaml")).strip().splitlines()[-1]
        _call(rgt, env, "watch", "real", run_id, "--until-done", "--timeout", "60")
        commands = {"rgt ls": ["ls"], "rgt runs": ["runs"], "rgt top --once": ["top", "--once"],
                    "rgt watch (ended run)": ["watch", "real", run_id]}
        results = {name: _median_wall([*rgt, *words], env, args.repeat)
                   for name, words in commands.items()}
    print(f"store: {args.runs} runs over {args.boxes} boxes (+1 local box, 1 real run), "
          f"generated in {made:.1f} s")
    print(f"median of {args.repeat} runs each, after one warm-up run; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n")
    print(f"{'command':24} {'wall s':>7} {'(min':>6} {'max)':>6} {'CPU s':>6}  "
          f"target <= {TARGET_S} s (wall)")
    for name, samples in results.items():
        walls = [wall for wall, _ in samples]
        median = statistics.median(walls)
        verdict = "met" if median <= TARGET_S else "NOT met"
        print(f"{name:24} {median:7.3f} {min(walls):6.3f} {max(walls):6.3f} "
              f"{statistics.median(c for _, c in samples):6.3f}  {verdict}")


if __name__ == "__main__":
    main()
