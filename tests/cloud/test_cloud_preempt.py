"""`rgt watch` follows vast.ai's instance state, and a preempted run comes back through onstart.

The box is the real sshd on 127.0.0.1, rented through `rgt up` against the fake vast.ai API
(tests/cloud/fakes/fake_vast_api.py). A preemption is played the way a container stop plays
it: the API reports the instance exited while vast.ai still intends it to run, and every
process of the run (runner, job, tmux session) dies by SIGKILL with no notice (VAST4). The
resume is the container start: the API reports running and the onstart script that `rgt up`
installed runs on the box with bash.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

from boxkit import wait_for, write_job
from cloudkit import IMAGE, rent_vast, rgt_cli
from fake_vast_api import offer

import rgt
from rgt.lifecycle import watch
from rgt.remote.reach import transport_for
from rgt.remote.summary import summarize
from rgt.store import Box, Run

PY = sys.executable  # the "box" is this machine: the interpreter that has torch
SRC = str(Path(rgt.__file__).resolve().parents[1])  # rgt importable in the job, however installed


def _ok(*args: str, timeout: float = 120):
    result = rgt_cli(*args, timeout=timeout)
    assert result.returncode == 0, f"rgt {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def test_preempted_run_reads_paused_then_resumes_from_its_checkpoint_via_onstart(
        vast_api, store, sshd_server, tmp_path):
    workspace = tmp_path / "workspace"
    rent = rent_vast(vast_api, sshd_server, workspace, "v", offer(102, dph=0.35, min_bid=0.10),
                     "--bid", "0.2")
    assert rent.returncode == 0, rent.stderr
    instance_id = store.box("v").extra["instance_id"]
    onstart = vast_api.instances[instance_id]["_onstart"]  # what the container start runs

    train = (f"{PY} -m rgt.examples.train_mlp --steps 40 --save-every 10 --metrics-every 10 "
             "--ckpt-dir $RGT_CKPT_DIR --out out --sleep 0.1")
    spec = write_job(tmp_path / "job", name="mlp", run=train, outputs=["out"],
                     checkpoint_dir="$RGT_CKPT_DIR", env={"PYTHONPATH": SRC})
    run_id = _ok("run", "v", str(spec)).stdout.strip().splitlines()[-1]
    run_dir = workspace / "rgt" / run_id
    home = workspace / "rgt" / "jobs" / "mlp" / "ckpt"  # the job's checkpoint home
    wait_for(lambda: any(home.glob("ckpt-*.json")), timeout=60)

    # Preempted: the API says exited/intended running, and the container's processes die.
    vast_api.preempt(instance_id)
    first = json.loads((run_dir / "state.json").read_text())
    assert first["status"] == "running" and first["launch"] == 1
    box = store.box("v")
    transport = transport_for(box)
    try:
        transport.run(f"kill -KILL {first['runner_pid']}; kill -KILL -- -{first['pgid']}; "
                      f"tmux kill-session -t rgt-{run_id} 2>/dev/null; true", timeout=30)
        wait_for(lambda: not Path(f"/proc/{first['pid']}").exists(), timeout=10)

        paused = _ok("watch", "v", run_id)
        assert "paused" in paused.stdout and "VAST4" in paused.stdout, paused.stdout
        assert "outbid" in paused.stdout and "vanished" not in paused.stdout
        assert store.run("v", run_id).status == "paused"  # live, not an ending
        waiting = rgt_cli("watch", "v", run_id, "--until-done", "--timeout", "1")
        assert waiting.returncode == 4 and "still paused after 1 s" in waiting.stderr

        # The GPU frees: the instance runs again, its processes not yet relaunched.
        vast_api.resume(instance_id)
        resuming = _ok("watch", "v", run_id)
        assert "resuming" in resuming.stdout and "onstart" in resuming.stdout, resuming.stdout
        # ... and the container start runs the onstart script, as root, with bash.
        started = transport.run("bash -s", stdin=onstart.encode(), timeout=60)
        assert started.ok, started.stderr
    finally:
        transport.close()

    done = _ok("watch", "v", run_id, "--until-done", "--timeout", "120")
    assert "succeeded" in done.stdout
    log = (run_dir / "log").read_text()
    assert log.count("fresh start") == 1, log
    resumed = int(re.search(r"resumed step=(\d+)", log).group(1))
    assert 10 <= resumed < 40 and "done step=40" in log
    assert "relaunch: launch 1 ended without a record" in log  # the log was appended to
    state = json.loads((run_dir / "state.json").read_text())
    assert state["launch"] == 2 and state["status"] == "succeeded"
    assert state["runner_pid"] != first["runner_pid"]
    metrics = json.loads((run_dir / "code" / "out" / "metrics.json").read_text())
    assert metrics["resumed_from"] == resumed

    pulled = _ok("pull", "v", run_id, "--dest", str(tmp_path / "pulled"))
    assert "verified" in pulled.stdout


def _box_with_run(store, vast_api, status: str = "running") -> tuple[Box, Run, int]:
    vast_api.offers = [offer(102)]
    instance_id = vast_api.add_instance(102, IMAGE)
    store.add_box(Box("v", "vastai", {"host": "127.0.0.1", "port": 9}, "/workspace",
                      "/workspace", 0.3, "up", 0, extra={"instance_id": instance_id}))
    now = time.time()
    store.add_run(Run("r1", "v", "job", "/workspace/rgt/r1", {}, status, None, now, now))
    return store.box("v"), store.run("v", "r1"), instance_id


def test_watch_gate_follows_the_instance_state(vast_api, store):
    """Every state where the instance cannot run the job, through the real `watch.refresh`
    (no SSH is attempted: the box's port 9 would refuse it)."""
    box, run, instance_id = _box_with_run(store, vast_api)
    keys = set(summarize({})) | {"resumed"}  # refresh says of every run whether it resumed

    vast_api.preempt(instance_id)
    summary = watch.refresh(store, box, run)
    assert set(summary) == keys  # the same flat summary the probe gives
    assert summary["status"] == "paused" and "VAST4" in summary["causes"][0]
    assert "outbid" in summary["causes"][0] and "onstart relaunches" in summary["advice"]

    vast_api.set_state(instance_id, actual_status="scheduling", cur_state="stopped",
                       status_msg="Scheduling: waiting for the GPU")
    assert watch.refresh(store, box, run)["status"] == "paused"
    store.update_box("v", extra={**store.box("v").extra, "scheduling_since": 1.0})  # long ago
    stuck = watch.refresh(store, store.box("v"), run)
    assert stuck["status"] == "paused" and "stuck-scheduling (VAST3)" in stuck["causes"][0]
    assert "NEW instance" in stuck["advice"]

    vast_api.set_state(instance_id, actual_status="offline", cur_state="offline",
                       status_msg="host offline")
    offline = watch.refresh(store, store.box("v"), run)
    assert offline["status"] == "paused" and "VAST7" in offline["causes"][0]
    assert store.run("v", "r1").status == "paused"

    vast_api.instances.pop(instance_id)  # destroyed in the console: the disk went with it
    gone = watch.refresh(store, store.box("v"), run)
    assert gone["status"] == "vanished" and "gone" in gone["causes"][0]


def test_a_run_that_ended_keeps_its_status_on_a_paused_instance(vast_api, store):
    box, run, instance_id = _box_with_run(store, vast_api, status="succeeded")
    vast_api.preempt(instance_id)
    summary = watch.refresh(store, box, run)
    assert summary["status"] == "succeeded" and "VAST4" in summary["causes"][0]
