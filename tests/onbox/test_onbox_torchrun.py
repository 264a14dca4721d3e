"""The runner owns the whole process tree of a torchrun job (issue 27 items 3 and 5).

Real ``torchrun --standalone --nproc_per_node=2`` (gloo, CPU) under the real runner. torchrun
starts its workers in sessions of their own, so a kill of the job's process group, of the agent
or of one worker leaves processes the group does not hold: the runner (a child subreaper) must
end every one, say how many it ended, and a relaunch must resume from the snapshot.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
from ddp_job import DDP_JOB, TORCHRUN
from onbox_helpers import read_state, wait_for, wait_log, wait_status

from rgt.onbox import _common, runner

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # each torchrun start imports torch three times: ~5-15 s a test



@pytest.fixture
def ddp_run(make_run, tmp_path):
    """RUN_DIR of the DDP job under torchrun; STEPS steps, PAUSE seconds after each."""

    def _make(steps=400, pause=0.05, recover=None, run_id="r1"):
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        run_dir = make_run(DDP_JOB, run_id=run_id, env={"RGT_CKPT_DIR": str(home),
                                                        "OMP_NUM_THREADS": "1"})
        spec = json.loads((run_dir / "run.json").read_text())
        spec["command"] = f"{TORCHRUN} job.py {steps} {pause}"
        spec["recover"] = recover
        (run_dir / "run.json").write_text(json.dumps(spec))
        return run_dir

    return _make


def workers(run_dir):
    code = run_dir / "code"
    return wait_for(lambda: [int((code / f"worker{r}.pid").read_text()) for r in (0, 1)]
                    if all((code / f"worker{r}.pid").exists() for r in (0, 1)) else None,
                    60, what="both workers started")


def training(run_dir, steps=3):
    """Both workers' pids once rank 0 has saved STEPS steps."""
    pids = workers(run_dir)
    wait_log(run_dir, f"rank=0 step={steps}", timeout=60)
    return pids


def survivors(run_dir):
    return runner.run_processes(str(run_dir))


def agent_pid(run_dir):
    for proc in _common.rgt_processes()[0]:
        if proc["env"]["RGT_RUN_DIR"] == str(run_dir) and \
                _common.proc_cmdline(proc["pid"])[1:3] == ["-m", "torch.distributed.run"]:
            return proc["pid"]
    raise AssertionError("no torchrun agent")


def test_sigkill_of_the_group_ends_the_workers_and_a_relaunch_resumes(ddp_run, launcher):
    run_dir = ddp_run()
    launcher.start(run_dir)
    running = wait_status(run_dir, "running")
    pids = training(run_dir)
    os.killpg(running["pgid"], signal.SIGKILL)  # bash + agent; the workers are not in it
    state = wait_status(run_dir, ("failed", "stopped", "succeeded"), timeout=30)
    assert state["status"] == "failed" and state["exit_code"] == 137
    assert state["leftovers"] == 2 and state["survivors"] == []  # the two workers, ended
    assert not any(_common.pid_alive(p) for p in pids) and survivors(run_dir) == {}

    saved = torch.load(run_dir.parent.parent.parent / "home" / "snapshot.pt")["step"]
    assert saved >= 3
    spec = json.loads((run_dir / "run.json").read_text())
    spec["command"] = f"{TORCHRUN} job.py {saved + 3} 0"
    (run_dir / "run.json").write_text(json.dumps(spec))
    launcher.start(run_dir)  # a relaunch in the same RUN_DIR
    state = wait_for(lambda: (read_state(run_dir) or {}).get("launch") == 2 and
                     wait_status(run_dir, ("failed", "stopped", "succeeded"), timeout=60), 60,
                     what="the relaunch's end")
    assert state["status"] == "succeeded", state
    log = (run_dir / "log").read_text()
    assert f"rank=0 resumed step={saved}" in log and f"rank=1 resumed step={saved}" in log


def test_a_killed_worker_fails_the_run_with_nothing_left(ddp_run, launcher):
    run_dir = ddp_run()
    launcher.start(run_dir)
    wait_status(run_dir, "running")
    pids = training(run_dir)
    os.kill(pids[1], signal.SIGKILL)  # torchrun ends the other worker and exits 1
    state = wait_status(run_dir, ("failed", "stopped", "succeeded"), timeout=60)
    assert state["status"] == "failed" and state["exit_code"] == 1
    assert state["survivors"] == [] and survivors(run_dir) == {}
    assert state["leftovers"] == 0  # the agent ended its workers itself


def test_a_killed_agent_orphans_the_workers_and_recover_restarts_without_them(ddp_run,
                                                                               launcher):
    recover = {"max_restarts": 1, "on": ["crashed"], "backoff_s": 0}
    run_dir = ddp_run(steps=12, pause=0.1, recover=recover)
    launcher.start(run_dir)
    wait_status(run_dir, "running")
    pids = training(run_dir)
    os.kill(agent_pid(run_dir), signal.SIGKILL)  # the workers are re-parented to the runner
    state = wait_status(run_dir, ("failed", "stopped", "succeeded"), timeout=90)
    assert state["status"] == "succeeded", state
    assert [r["exit_code"] for r in state["restarts"]] == [137]
    log = (run_dir / "log").read_text()
    # the orphans were ended before the second attempt started, and it resumed
    ended = log.index("terminating 2 leftover process(es) of the job")
    assert ended < log.index("restart 1/1") < log.index("rank=0 resumed step=")
    assert not any(_common.pid_alive(p) for p in pids) and survivors(run_dir) == {}


def test_sigterm_to_the_runner_is_a_stop_though_torchrun_exits_1(ddp_run, launcher):
    recover = {"max_restarts": 2, "on": ["crashed", "preempted"], "backoff_s": 0}
    run_dir = ddp_run(recover=recover)
    proc = launcher.start(run_dir)
    wait_status(run_dir, "running")
    training(run_dir)
    proc.send_signal(signal.SIGTERM)  # rgt cancel; a platform's preemption notice
    state = wait_status(run_dir, ("failed", "stopped", "succeeded"), timeout=60)
    assert state["exit_code"] == 1  # torchrun's answer to SIGTERM
    assert state["status"] == "stopped" and state["stop_signal"] == "SIGTERM", state
    assert not state.get("restarts") and state["survivors"] == [] and survivors(run_dir) == {}
