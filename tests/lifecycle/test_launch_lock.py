"""One `rgt run` per (box, job) at a time, across processes: a lock, not a check."""

from __future__ import annotations

import os
import subprocess
import sys

from boxkit import write_job

from rgt.errors import UserError
from rgt.hostos import exclusive_lock


def test_simultaneous_runs_of_one_job_start_once(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run="sleep 30")
    env = {**os.environ, **cli.env}
    procs = [subprocess.Popen([sys.executable, "-m", "rgt", "run", "box", str(spec)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    started = [r for r in results if r[0] == 0]
    assert len(started) == 1, results
    for rc, _, err in results:
        if rc != 0:
            assert rc == 2 and ("is starting right now" in err or "already has a live run" in err)
            assert "Traceback" not in err
    scratch = cli.home / "boxes" / "box" / "scratch" / "rgt"
    assert len([d for d in scratch.iterdir() if (d / "state.json").exists()]) == 1
    cli("down", "box", "--discard-results", input="box\n")


def test_the_lock_is_held_across_processes_and_freed_by_exit(tmp_path):
    path = str(tmp_path / "locks" / "x.lock")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from rgt.hostos import exclusive_lock\n"
        f"with exclusive_lock({path!r}, 'busy'):\n"
        "    print('held', flush=True); time.sleep(30)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        try:
            with exclusive_lock(path, "busy"):
                raise AssertionError("a second holder got the lock")
        except UserError as err:
            assert str(err) == f"busy (pid {holder.pid})"
    finally:
        holder.kill()  # SIGKILL: the kernel frees the lock, no stale file to clean
        holder.wait()
    with exclusive_lock(path, "busy"):
        pass
