"""A clean exit after SIGTERM is a stop, not a sync failure: the runner records the signal it
delivered (to itself, forwarded) or the job's shell saw (sent to the job's process group)."""

from __future__ import annotations

import json
import os
import signal

import pytest
from onbox_helpers import wait_log, wait_status

from rgt.onbox import probe

# Lightning's behaviour on SIGTERM, in miniature: note it, exit 0, write no outputs
EXIT_0_ON_TERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("ready", flush=True)
time.sleep(60)
open("out.txt", "w").write("never")
"""
SAVE_AND_85 = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(85))
print("ready", flush=True)
time.sleep(60)
"""
NO_HANDLER = 'import time\nprint("ready", flush=True)\ntime.sleep(60)\n'


@pytest.mark.parametrize("to_group", [False, True], ids=["runner", "process-group"])
def test_exit_0_after_sigterm_is_stopped(make_run, launcher, tmp_path, to_group):
    run_dir = make_run(EXIT_0_ON_TERM, outputs=["out.txt"], durable_dir=tmp_path / "durable")
    proc = launcher.start(run_dir)
    running = wait_status(run_dir, "running")
    wait_log(run_dir, "ready")
    if to_group:  # the runner never hears it: the job shell's trap notes it
        os.killpg(running["pgid"], signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    state = wait_status(run_dir, ("stopped", "succeeded", "failed", "sync-failed"))
    assert state["status"] == "stopped" and state["stop_signal"] == "SIGTERM"
    assert state["exit_code"] == 0 and not state.get("sync")  # no copy attempted, none failed
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    verdict = probe.probe(str(run_dir), use_dmesg=False)["verdict"]
    assert verdict["status"] == "stopped" and verdict["cause"] == "stopped"
    assert "stopped by SIGTERM: the job exited 0 on it" in verdict["summary"]
    assert "AD4" not in str(verdict)


def test_killed_by_the_signal_is_stopped_and_85_stays_preempted(make_run, launcher):
    run_dir = make_run(NO_HANDLER)
    proc = launcher.start(run_dir)
    wait_status(run_dir, "running")
    wait_log(run_dir, "ready")
    proc.send_signal(signal.SIGTERM)
    state = wait_status(run_dir, ("stopped", "failed"))
    assert state["status"] == "stopped" and state["exit_code"] == 143

    run_dir = make_run(SAVE_AND_85, run_id="r2")
    proc = launcher.start(run_dir)
    wait_status(run_dir, "running")
    wait_log(run_dir, "ready")
    proc.send_signal(signal.SIGTERM)
    state = wait_status(run_dir, ("stopped", "failed"))
    assert state["status"] == "failed" and state["exit_code"] == 85  # watch: "preempted"
    assert probe.verdict(state, {})["cause"] == "preempted"


def test_an_earlier_attempts_signal_does_not_stop_the_next(make_run, launcher):
    run_dir = make_run('print("done")\n')
    (run_dir / "job.signals").write_text("SIGTERM\n")  # left by a previous launch
    launcher.start(run_dir)
    state = wait_status(run_dir, ("succeeded", "stopped", "failed"))
    assert state["status"] == "succeeded"


def test_a_group_sigterm_is_a_stop_that_recover_does_not_undo(make_run, launcher):
    run_dir = make_run(NO_HANDLER)
    spec = json.loads((run_dir / "run.json").read_text())
    spec["recover"] = {"max_restarts": 3, "on": ["crashed", "preempted"], "backoff_s": 0}
    (run_dir / "run.json").write_text(json.dumps(spec))
    launcher.start(run_dir)
    running = wait_status(run_dir, "running")
    wait_log(run_dir, "ready")
    os.killpg(running["pgid"], signal.SIGTERM)  # a scheduler's notice, not via the runner
    state = wait_status(run_dir, ("stopped", "failed"))
    assert state["status"] == "stopped" and not state.get("restarts"), state


# torchrun's and accelerate's behaviour on SIGTERM, in miniature: note it, exit 1
EXIT_1_ON_TERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("to_group", [False, True], ids=["runner", "process-group"])
def test_exit_1_after_sigterm_is_a_stop_that_recover_does_not_undo(make_run, launcher,
                                                                   to_group):
    run_dir = make_run(EXIT_1_ON_TERM)
    spec = json.loads((run_dir / "run.json").read_text())
    spec["recover"] = {"max_restarts": 3, "on": ["crashed", "preempted"], "backoff_s": 0}
    (run_dir / "run.json").write_text(json.dumps(spec))
    proc = launcher.start(run_dir)
    running = wait_status(run_dir, "running")
    wait_log(run_dir, "ready")
    if to_group:
        os.killpg(running["pgid"], signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    state = wait_status(run_dir, ("stopped", "failed"))
    assert state["status"] == "stopped" and state["stop_signal"] == "SIGTERM", state
    assert state["exit_code"] == 1 and not state.get("restarts")
    assert state["error"] == "stopped by SIGTERM (exit 1)"
    verdict = probe.verdict(state, {})
    assert verdict["cause"] == "stopped"
    assert verdict["summary"] == "stopped by SIGTERM: the job exited 1 on it"


def test_a_crash_with_exit_1_and_no_signal_is_still_a_failure(make_run, launcher):
    launcher.start(make_run("import sys; sys.exit(1)\n"))
    run_dir = launcher.started[-1][1]
    state = wait_status(run_dir, ("stopped", "failed", "succeeded"))
    assert state["status"] == "failed" and state["exit_code"] == 1 and not state.get("stop_signal")


def test_a_signal_after_the_job_ended_on_its_own_does_not_make_it_a_stop(make_run, launcher,
                                                                        tmp_path):
    """A cancel that races a finished run: the job exited 0 with its outputs before the
    runner heard SIGTERM, so its outputs are synced and it succeeded."""
    job = 'open("out.txt", "w").write("done")\n'
    durable = tmp_path / "durable"
    run_dir = make_run(job, outputs=["out.txt"], durable_dir=durable)
    spec = json.loads((run_dir / "run.json").read_text())
    # a leftover that ignores SIGTERM keeps the runner busy for its kill grace (2 s)
    spec["command"] += """; (setsid bash -c 'trap "" TERM; sleep 30' &)"""
    (run_dir / "run.json").write_text(json.dumps(spec))
    proc = launcher.start(run_dir)
    wait_log(run_dir, "leftover process(es) of the job")  # the leader ended; runner busy
    proc.send_signal(signal.SIGTERM)
    state = wait_status(run_dir, ("stopped", "succeeded", "failed", "sync-failed"))
    assert state["status"] == "succeeded" and not state.get("stop_signal"), state
    assert (durable / "out.txt").read_text() == "done"
