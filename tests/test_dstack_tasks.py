"""dstack task files (`type: task`) run with the meaning dstack gives them, or are refused by
name (issue 32): each used to be "field `run` is required", which never said that dstack's
files are not understood."""

from __future__ import annotations

from pathlib import Path

import pytest
from boxkit import Rgt

from rgt.errors import UserError
from rgt.spec import load_spec

DATA = Path(__file__).parent / "data" / "dstack"


def write(directory: Path, text: str, name: str = "task.dstack.yml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def test_a_dstack_task_maps_to_rgts_vocabulary(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    spec = load_spec(DATA / "train.dstack.yml")
    r = spec.resources
    assert (spec.name, spec.dialect, spec.workdir) == ("trl-train", "dstack", DATA.resolve())
    assert spec.run == ("pip install -r requirements.txt && "
                        "python train.py --model $MODEL ")  # ${{ run.args }}: none given
    assert spec.env == {"MODEL": "Qwen/Qwen2.5-0.5B"} and spec.secrets == ["HF_TOKEN"]
    assert (r.gpu, r.gpu_alternatives, r.cpus, r.mem, r.disk, r.nodes, r.time, r.spot) == (
        "H100:2", ["H100:2", "A100:2"], 16, "64G", "200G", 2, "2h", False)
    # train.py sits where dstack puts it (the working dir); conf/ is copied to its place
    assert spec.setup.startswith("mkdir -p ./settings && cp -a conf/. ./settings/")
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(UserError, match="env HF_TOKEN has no value in the file and is not set"):
        load_spec(DATA / "train.dstack.yml")


@pytest.mark.parametrize("gpu,first,alternatives", [
    ("24GB", "A10G:1", 15), ("80GB:8", "H100:8", 4), ("amd:192GB:2", "MI300X:2", 2),
    ("V100", "V100:1", 0), ("H100,A100:2..8", "H100:2", 2),
])
def test_dstack_gpus_by_model_or_by_memory(tmp_path, gpu, first, alternatives, capfd):
    """A GPU asked for by memory was refused ('field `run` is required' before that): it is
    any model rgt knows with that much memory, smallest first (V100 once read as a TPU)."""
    r = load_spec(write(tmp_path, f"type: task\ncommands: [x]\nresources: {{gpu: '{gpu}'}}\n")
                  ).resources
    assert (r.gpu, len(r.gpu_alternatives)) == (first, alternatives)
    if "GB" in gpu:
        assert f"resources.gpu {gpu}: any of {first.split(':')[0]}" in capfd.readouterr().err


def test_a_dstack_task_runs_on_a_local_box_as_dstack_runs_it(tmp_path, monkeypatch):
    """Commands stop at the first failure (dstack joins them with &&), a background command
    keeps going, DSTACK_* are set, a shell variable arrives as a secret."""
    monkeypatch.setenv("RGT_TEST_TOKEN", "tok")
    ok = write(tmp_path / "ok", (
        "type: task\nname: ok\nenv: [RGT_TEST_TOKEN, GREETING=hi]\ncommands:\n"
        "  - sleep 0.1 &\n"
        "  - echo \"$GREETING rank=$DSTACK_NODE_RANK of $DSTACK_NODES_NUM"
        " gpus=$DSTACK_GPUS_NUM token=$RGT_TEST_TOKEN\"\n"))
    failing = write(tmp_path / "bad", "type: task\nname: bad\ncommands: [\"false\", "
                                      "\"echo should-not-run\"]\n")
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(ok), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert "hi rank=0 of 1 gpus=0 token=tok" in cli.ok("logs", "box", run_id).stdout
    run_id = cli.ok("run", "box", str(failing), "-d").stdout.strip().splitlines()[-1]
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert watched.returncode != 0 and "succeeded" not in watched.stdout
    assert "should-not-run" not in cli("logs", "box", run_id).stdout


@pytest.mark.parametrize("text,says", [
    ("type: service\nport: 8000\ncommands: [x]\n", "is a dstack service: services are not run "
                                                   "by rgt"),
    ("type: dev-environment\nide: vscode\n", "is a dstack dev environment"),
    ("type: fleet\nnodes: 2\n", "is a dstack fleet: rgt has no fleets"),
    ("type: task\ncommands: [x]\nresources: {gpu: v5litepod-8}\n", "is a TPU"),
    ("type: task\ncommands: [x]\nworking_dir: /w\n", "dstack field `working_dir` has no rgt"),
    ("type: task\ncommands: [x]\nrepos: [https://github.com/a/b]\n", "`git clone` it"),
    ("type: task\ncommands: ['echo ${{ secrets.TOKEN }}']\n", "filled in by dstack"),
    ("type: task\ncommands: [x]\nfiles: ['/etc/hostname:/root/h']\n",
     "is outside the folder rgt pushes"),
    ("type: task\nname: t\n", "has no `commands`"),
])
def test_what_rgt_cannot_carry_is_named(tmp_path, text, says):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert says in str(err.value) and str(path) in str(err.value), str(err.value)
