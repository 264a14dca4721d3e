"""probe.py --census: every live runner and job process of the runs under an rgt root, recorded
or not, found by RGT_RUN_DIR in /proc/PID/environ (real runners, real escaped processes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal

from onbox_helpers import feed, read_state, wait_for, wait_log, wait_status

from rgt.onbox import _common

# The job starts a grandchild in a session of its own (as torchrun does with its workers), then
# waits: the grandchild is in neither the job's process group nor its session.
ESCAPING_JOB = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         start_new_session=True)
open("escaped.pid", "w").write(str(child.pid))
print("ready", flush=True)
time.sleep(60)
"""


def census(*roots):
    out = feed("probe", "--census", *map(str, roots))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_census_finds_runner_job_and_escaped_process_then_the_orphan(make_run, launcher,
                                                                     tmp_path):
    run_dir = make_run(ESCAPING_JOB, env={"RGT_CKPT_DIR": str(tmp_path / "home")})
    proc = launcher.start(run_dir)
    running = wait_status(run_dir, "running")
    wait_log(run_dir, "ready")
    escaped = int((run_dir / "code" / "escaped.pid").read_text())
    try:
        doc = census(run_dir.parent, tmp_path / "elsewhere")
        assert doc["procfs"] is True and doc["complete"] is True
        assert list(doc["runs"]) == [str(run_dir)]
        run = doc["runs"][str(run_dir)]
        assert run["run_id"] == "r1" and run["status"] == "running"
        assert run["runner_pid"] == proc.pid and run["runner_alive"] is True
        assert run["runner_pid_start"] == running["runner_pid_start"]
        assert running["pid"] in run["job_pids"] and escaped in run["job_pids"]
        assert proc.pid not in run["job_pids"]
        starts = {p["pid"]: p["start"] for p in run["job_processes"]}
        assert starts[running["pid"]] == running["pid_start"]
        assert run["ckpt_dirs"] == [str(tmp_path / "home")]
        assert census(tmp_path / "elsewhere")["runs"] == {}

        # runner and job group SIGKILLed: the escaped process is an orphan the census still sees
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        os.killpg(running["pgid"], signal.SIGKILL)
        wait_for(lambda: not _common.pid_alive(running["pid"]), 10, what="job group gone")
        assert read_state(run_dir)["status"] == "running"  # the claim left behind
        run = census(run_dir.parent)["runs"][str(run_dir)]
        assert run["runner_alive"] is False and run["runner_pid"] is None
        assert run["job_pids"] == [escaped]
    finally:
        with contextlib.suppress(OSError):
            os.kill(escaped, signal.SIGKILL)
    wait_for(lambda: not _common.pid_alive(escaped), 10, what="escaped process gone")
    assert census(run_dir.parent)["runs"] == {}


def test_census_needs_a_root():
    out = feed("probe", "--census")
    assert out.returncode == 2 and "usage" in out.stderr
