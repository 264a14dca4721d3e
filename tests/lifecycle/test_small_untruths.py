"""Smaller untruths (issue 29 item 5), each held by a test that failed before its fix."""

from __future__ import annotations

import ast
import base64
import io
import json
import os
import tarfile
from pathlib import Path

from rgt.lifecycle import save_hints

PLAIN = "import torch\ntorch.save(m.state_dict(), 'x.pt')\n"
HANDLED = "import torch, rgt.ckpt\nwith rgt.ckpt.PreemptionFlag() as p:\n    torch.save(m, 'x')\n"


def names(workdir: Path, run: str) -> set[str]:
    return {h.split(":")[0] for h in save_hints.hints(workdir, commands=[run])}


def test_save_hints_read_only_what_the_command_runs(tmp_path):
    """`torch.save without a SIGTERM handler` was said of every .py in the workdir, such as
    an old script the command never starts."""
    (tmp_path / "train.py").write_text("import torch\nfrom lib.loop import fit\nfit()\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "loop.py").write_text("from .saving import keep\n" + HANDLED)
    (tmp_path / "lib" / "saving.py").write_text(PLAIN)  # imported by what runs: it counts
    (tmp_path / "old_train.py").write_text(PLAIN)  # never run
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "export.py").write_text(PLAIN)  # never run
    assert names(tmp_path, 'python train.py --ckpt-dir "$RGT_CKPT_DIR"') == {"lib/saving.py"}
    assert names(tmp_path, "python old_train.py") == {"old_train.py"}
    assert names(tmp_path, "torchrun --nproc-per-node=2 tools/export.py --x 1") == \
        {"tools/export.py"}
    assert names(tmp_path, "python -m lib.saving") == {"lib/saving.py"}
    (tmp_path / "go.sh").write_text("set -e\npython tools/export.py\n")
    assert names(tmp_path, "bash go.sh") == {"tools/export.py"}
    assert names(tmp_path, "make train") == set()  # it cannot tell what runs: says nothing
    assert names(tmp_path, "python ../elsewhere.py") == set()


def test_smoke_notes_only_the_trainer_the_run_starts(cli, tmp_path):
    (tmp_path / "train.py").write_text(HANDLED)
    (tmp_path / "old_train.py").write_text(PLAIN)
    for run, said in (("python train.py", False), ("python old_train.py", True)):
        (tmp_path / "job.yaml").write_text(f"name: j\nworkdir: .\nrun: {run}\nsmoke: 'true'\n")
        done = cli.ok("smoke", str(tmp_path / "job.yaml"))
        assert ("old_train.py: torch.save without a SIGTERM handler" in done.stdout) is said, \
            done.stdout


def test_up_with_ssh_and_no_profile_takes_the_ssh_box(cli, sshd_server, tmp_path):
    """It said "the local profile runs on this machine; drop --ssh/--host"."""
    target = sshd_server.target
    ssh = f"ssh -p {target.port} -i {target.identity} root@127.0.0.1"
    up = cli("up", "far", "--ssh", ssh, "--data-dir", str(tmp_path / "data"))
    assert up.returncode == 0, up.stderr
    assert "box far (generic-ssh) answers" in up.stdout and "no --profile" in up.stdout
    listed = {b["name"]: b for b in json.loads(cli.ok("ls", "--json").stdout)["boxes"]}
    assert listed["far"]["profile"] == "generic-ssh"
    here = cli.ok("up", "here")  # no connection: this machine, as before
    assert "box here (local) answers" in here.stdout and "no --profile" not in here.stdout


def bundled(notebook: Path) -> set[str]:
    """The names in the code bundle a rendered notebook carries (its RGT_CONFIG cell)."""
    cells = json.loads(notebook.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells if "RGT_CONFIG = " in "".join(c["source"]))
    config = ast.literal_eval(source.split("RGT_CONFIG = ", 1)[1])
    blob = base64.b64decode(config["source"]["data"])
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        return set(tar.getnames())


def test_a_rendered_notebook_carries_what_a_push_carries(cli, tmp_path):
    """`rgt render --profile colab` refused a small workdir over the rgt-results/ a pull had
    left in it, which every push leaves out; .rgtignore was not read either."""
    work = tmp_path / "job"
    (work / "rgt-results" / "box" / "run-1" / "ckpt").mkdir(parents=True)
    (work / "rgt-results" / "box" / "run-1" / "ckpt" / "w.pt").write_bytes(os.urandom(5 << 20))
    (work / "data").mkdir()
    (work / "data" / "shard.bin").write_bytes(os.urandom(5 << 20))
    (work / ".rgtignore").write_text("# big\ndata/\n")
    (work / "train.py").write_text("print('hi')\n")
    (work / "job.yaml").write_text("name: j\nworkdir: .\nrun: python train.py\n")
    out = tmp_path / "train.ipynb"
    cli.ok("render", str(work / "job.yaml"), "--profile", "colab", "-o", str(out))
    assert bundled(out) == {".rgtignore", "job.yaml", "train.py"}


def test_a_fast_finish_is_suspicious_only_when_the_loop_did_not_run():
    """On an H200 the bundled example's 400 steps end in 14 s and were called "suspiciously
    fast for training": a log of 400 steps is no empty dataset or skipped loop."""
    from rgt.lifecycle.watch import warnings

    def said(**summary) -> bool:
        base = {"status": "succeeded", "duration": 14.0, "disks": {}, "training": {}}
        return any("suspiciously fast" in n for n in warnings({**base, **summary}))
    assert said()  # no step seen: as suspicious as ever
    assert said(training={"step": 3})  # a loop that stopped at once
    assert not said(training={"step": 400})
    assert not said(training={"step": 3}, resumed=True)
    assert not said(training={}, duration=600.0)
