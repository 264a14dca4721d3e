"""An agent drives the whole lifecycle on the local box through a real MCP session, and the
teardown stays the human's: `down` answers with an approval command and goes through only
after `rgt approve` was answered at a terminal (issue 36)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from agentkit import approve_at_terminal
from boxkit import write_job

SUCCEED = (
    "for i in 1 2 3; do echo step=$i loss=0.$i; sleep 0.1; done\n"
    "mkdir -p out && echo '{\"acc\": 0.9}' > out/metrics.json && echo weights > out/w.bin"
)


def test_tools_are_the_verbs_and_the_human_steps_are_marked(agent):
    tools = {t.name: t for t in agent.tools()}
    assert {"profiles", "profile", "offers", "ls", "up", "audit", "smoke", "run", "watch",
            "logs", "runs", "top", "pull", "ckpt_ls", "ckpt_verify", "gotcha_search",
            "doctor_log", "render", "down", "cancel"} <= set(tools)
    assert tools["down"].annotations.destructive_hint is True
    assert tools["cancel"].annotations.destructive_hint is True
    assert tools["watch"].annotations.read_only_hint is True
    # there is no argument by which an agent could confirm: only the human's code
    assert "yes" not in tools["down"].input_schema["properties"]


def test_agent_runs_and_pulls_and_down_waits_for_the_human(agent, tmp_path):
    up = agent("up", name="box")
    assert up["ok"], up
    assert up["danger_clocks"] and "scratch" in up["danger_clocks"][0]
    scratch = agent.home / "boxes" / "box" / "scratch"
    assert scratch.is_dir()

    spec = write_job(tmp_path / "job", run=SUCCEED, outputs=["out"])
    started = agent("run", box="box", spec=str(spec))
    assert started["ok"], started
    run_id = started["run_id"]
    assert started["danger_clocks"], "run carries the platform's clocks to the agent"

    watched = agent("watch", box="box", run_id=run_id, until_done=True, timeout_s=60)
    assert watched["ok"] and watched["result"]["run"]["status"] == "succeeded", watched

    early = agent("down", box="box")  # before the pull: the Iron Law, no code offered
    assert not early["ok"] and "Iron Law" in early["refused"], early
    assert run_id in json.dumps(early["would"]["unpulled"]) and scratch.is_dir()

    pulled = agent("pull", box="box", run_id=run_id, dest=str(tmp_path / "results"))
    assert pulled["ok"] and pulled["result"]["pull"]["ok"], pulled
    assert (tmp_path / "results" / "out" / "w.bin").read_text() == "weights\n"

    asked = agent("down", box="box")
    assert asked["approval_required"] and not asked["ok"], asked
    assert asked["would"]["destroys"] == [str(scratch)] and asked["would"]["unpulled"] == []
    command = asked["ask_the_user_to_run"]
    code = command.removeprefix("rgt approve ")
    assert scratch.is_dir(), "asking destroys nothing"

    too_soon = agent("down", box="box", approval_code=code)
    assert "not given yet" in too_soon["refused"] and scratch.is_dir()

    # an agent's shell is no terminal: `rgt approve` there approves nothing
    piped = subprocess.run([sys.executable, "-m", "rgt", "approve", code], input="box\n",
                           capture_output=True, text=True, env=with_home(agent.home))
    assert piped.returncode == 2 and "not one" in piped.stderr, piped.stderr
    wrong_name, shown = approve_at_terminal(agent.home, code, "bxo")
    assert wrong_name == 1 and "nothing was approved" in shown
    assert "not given yet" in agent("down", box="box", approval_code=code)["refused"]

    rc, shown = approve_at_terminal(agent.home, code, "box")
    assert rc == 0, shown
    assert "down of box box" in shown and str(scratch) in shown, "the human sees what dies"
    done = agent("down", box="box", approval_code=code)
    assert done["ok"] and done["approved"], done
    assert not scratch.exists()
    assert (agent.home / "boxes" / "box" / "durable" / "rgt" / run_id).is_dir()

    again = agent("down", box="box", approval_code=code)
    assert "already used" in again["refused"], again
    files = sorted(p for p in (agent.home / "approvals").rglob("*") if p.is_file())
    assert files and all(p.stat().st_mode & 0o777 == 0o600 for p in files)
    assert (agent.home / "approvals").stat().st_mode & 0o777 == 0o700




def test_without_the_sdk_rgt_mcp_says_how_to_get_it(tmp_path):
    hidden = ("import sys; sys.modules['mcp'] = None; sys.argv = ['rgt', 'mcp']; "
              "from rgt.__main__ import main; main()")
    done = subprocess.run([sys.executable, "-c", hidden], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60,
                          env=with_home(tmp_path))
    assert done.returncode == 2 and "pip install 'mcp>=2.3,<3'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def with_home(home) -> dict:
    return {**os.environ, "RGT_HOME": str(home)}
