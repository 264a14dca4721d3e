"""`rgt run BOX job.yaml --dry-run` on a box whose job runs under rgt's on-box runner (local,
SSH boxes, rented instances) prints what the runner would be given — command, setup,
directories, the names of the environment and the secrets (never a value), the files the push
would send with their sizes — exits 0, and leaves the box untouched."""

from __future__ import annotations

import json

from boxkit import write_job


def _tree(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_dry_run_shows_what_the_runner_would_be_given(cli, tmp_path):
    cli.ok("up", "box")
    work = tmp_path / "job"
    (work / "data").mkdir(parents=True)
    (work / "train.py").write_text("print('step=1 loss=0.5')\n")
    (work / "data" / "big.bin").write_bytes(b"\0" * 2_500_000)
    (work / "notes.log").write_text("left out by .rgtignore\n")
    (work / ".rgtignore").write_text("*.log\n")
    (work / ".git").mkdir()
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / "rgt-results" / "box" / "old").mkdir(parents=True)
    (work / "rgt-results" / "box" / "old" / "model.pt").write_bytes(b"\0" * 999)
    spec = write_job(work, setup="pip install -r requirements.txt",
                     run="python3 train.py --lr 0.1", env={"WANDB_PROJECT": "plain-value"},
                     secrets=["HF_TOKEN", "WANDB_API_KEY"], outputs=["out/"])
    box_dir = cli.home / "boxes" / "box"
    before = _tree(box_dir)

    shown = cli("run", "box", str(spec), "--dry-run", env={"HF_TOKEN": "hf_secret_value"})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    text = shown.stdout
    assert "command     python3 train.py --lr 0.1" in text, text
    assert "setup       pip install -r requirements.txt" in text
    assert "WANDB_PROJECT" in text and "RGT_CKPT_DIR" in text and "plain-value" not in text
    assert "HF_TOKEN  (set here" in text and "hf_secret_value" not in text
    assert "WANDB_API_KEY  (NOT set here" in text
    assert f"{box_dir}/scratch/rgt/job-" in text and f"{box_dir}/durable/rgt/jobs/job/ckpt" in text
    files = {line.split()[-1]: " ".join(line.split()[:2]) for line in text.splitlines()
             if line.startswith("  ") and not line.startswith("  …")}
    assert files == {"data/big.bin": "2.5 MB", "train.py": "25 B",
                     ".rgtignore": "6 B", "job.yaml": files["job.yaml"]}, text
    assert "files       4, 2.5 MB" in text
    assert "notes.log" not in text and "model.pt" not in text and ".git/HEAD" not in text

    assert _tree(box_dir) == before, "a dry run touches nothing on the box"
    assert json.loads(cli.ok("runs", "box", "--json").stdout)["runs"] == []


def test_dry_run_refuses_what_run_refuses(cli, tmp_path):
    cli.ok("up", "box")
    grid = write_job(tmp_path / "grid", run="echo {lr}", grid={"lr": [0.1, 0.2]})
    refused = cli("run", "box", str(grid), "--dry-run")
    assert refused.returncode == 2 and "needs a scheduler" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and refused.stdout == ""

    plain = write_job(tmp_path / "plain", run="echo hi")
    render = cli("render", str(plain), "--profile", "local")
    assert render.returncode == 2 and "--dry-run" in render.stderr, render.stderr
    assert len(render.stderr.strip().splitlines()) == 1
