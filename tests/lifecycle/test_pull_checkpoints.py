"""Of the job's checkpoint home, `rgt pull` brings the newest checkpoint that verifies (and the
home's other files); older ones on request (`--checkpoints all|N`), named when left behind, and
listed by `rgt down` among what it destroys. A real run on the local box writes them."""

from __future__ import annotations

import json
import os

import pytest
from boxkit import write_job

pytest.importorskip("torch")

SAVES = """\
import os, torch
home = os.environ["RGT_CKPT_DIR"]
for step in (1, 2, 3, 4):
    torch.save({"global_step": step, "state_dict": {"w": torch.ones(4096) * step}},
               f"{home}/epoch=0-step={step}.ckpt")
os.makedirs(f"{home}/tokenizer", exist_ok=True)
open(f"{home}/tokenizer/vocab.txt", "w").write("a b c")
last = f"{home}/epoch=0-step=4.ckpt"
os.truncate(last, os.path.getsize(last) // 2)  # killed while saving: damaged on the box
os.makedirs("out", exist_ok=True)
open("out/metrics.json", "w").write('{"acc": 1}')
"""


def finished_run(cli, tmp_path) -> str:
    work = tmp_path / "job"
    work.mkdir()
    (work / "train.py").write_text(SAVES)
    spec = write_job(work, run="python train.py", outputs=["out"],
                     checkpoint_dir="$RGT_CKPT_DIR")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "120")
    return run_id


def pull(cli, run_id, dest, *args) -> dict:
    return json.loads(cli.ok("pull", "box", run_id, "--dest", str(dest), "--json",
                             *args).stdout)["pull"]


def names(directory) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                  if p.is_file())


def test_the_newest_that_verifies_by_default_older_ones_on_request(cli, tmp_path):
    run_id = finished_run(cli, tmp_path)
    latest = pull(cli, run_id, tmp_path / "latest")
    assert latest["ok"], latest["problems"]
    # step 4 came first and did not load (cut short on the box), so step 3 came too
    assert names(tmp_path / "latest" / "ckpt") == [
        "epoch=0-step=3.ckpt", "epoch=0-step=4.ckpt", "tokenizer/vocab.txt"]
    assert [(c["step"], c["ok"]) for c in latest["checkpoints"]] == [(3, True), (4, False)]
    assert any("epoch=0-step=4.ckpt: damaged on the box too" in w for w in latest["warnings"])
    assert latest["checkpoints_left"]["count"] == 2
    assert latest["checkpoints_left"]["steps"] == [1, 2]
    assert any("left 2 older checkpoint(s) on the box" in n and "--checkpoints all" in n
               for n in latest["notes"])
    assert (tmp_path / "latest" / "out" / "metrics.json").is_file()

    two = pull(cli, run_id, tmp_path / "two", "--checkpoints", "2")  # the newest two
    assert [c["step"] for c in two["checkpoints"]] == [3, 4]
    assert two["checkpoints_left"]["steps"] == [1, 2]

    everything = pull(cli, run_id, tmp_path / "all", "--checkpoints", "all")
    assert everything["ok"] and everything["checkpoints_left"] is None
    assert [c["step"] for c in everything["checkpoints"]] == [1, 2, 3, 4]
    assert not any("older checkpoint" in n for n in everything["notes"])


def test_down_names_the_checkpoints_a_pull_left_and_still_goes(cli, tmp_path):
    run_id = finished_run(cli, tmp_path)
    pulled = cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "r"))
    assert "left 2 older checkpoint(s) on the box" in pulled.stdout
    down = cli("down", "box", input="box\n", env={"COLUMNS": "200"})
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"destroys 2 older checkpoint(s) of {run_id}" in down.stdout
    assert f"rgt pull box {run_id} --checkpoints all" in down.stdout


def test_a_bad_checkpoints_value_is_one_line_and_exit_2(cli):
    cli.ok("up", "box")
    for value in ("0", "-1", "x", "newest"):
        result = cli("pull", "box", "--checkpoints", value)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, (value, result.stderr)
        assert "--checkpoints" in lines[0] and "latest" in lines[0], lines[0]


def test_units_are_grouped_by_name_and_left_out_by_the_real_engine(tmp_path):
    from rgt.lifecycle.pull_checkpoints import CheckpointPlan, checkpoint_unit
    from rgt.lifecycle.untrusted import read_manifest
    from rgt.onbox import manifest
    from rgt.transport import LocalTransport

    home = tmp_path / "home"
    files = {"checkpoint-100/trainer_state.json": "{}", "checkpoint-100/model.safetensors": "",
             "checkpoint-300/trainer_state.json": "{}", "checkpoint-300/global_step300/x": "",
             "ckpt-0000000200.pt": "", "ckpt-0000000200.json": "{}",
             "odd [step=150]*.pt": "", "last.ckpt": "", "config.json": "{}"}
    # when each was written (the newest file of a unit counts): a resumed attempt saved
    # checkpoint-100 last; checkpoint-300 and the odd one were written in the same second
    written = {"checkpoint-100/trainer_state.json": 1_000, "checkpoint-100/model.safetensors":
               4_000, "checkpoint-300/trainer_state.json": 2_000,
               "checkpoint-300/global_step300/x": 2_000, "ckpt-0000000200.pt": 3_000,
               "ckpt-0000000200.json": 1_500, "odd [step=150]*.pt": 2_000}
    for rel, text in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
        os.utime(home / rel, (written.get(rel, 5_000),) * 2)
    assert checkpoint_unit("checkpoint-300/global_step300/x") == ("checkpoint-300", 300, True)
    assert checkpoint_unit("ckpt-0000000200.json") == ("ckpt-0000000200", 200, False)
    assert checkpoint_unit("step_620/model.safetensors") == ("step_620", 620, True)
    assert checkpoint_unit("last.ckpt") is None and checkpoint_unit("config.json") is None
    manifest.write(str(home), str(tmp_path / "m.jsonl"), ["."])
    plan = CheckpointPlan.of(read_manifest(tmp_path / "m.jsonl", "ckpt/"), 2)
    # the last written first; the step number only breaks the tie of equal times
    assert plan.newest_first == ["checkpoint-100", "ckpt-0000000200", "checkpoint-300",
                                 "odd [step=150]*.pt"]
    assert plan.kept == ["checkpoint-100", "ckpt-0000000200"]
    assert plan.left == ["checkpoint-300", "odd [step=150]*.pt"]
    assert plan.summary()["names"] == plan.left
    LocalTransport().get(str(home), tmp_path / "got", exclude=plan.excludes())
    assert names(tmp_path / "got") == sorted(
        ["checkpoint-100/trainer_state.json", "checkpoint-100/model.safetensors",
         "ckpt-0000000200.pt", "ckpt-0000000200.json", "last.ckpt", "config.json"])
    # a transport that lists every file flat (the Kubernetes door) leaves them out too
    from rgt.onbox.xfer import compile_excludes, excluded
    rules = compile_excludes(plan.excludes())
    assert excluded(rules, "checkpoint-300/trainer_state.json", False)
    assert not excluded(rules, "checkpoint-100/model.safetensors", False)
