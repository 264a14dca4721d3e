"""probe.py --census: every live runner and job process of the runs under an rgt root, recorded
or not, found by RGT_RUN_DIR in /proc/PID/environ (real runners, real escaped processes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import pytest
from onbox_helpers import feed, read_state, shipped, wait_for, wait_log, wait_status

from rgt.errors import UserError
from rgt.onbox import _common, probe
from rgt.remote.layout import Layout
from rgt.remote.runner import wait_for_state
from rgt.transport.local import LocalTransport

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
        assert [p for p, _ in probe.probe(str(run_dir), use_dmesg=False)["processes"]] == [escaped]

        # rgt cancel's stop.py ends it though neither the runner nor the group is left
        out = feed("stop", str(run_dir / "state.json"), "5")
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert f"SIGTERM to pid {escaped}" in report["sent"] and report["left"] == []
        assert not _common.pid_alive(escaped)
    finally:
        with contextlib.suppress(OSError):
            os.kill(escaped, signal.SIGKILL)
    wait_for(lambda: not _common.pid_alive(escaped), 10, what="escaped process gone")
    assert census(run_dir.parent)["runs"] == {}


def test_census_needs_a_root():
    out = feed("probe", "--census")
    assert out.returncode == 2 and "usage" in out.stderr


def start_refused(run_dir):
    """Run the shipped runner in the foreground; its refusal (exit 3, JSON on stderr)."""
    out = subprocess.run([sys.executable, str(shipped("runner", run_dir)), str(run_dir)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, (out.returncode, out.stderr)
    return json.loads(out.stderr)["reason"]


def test_no_second_run_of_a_job_while_any_process_of_another_lives(make_run, launcher,
                                                                   tmp_path):
    """Per run dir and per job (one checkpoint home): refused while the other's runner holds
    the job lock, and still refused once that runner is dead but a job process lives on."""
    home = tmp_path / "durable" / "jobs" / "mlp" / "ckpt"
    first = make_run(ESCAPING_JOB, env={"RGT_CKPT_DIR": str(home)})
    second = make_run('print("second ran")\n', run_id="r2", env={"RGT_CKPT_DIR": str(home)})
    proc = launcher.start(first)
    running = wait_status(first, "running")
    wait_log(first, "ready")
    escaped = int((first / "code" / "escaped.pid").read_text())
    try:
        reason = start_refused(second)
        assert "another run of this job is live" in reason and str(first) in reason
        assert str(home) in reason and not (home / ".rgt-job.lock").exists()  # beside, not in
        # what `rgt run` waits on: the refusal's reason at once, not a timeout's runner.out tail
        (second / "runner.out").write_text(json.dumps({"refused": True, "reason": reason}))
        with pytest.raises(UserError) as refused:
            wait_for_state(LocalTransport(), Layout(str(second), str(tmp_path), str(home)),
                           timeout=20)
        assert str(refused.value).startswith("the box's runner refused to start the job: "
                                             "another run of this job is live")
        (second / "runner.out").unlink()

        os.kill(proc.pid, signal.SIGKILL)  # its lock goes with it; its escaped child does not
        proc.wait(timeout=10)
        os.killpg(running["pgid"], signal.SIGKILL)
        wait_for(lambda: not _common.pid_alive(running["pid"]), 10, what="job group gone")
        reason = start_refused(second)
        assert f"{first}: pids {escaped}" in reason
        reason = start_refused(first)  # a relaunch of the first run itself
        assert "earlier launch of this run still live" in reason and str(escaped) in reason
    finally:
        with contextlib.suppress(OSError):
            os.kill(escaped, signal.SIGKILL)
    wait_for(lambda: not _common.pid_alive(escaped), 10, what="escaped process gone")
    launcher.start(second)
    assert wait_status(second, ("succeeded", "failed"))["status"] == "succeeded"


# A daemonising child: it starts a grandchild in a session of its own and exits at once, so the
# grandchild is an orphan from the start (what torchrun's workers become when the agent dies).
ORPHANING_JOB = """
import subprocess, sys, time
code = ("import subprocess, sys; g = subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)'], start_new_session=True); "
        "open('grandchild.pid', 'w').write(str(g.pid))")
subprocess.run([sys.executable, "-c", code], check=True)
print("ready", flush=True)
time.sleep(60)
"""


def test_the_runner_adopts_orphans_and_reaps_them(make_run, launcher):
    run_dir = make_run(ORPHANING_JOB)
    proc = launcher.start(run_dir)
    wait_status(run_dir, "running")
    wait_log(run_dir, "ready")
    orphan = int((run_dir / "code" / "grandchild.pid").read_text())
    try:
        assert int(_common.proc_stat_fields(orphan)[1]) == proc.pid  # the subreaper adopted it
        os.kill(orphan, signal.SIGKILL)
        # reaped by the runner's heartbeat: not even a zombie is left
        wait_for(lambda: not os.path.exists(f"/proc/{orphan}"), 10, what="orphan reaped")
    finally:
        with contextlib.suppress(OSError):
            os.kill(orphan, signal.SIGKILL)
    proc.send_signal(signal.SIGTERM)
    state = wait_status(run_dir, ("stopped", "failed"))
    assert state["status"] == "stopped" and state["leftovers"] == 0
