"""The laptop can die at any line of `rgt run` (issue 27 item 2): a seeded loop SIGKILLs or
SIGHUPs a real `rgt run` at random points of its push and start, then checks what a user relies
on: no job runs that the laptop's record does not name, `rgt down` never deletes a live job,
and a second `rgt run` of the job never starts a second copy beside it.

RGT_KILL_TRIALS sets the number of trials (the suite runs a few; the closing note of issue 27
reports a longer run), RGT_KILL_SEED the seed."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from boxkit import live_runs, write_job

TRIALS = int(os.environ.get("RGT_KILL_TRIALS", "8"))
SEED = int(os.environ.get("RGT_KILL_SEED", "27"))


def recorded(home: Path) -> dict[str, str]:
    """The laptop's record, read straight from the store (no verb, so nothing settles it)."""
    db = sqlite3.connect(home / "state.db")
    try:
        return dict(db.execute("SELECT id, status FROM runs"))
    finally:
        db.close()


def start_run(cli, spec: Path) -> subprocess.Popen:
    env = {**os.environ, **cli.env, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.Popen([sys.executable, "-m", "rgt", "run", "box", str(spec), "-d"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_killing_rgt_run_anywhere_never_leaves_an_unrecorded_job(cli, tmp_path):
    work = tmp_path / "job"
    for i in range(300):  # a push that takes a moment: kills land inside it too
        (work / f"d{i // 100}").mkdir(parents=True, exist_ok=True)
        (work / f"d{i // 100}" / f"f{i}").write_bytes(os.urandom(2000))
    spec = write_job(work, run="sleep 60")
    root = cli.home / "boxes" / "box" / "scratch" / "rgt"
    rng = random.Random(SEED)
    outcomes: Counter[str] = Counter()
    # the window the kills land in: one whole `rgt run -d` on this machine, as loaded as it is
    cli.ok("up", "box")
    began = time.monotonic()
    calibration = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    window = (time.monotonic() - began) * 1.1
    cli.ok("cancel", "box", calibration, "--yes", "--grace", "1")
    cli.ok("down", "box", "--discard-results", input="box\n")
    for trial in range(TRIALS):
        how = rng.choice(["SIGKILL rgt", "SIGKILL group", "SIGHUP group"])
        cli.ok("up", "box")  # each trial on a fresh box: no earlier run to pull first
        before = set(root.iterdir()) if root.exists() else set()
        known = set(recorded(cli.home))
        proc = start_run(cli, spec)
        time.sleep(rng.uniform(0, window))
        if proc.poll() is None:
            sig = signal.SIGHUP if how.startswith("SIGHUP") else signal.SIGKILL
            if how.endswith("group"):
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)
        else:
            how = "finished first"
        proc.communicate(timeout=60)
        time.sleep(0.5)  # a runner started just before the kill writes its state.json
        alive = live_runs(root)
        record = {k: v for k, v in recorded(cli.home).items() if k not in known}
        context = f"trial {trial} ({how}): alive {alive}, recorded {record}"
        assert set(alive) <= set(record), "a live job the laptop does not know: " + context

        down = cli("down", "box", "--yes")
        assert "Traceback" not in down.stderr, down.stderr
        if alive:
            assert down.returncode != 0, "down went through under a live job: " + context
            assert all((root / name / "state.json").exists() for name in alive), context
            again = cli("run", "box", str(spec), "-d")
            assert again.returncode == 2 and "already has a live run" in again.stderr, \
                context + again.stderr
            assert set(live_runs(root)) == set(alive), "a second copy started: " + context
        else:  # nothing runs; a run that started and ended must be pulled first
            assert down.returncode == 0 or "never pulled" in down.stderr, \
                context + down.stdout + down.stderr
        statuses = {r["id"]: r["status"] for r in json.loads(cli.ok("runs", "--json").stdout)
                    ["runs"]}
        leftovers = [d.name for d in set(root.iterdir()) - before] if root.exists() else []
        assert set(leftovers) <= set(statuses), "a run dir no record names: " + context
        if how == "finished first":
            outcome = "recorded as started"
        elif alive:
            outcome = ("started, recorded launching: adopted" if "launching" in
                       {record[name] for name in alive} else "started and recorded")
        elif record:
            outcome = "nothing started: launching record settled"
            assert not set(record) & set(statuses), context  # the settled record is gone
        else:
            outcome = "killed before the record: nothing on the box"
            assert not leftovers, context
        outcomes[f"{how}: {outcome}"] += 1
        if down.returncode:
            cli.ok("down", "box", "--discard-results", input="box\n")  # ends what runs
        assert not live_runs(root), context
    print(f"window {window:.2f} s", dict(outcomes))
    assert sum(outcomes.values()) == TRIALS


def test_a_live_run_the_record_lost_blocks_down_and_a_second_launch(cli, tmp_path):
    spec = write_job(tmp_path / "job", run="sleep 60")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    root = cli.home / "boxes" / "box" / "scratch" / "rgt"
    db = sqlite3.connect(cli.home / "state.db")  # a record restored from an older backup
    with db:
        db.execute("DELETE FROM runs WHERE id=?", (run_id,))
    db.close()
    runner = json.loads((root / run_id / "state.json").read_text())["runner_pid"]
    for args, given in ((("down", "box", "--yes"), None),
                        (("down", "box", "--discard-results"), "box\n"),
                        (("run", "box", str(spec), "-d"), None)):
        refused = cli(*args, input=given)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        line = refused.stderr.strip()
        assert len(line.splitlines()) == 1 and "not in this laptop's record" in line, line
        assert f"{root}/{run_id}" in line and f"kill -TERM {runner})" in line, line
    assert set(live_runs(root)) == {run_id} and (root / run_id / "state.json").exists()
    os.kill(runner, signal.SIGTERM)  # what the refusal says to do
    deadline = time.monotonic() + 30
    while live_runs(root) and time.monotonic() < deadline:
        time.sleep(0.2)
    cli.ok("down", "box", "--yes")
