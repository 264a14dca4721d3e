"""An agent drives a box reached over SSH (a real sshd on 127.0.0.1, profile generic-ssh):
up carries the platform's clocks and what bills after teardown, and the approved `down` tells
the agent that rgt cannot stop this meter (no API): the box stays up, waiting for the user's
console step and their typed word."""

from __future__ import annotations

import json

import pytest
from agentkit import approve_at_terminal
from boxkit import write_job

JOB = ("for i in 1 2 3; do echo step=$i loss=0.$i; sleep 0.2; done\n"
       "mkdir -p out && echo '{\"acc\": 0.9}' > out/metrics.json")


@pytest.mark.slow  # ~30 s here: every verb opens its own ssh master
def test_agent_over_ssh_up_run_watch_pull_and_the_human_down(agent, sshd_server, tmp_path):
    target = sshd_server.target
    up = agent("up", name="gpu", profile="generic-ssh",
               ssh=f"ssh -p {target.port} -i {target.identity} root@127.0.0.1",
               data_dir=str(tmp_path / "box-data"), durable_dir=str(tmp_path / "box-durable"),
               rate=1.5)
    assert up["ok"], up
    assert up["danger_clocks"] and up["still_billing_after_down"] is not None
    assert "answers: Linux" in up["box_text"]["text"]

    spec = write_job(tmp_path / "job", run=JOB, outputs=["out"])
    run_id = agent("run", box="gpu", spec=str(spec))["run_id"]
    watched = agent("watch", box="gpu", run_id=run_id, until_done=True, timeout_s=90)
    assert watched["result"]["run"]["status"] == "succeeded", watched
    assert "step=3" in agent("logs", box="gpu", tail=5)["box_text"]["text"]
    pulled = agent("pull", box="gpu", dest=str(tmp_path / "pulled"))
    assert pulled["ok"], pulled
    assert json.loads((tmp_path / "pulled" / "out" / "metrics.json").read_text()) == {"acc": 0.9}

    asked = agent("down", box="gpu")
    assert asked["would"]["rgt_stops_the_meter"] is False, "a box registered by hand"
    code = asked["ask_the_user_to_run"].removeprefix("rgt approve ")
    assert approve_at_terminal(agent.home, code, "gpu")[0] == 0
    done = agent("down", box="gpu", approval_code=code)
    assert done["down"] is False and "console" in done["waiting_for_the_user"], done
    assert "do this in the console" in done["box_text"]["text"]
    assert (tmp_path / "box-data").is_dir(), "rgt has no API here: it deletes nothing"
    boxes = json.loads(agent.raw("ls"))["result"]["boxes"]
    [gpu] = [b for b in boxes if b["name"] == "gpu"]
    assert gpu["state"] == "up" and gpu["waiting_for_you"], "up and billing until the console"
