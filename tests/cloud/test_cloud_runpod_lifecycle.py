"""A RunPod pod's whole life through the real CLI: rented by `rgt up --profile runpod` through
the fake REST API v2, the pod itself the real sshd on 127.0.0.1 (a new published port on every
start, RP6). A training run survives a pod restart by `rgt resume` from its checkpoints; a
second restart brings the pod back with ZERO GPUs (RP1), which `rgt watch` names and `rgt
resume` refuses; the run is pulled and verified, and `rgt down` terminates the pod and polls
until RunPod no longer has it (RP14), while the network volume keeps billing in `rgt ls`.

A restart is played the way a container restart plays it: every process of the pod dies
(the fake's `on_stop` kills the runs' runners, jobs and tmux sessions with SIGKILL).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from boxkit import wait_for, write_job
from cloudkit import rgt_cli

import rgt

PY = sys.executable  # the "pod" is this machine: the interpreter that has torch
SRC = str(Path(rgt.__file__).resolve().parents[1])
IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"


def _ok(*args: str, timeout: float = 120, **kwargs):
    result = rgt_cli(*args, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"rgt {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def _kill_runs(data_dir: Path) -> None:
    """What a pod stop does to the container: every run's processes die, no signal to save."""
    for state_file in data_dir.glob("rgt/*/state.json"):
        state = json.loads(state_file.read_text())
        for pid, group in ((state.get("runner_pid"), False), (state.get("pgid"), True)):
            with contextlib.suppress(ProcessLookupError, PermissionError, TypeError):
                (os.killpg if group else os.kill)(int(pid), signal.SIGKILL)
        subprocess.run(["tmux", "kill-session", "-t", f"rgt-{state_file.parent.name}"],
                       capture_output=True, check=False)
        if state.get("pid"):
            wait_for(lambda p=state["pid"]: not Path(f"/proc/{p}").exists(), timeout=10)


def _back_up(fake, pod_id: str) -> dict:
    """`rgt cloud-status` until the restarted pod runs again; it records the moved port."""
    def state() -> dict | None:
        status = json.loads(_ok("cloud-status", "rp", "--json").stdout)["instance"]
        return None if status["state"] == "booting" else status
    status = wait_for(state, timeout=30, every=0.01)
    assert fake.pods[pod_id]["status"] == "RUNNING"
    return status


def test_restart_resume_zero_gpus_pull_and_terminate(runpod_api, store, sshd_server, tmp_path):
    fake = runpod_api
    fake.ssh_port = sshd_server.port
    pub = sshd_server.client_key.with_name(sshd_server.client_key.name + ".pub")
    fake.ssh_keys = [pub.read_text().strip()]
    vol = fake.add_volume("ckpts", "US-TX-3", size=100)
    data, durable = tmp_path / "workspace" / "data", tmp_path / "workspace" / "ckpt"
    rented = _ok("up", "rp", "--profile", "runpod", "--gpu", "RTX4090:1", "--image", IMAGE,
                 "--volume", "ckpts", "--container-disk", "30", "--identity",
                 str(sshd_server.client_key), "--data-dir", str(data), "--durable-dir",
                 str(durable))
    pod_id = store.box("rp").extra["instance_id"]
    assert f"instance {pod_id} answers" in rented.stdout, rented.stdout
    created = fake.calls("POST", "/v2/pods")[0].body  # what `rgt up`'s flags became
    assert (created["image"], created["gpu"]["count"], created["disk"]) == (IMAGE, 1, 30)
    assert created["mounts"] == {"network": [{"volumeId": vol["id"], "path": "/workspace"}]}
    fake.on_stop = lambda _: _kill_runs(data)

    train = (f"{PY} -m rgt.examples.train_mlp --steps 40 --save-every 5 --metrics-every 10 "
             "--ckpt-dir $RGT_CKPT_DIR --out out --sleep 0.1")
    spec = write_job(tmp_path / "job", name="mlp", run=train, outputs=["out"],
                     checkpoint_dir="$RGT_CKPT_DIR", env={"PYTHONPATH": SRC})
    first = _ok("run", "rp", str(spec)).stdout.strip().splitlines()[-1]
    wait_for(lambda: any(durable.rglob("ckpt-*.json")), timeout=60)

    # 1. The pod is stopped (a low balance) and watch reads the run paused; it starts again
    # (its GPU still free): the run died with the container, and nothing on RunPod relaunches
    # it (no restart hook, unlike vast.ai's onstart): vanished at once, not "resuming" for
    # minutes; its port moved.
    port = store.box("rp").connection["port"]
    fake.stop_by_platform(pod_id)
    paused = _ok("watch", "rp", first).stdout
    assert "paused" in paused and "is stopped" in paused, paused
    fake.start_by_host(pod_id)
    assert "RP6" in _back_up(fake, pod_id)["moved"]
    assert store.box("rp").connection["port"] != port  # read back from ssh.direct
    back = _ok("watch", "rp", first).stdout
    assert "vanished" in back and "resuming" not in back, back
    second = _ok("resume", "rp", first).stdout.strip().splitlines()[-1]
    assert second != first
    run_dir = data / "rgt" / second
    wait_for(lambda: "resumed step=" in (run_dir / "log").read_text(), timeout=60)

    # 2. It restarts again and comes back with ZERO GPUs (RP1): detected, and not resumed on.
    fake.restart_by_host(pod_id, gpus=0)
    assert _back_up(fake, pod_id)["state"] == "zero-gpu"
    watched = _ok("watch", "rp", second).stdout
    assert "vanished" in watched and "RP1" in watched, watched
    assert "0 of its 1 GPU(s)" in watched and "rent a new pod" in watched
    refused = rgt_cli("resume", "rp", second)
    assert refused.returncode == 2 and "RP1" in refused.stderr, refused.stderr
    assert "nothing was started" in refused.stderr
    assert sorted(r.id for r in store.runs("rp")) == sorted([first, second])  # no third run
    started = [d for d in (data / "rgt").iterdir() if (d / "state.json").exists()]
    assert len(started) == 2  # (the lifecycle made the new run's dir; nothing ran in it)

    # 3. Pull what the pod has (the run's log and its checkpoints), verified here.
    pulled = _ok("pull", "rp", second, "--dest", str(tmp_path / "pulled"))
    assert "verified" in pulled.stdout
    resumed = int(re.search(r"resumed step=(\d+)", (run_dir / "log").read_text()).group(1))
    assert resumed >= 5  # from a checkpoint, not from scratch

    # 4. Down: the panel says what terminate destroys and keeps; the pod is polled until gone.
    fake.delete_polls = 3
    down = _ok("down", "rp", input="rp\n")
    assert "terminate" in down.stdout and "cannot be undone" in down.stdout
    assert "container-disk" in down.stdout and "network-volume" in down.stdout
    panel = " ".join(down.stdout.split())  # the platform's notes for THIS pod, before asking
    assert "/workspace is network volume ckpts" in panel and "survives terminate" in panel
    assert "a stop instead keeps the network volume" in panel and "RP1" in panel, panel
    assert panel.index("RP1") < panel.index("Type the box name")
    assert f"terminated RunPod pod {pod_id}" in down.stdout
    assert "confirmed gone after 3 poll(s)" in down.stdout, down.stdout
    assert fake.calls("DELETE", f"/v2/pods/{pod_id}") and pod_id not in fake.pods
    listing = _ok("ls").stdout  # the volume outlives the pod and bills: ls keeps showing it
    assert "rp" in listing and "ckpts" in listing and "still billing" in listing, listing
