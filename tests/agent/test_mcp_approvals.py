"""What an agent can send cannot complete a destructive step: a code for another box or
another action, a made-up code, a request edited after approval, an expired one — each is
refused and nothing is done. cancel and run --fresh wait for the human the same way."""

from __future__ import annotations

import json
import time

import pytest
from agentkit import approve_at_terminal
from boxkit import write_job

from rgt.agent import approvals, gates


@pytest.fixture(scope="module")
def boxes(agent):
    for name in ("c", "d"):
        assert agent("up", name=name)["ok"]
    return agent


def code_of(answer: dict) -> str:
    assert answer.get("approval_required"), answer
    return answer["ask_the_user_to_run"].removeprefix("rgt approve ")


def test_a_code_completes_only_its_own_action(boxes):
    agent = boxes
    code = code_of(agent("down", box="c"))
    assert approve_at_terminal(agent.home, code, "c")[0] == 0

    other_box = agent("down", box="d", approval_code=code)
    assert "given for down of box c, not for down of box d" in other_box["refused"]
    other_action = agent("down", box="c", discard_results=True, approval_code=code)
    assert "not for down --discard-results of box c" in other_action["refused"]
    for made_up, says in (("ABCD-EFGH", "no approval request"),
                          ("rm -rf ~; rgt approve", "not an approval code"),
                          ("../../granted/x", "not an approval code")):
        assert says in agent("down", box="d", approval_code=made_up)["refused"]
    for name, args in (("down", {"box": "--yes"}), ("cancel", {"box": "c", "run_id": "--yes"}),
                       ("logs", {"box": "-n"})):  # an argument read as an option
        assert "may not start with '-'" in agent(name, **args)["refused"]
    assert (agent.home / "boxes" / "c" / "scratch").is_dir()
    assert (agent.home / "boxes" / "d" / "scratch").is_dir()
    assert json.loads(agent.raw("ls"))["result"]["boxes"][0]["state"] == "up"


def test_a_request_edited_after_approval_is_not_approved(boxes):
    agent = boxes
    code = code_of(agent("down", box="d"))
    assert approve_at_terminal(agent.home, code, "d")[0] == 0
    # whoever can write RGT_HOME edits what the human saw (here: what the step destroys)
    request_file = agent.home / "approvals" / "requests" / f"{code}.json"
    request = json.loads(request_file.read_text())
    request["preview"]["destroys"] = []
    request_file.write_text(json.dumps(request))
    refused = agent("down", box="d", approval_code=code)
    assert "does not match its request" in refused["refused"]
    assert (agent.home / "boxes" / "d" / "scratch").is_dir()


def test_an_expired_request_is_neither_approved_nor_used(boxes, monkeypatch):
    agent = boxes
    monkeypatch.setenv("RGT_HOME", str(agent.home))
    asked_at = time.time() - approvals.TTL_S - 5
    stale = approvals.ask(gates.down_action("d", False), {"box": "d"}, now=asked_at)
    rc, shown = approve_at_terminal(agent.home, stale.code, None)
    assert rc == 2 and "expired" in shown and "nothing was approved" in shown
    # approved in time (what `rgt approve` records), used too late
    late = approvals.ask(gates.down_action("d", False), {"box": "d"}, now=asked_at)
    approvals.grant(late, now=asked_at + 1)
    refused = agent("down", box="d", approval_code=late.code)
    assert "expired" in refused["refused"]
    assert (agent.home / "boxes" / "d" / "scratch").is_dir()


def test_cancel_and_fresh_wait_for_the_human(boxes, tmp_path):
    agent = boxes
    spec = write_job(tmp_path / "job", run="echo started; sleep 60")
    run_id = agent("run", box="d", spec=str(spec))["run_id"]

    asked = agent("cancel", box="d", run_id=run_id[:6])
    code = code_of(asked)
    assert asked["would"]["run"] == run_id, "pinned to the full id, not a prefix"
    assert "keeps billing" in asked["would"]["still_billing_after"]
    assert agent("watch", box="d", run_id=run_id)["result"]["run"]["status"] == "running"
    assert approve_at_terminal(agent.home, code, "d")[0] == 0
    cancelled = agent("cancel", box="d", run_id=run_id, approval_code=code)
    assert cancelled["ok"], cancelled
    assert agent("watch", box="d", run_id=run_id)["result"]["run"]["status"] == "cancelled"

    fresh = agent("run", box="d", spec=str(spec), fresh=True)
    code = code_of(fresh)
    assert "moved aside" in fresh["would"]["what_happens"]
    assert approve_at_terminal(agent.home, code, "d")[0] == 0
    spec.write_text(spec.read_text().replace("sleep 60", "sleep 1"))  # not what was approved
    changed = agent("run", box="d", spec=str(spec), fresh=True, approval_code=code)
    assert "given for run --fresh" in changed["refused"]
    assert len(json.loads(agent.raw("runs", box="d"))["result"]["runs"]) == 1
