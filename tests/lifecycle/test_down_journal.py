"""`rgt down` is a journal (issue 27 item 6): killed at any point, `rgt down` again finishes
the same teardown — never a second one, never a false refusal, and nothing a run needs is
deleted. A seeded loop SIGKILLs a real `rgt down --yes` of a local box whose one run is pulled
and verified, at random delays and at random moments inside each phase (before the teardown is
recorded, just after, inside the delete, at the end), then runs `rgt down --yes` again."""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from boxkit import Rgt, wait_for, write_job

# the suite runs 12; RGT_KILL_TRIALS=24 is the run issue 27's closing note reports
TRIALS = int(os.environ.get("RGT_KILL_TRIALS", "12"))
JUNK = 12_000  # small files in the box's scratch: its delete takes a moment a kill can land in


def files_under(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


class PulledBox:
    """A local box with one run pulled and verified, made once at a fixed path and copied
    back to that path for every trial (the store records absolute paths). All on a tmpfs:
    thousands of small files are made and deleted per trial."""

    def __init__(self, root: Path) -> None:
        self.home = root / "trial" / "rgt-home"
        self.template = root / "template"
        cli = Rgt(self.home)
        work = root / "job"
        work.mkdir()
        (work / "train.py").write_text(
            "import os\nos.makedirs('out', exist_ok=True)\n"
            "open('out/model.bin', 'wb').write(os.urandom(4096))\n"
            "os.makedirs(os.environ['RGT_CKPT_DIR'], exist_ok=True)\n"
            "open(os.path.join(os.environ['RGT_CKPT_DIR'], 'step_1.pt'), 'wb')"
            ".write(os.urandom(1024))\n")
        spec = self.spec = write_job(work, run="python3 train.py", outputs=["out"])
        cli.ok("up", "box")
        self.run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
        cli.ok("watch", "box", self.run_id, "--until-done", "--timeout", "60")
        self.results = self.home.parent / "results"
        cli.ok("pull", "box", self.run_id, "--dest", str(self.results))
        self.scratch = self.home / "boxes" / "box" / "scratch"
        self.durable = self.home / "boxes" / "box" / "durable"
        self.kept = {"durable": files_under(self.durable), "results": files_under(self.results)}
        assert self.kept["durable"] and self.kept["results"]
        shutil.copytree(self.home.parent, self.template, symlinks=True)
        self.scratch_files = len(files_under(self.scratch)) + JUNK

    def fresh(self) -> Rgt:
        shutil.rmtree(self.home.parent)
        shutil.copytree(self.template, self.home.parent, symlinks=True)
        for i in range(JUNK):  # made, not copied: twice as fast
            folder = self.scratch / "junk" / f"d{i // 1000}"
            if i % 1000 == 0:
                folder.mkdir(parents=True)
            (folder / f"f{i}").write_bytes(b"x")
        return Rgt(self.home)

    def read(self, query: str) -> list[tuple]:
        db = sqlite3.connect(self.home / "state.db", timeout=30)
        try:
            return db.execute(query).fetchall()
        finally:
            db.close()

    def phase(self) -> str:
        """Where the killed `down` stopped, read from the store and the disk."""
        if self.read("SELECT state FROM boxes WHERE name='box'") == [("down",)]:
            return "after the box was marked down"
        teardown = self.read("SELECT done FROM teardowns")
        if not teardown:
            return "before the teardown was recorded"
        if json.loads(teardown[0][0]):
            return "deleted, box not yet marked down"
        if self.scratch.exists() and len(files_under(self.scratch)) == self.scratch_files:
            return "recorded, nothing deleted yet"
        return "inside the delete"

    def deleting(self) -> bool:
        junk = self.scratch / "junk"
        return not all((junk / f"d{i}").exists() for i in range(JUNK // 1000))


@pytest.fixture(scope="module")
def pulled(tmp_path_factory) -> Iterator[PulledBox]:
    root = tmp_path_factory.mktemp("journal")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(root)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield PulledBox(root)
    finally:
        if subprocess.run(["umount", str(root)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(root)], capture_output=True)


def start_down(cli: Rgt) -> subprocess.Popen:
    env = {**os.environ, **cli.env, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.Popen([sys.executable, "-m", "rgt", "down", "box", "--yes"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def kill_when(proc: subprocess.Popen, ready, delay: float) -> bool:
    """SIGKILL the process group `delay` s after READY() holds; False if it ended first."""
    wait_for(lambda: ready() or proc.poll() is not None, timeout=60, every=0.005)
    time.sleep(delay)
    if proc.poll() is not None:
        proc.communicate()
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    return True


def test_down_killed_anywhere_is_finished_by_the_next_down(pulled):
    rng = random.Random(27)
    started = time.monotonic()
    cli = pulled.fresh()
    whole = time.monotonic()
    cli.ok("down", "box", "--yes")
    whole = time.monotonic() - whole  # an uninterrupted `down`, for the random delays
    hits: collections.Counter[str] = collections.Counter()
    outcomes: collections.Counter[str] = collections.Counter()

    def recorded() -> bool:
        return bool(pulled.read("SELECT 1 FROM teardowns"))

    for trial in range(TRIALS):
        cli = pulled.fresh()
        proc = start_down(cli)
        # a plain random delay; a random moment just after the teardown was recorded; or one
        # from the start of the delete to past the end of `down`
        point = trial % 3
        ready = {0: lambda: True, 1: recorded, 2: pulled.deleting}[point]
        delay = rng.uniform(0, (whole, 0.05, 0.4)[point])
        killed = kill_when(proc, ready, delay)
        phase = pulled.phase() if killed else "not killed: it had finished"
        hits[phase] += 1
        again = cli("down", "box", "--yes")
        said = again.stdout + again.stderr
        assert "Traceback" not in said and again.returncode != 3, f"false refusal: {said}"
        assert "ran again" not in said
        if phase == "after the box was marked down" or not killed:
            assert again.returncode == 2 and "already down" in said, said
            outcomes["already down: nothing to finish"] += 1
        else:
            assert again.returncode == 0, said
            resumed = "resuming the teardown of box" in said
            assert resumed == (phase != "before the teardown was recorded"), (phase, said)
            outcomes["resumed and finished" if resumed else "a fresh down, finished"] += 1
        assert pulled.read("SELECT state FROM boxes") == [("down",)]
        assert pulled.read("SELECT count(*) FROM teardowns WHERE finished IS NOT NULL") \
            == [(1,)], "one teardown, never a second"
        assert not pulled.scratch.exists()
        assert files_under(pulled.durable) == pulled.kept["durable"]
        assert files_under(pulled.results) == pulled.kept["results"]
    elapsed = time.monotonic() - started
    print(f"\n{TRIALS} trials in {elapsed:.0f} s; uninterrupted down {whole:.2f} s; "
          f"kills hit: {dict(hits)}; outcomes: {dict(outcomes)}")
    assert hits["inside the delete"] >= 3 and hits["before the teardown was recorded"] >= 3


def test_a_resumed_teardown_asks_nothing_again_and_the_box_takes_no_new_run(pulled):
    for _ in range(3):  # a kill a few ms late may find the delete done: try again
        cli = pulled.fresh()
        if kill_when(start_down(cli), pulled.deleting, 0) and \
                pulled.phase() == "inside the delete":
            break
    assert pulled.phase() == "inside the delete"
    refused = cli("run", "box", str(pulled.spec), "-d")
    assert refused.returncode == 2 and "being torn down" in refused.stderr, refused.stderr
    assert "`rgt down box` finishes it" in refused.stderr
    done = cli("down", "box")  # no --yes, nothing on stdin: the first `down` was confirmed
    assert done.returncode == 0, done.stdout + done.stderr
    [resuming] = [line for line in done.stdout.splitlines() if line.startswith("resuming")]
    assert "1 run(s): 1 pulled and verified" in resuming and "(0 of 2 step(s) done)" in resuming
    assert "Type the box name" not in done.stdout and "box is down: removed" in done.stdout
    assert pulled.read("SELECT state FROM boxes") == [("down",)]
