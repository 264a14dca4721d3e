"""The trainers people use, through the real CLI on the local box: Hugging Face Trainer and
PyTorch Lightning (real packages, tiny random-init models on the CPU, no downloads) run, stop
on SIGTERM, pull verified, list with their steps, show their metrics, and go down."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest
from boxkit import wait_for, write_job

pytestmark = pytest.mark.slow
FRAMEWORKS = Path(__file__).parent / "frameworks"


@pytest.fixture(scope="module", autouse=True)
def _frameworks_installed() -> None:
    # the test extra installs them; a missing one is a failure here, not a skip
    for name in ("transformers", "pytorch_lightning", "accelerate"):
        assert importlib.util.find_spec(name), f"{name} missing: pip install -e '.[test]'"


def start(cli, tmp_path: Path, script: str, box: str = "box", data: Path | None = None,
          **env: str) -> tuple[str, Path]:
    """Run SCRIPT as a job on BOX (data dir DATA); returns (run id, the run's dir on it)."""
    work = tmp_path / f"job-{len(list(tmp_path.glob('job-*')))}"
    work.mkdir()
    shutil.copy(FRAMEWORKS / script, work / script)
    spec = write_job(work, name=script.split("_")[0], run=f"{sys.executable} {script}",
                     outputs=["final"], checkpoint_dir="$RGT_CKPT_DIR",
                     env={"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **env})
    out = cli.ok("run", box, str(spec)).stdout
    run_id = out.strip().splitlines()[-1]
    return run_id, (data or cli.home / "boxes" / box / "scratch") / "rgt" / run_id


def home_of(run_dir: Path) -> Path:
    return Path(json.loads((run_dir / "run.json").read_text())["env"]["RGT_CKPT_DIR"])


def pull(cli, run_id: str, dest: Path, box: str = "box", *, checkpoints: str = "all"
         ) -> tuple[dict, str]:
    """Pull every checkpoint of the home (unless told), to look at the older ones too."""
    result = cli.ok("pull", box, run_id, "--dest", str(dest), "--checkpoints", checkpoints)
    return cli.verified(box, run_id), result.stdout + result.stderr


def steps(report: dict) -> dict[str, int]:
    return {c["path"]: c["step"] for c in report["checkpoints"] if c["ok"]}


def test_hf_trainer_runs_pulls_verified_lists_and_goes_down(cli, tmp_path):
    cli.ok("up", "box")
    run_id, _ = start(cli, tmp_path, "hf_train.py", STEPS="6")
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "240")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    # HF's tqdm bar gives step/total and rate; its dict lines (quoted values) the loss
    assert re.search(r"step 6/6 · train_loss \d", watched.stdout), watched.stdout

    newest, _ = pull(cli, run_id, tmp_path / "got", checkpoints="latest")  # the default
    assert newest["ok"] and steps(newest) == {"ckpt/checkpoint-6": 6}, newest
    assert newest["checkpoints_left"]["steps"] == [3, 3]
    assert not (tmp_path / "got" / "ckpt" / "checkpoint-3").exists()
    report, said = pull(cli, run_id, tmp_path / "got")
    assert report["ok"], report["problems"]
    assert steps(report) == {"ckpt/checkpoint-3": 3, "ckpt/checkpoint-6": 6}
    # rng_state.pth (numpy RNG state) loads weights-only; training_args.bin is said once
    rng = [f for f in report["files"] if f["path"].endswith("rng_state.pth")]
    assert len(rng) == 2 and all(f["checked"] == ["hash", "parse", "load"] for f in rng)
    assert any(n.startswith("3 files: hash-verified, not unpickled") for n in report["notes"])
    assert said.count("not unpickled") == 1 and "\x1b" not in said

    listed = cli.ok("ckpt", "ls", str(tmp_path / "got" / "ckpt")).stdout
    rows = {ln.split()[1]: ln for ln in listed.splitlines() if ln.startswith("│")}
    assert set(rows) == {"3", "6"} and all("hf-checkpoint" in r for r in rows.values())
    model = tmp_path / "got" / "ckpt" / "checkpoint-6" / "model.safetensors"
    with open(model, "r+b") as f:
        f.write(b"\xde\xad\xbe\xef" * 2)  # the header length, overwritten
    bad = cli("ckpt", "verify", str(model.parent))
    assert bad.returncode == 1 and "header length" in bad.stdout, bad.stdout
    cli.ok("down", "box", "--yes")


def test_hf_trainer_sigterm_with_and_without_rgts_callback(cli, tmp_path):
    cli.ok("up", "box")
    run_id, run_dir = start(cli, tmp_path, "hf_train.py", STEPS="60", SLEEP="0.5",
                            SAVE_ON_SIGNAL="1")
    home = home_of(run_dir)
    wait_for(lambda: (home / "checkpoint-3" / "trainer_state.json").exists(), timeout=120)
    live = cli.ok("watch", "box", run_id).stdout
    assert re.search(r"step \d+/60 · loss \d.* steps/s · ETA", live), live
    # a stop notice, as a platform delivers it: SIGTERM to the runner, which forwards it
    os.kill(json.loads((run_dir / "state.json").read_text())["runner_pid"], signal.SIGTERM)
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "120")
    assert "preempted" in watched.stdout and "exit 85" in watched.stdout, watched.stdout
    report, said = pull(cli, run_id, tmp_path / "a")
    saved = max(steps(report).values())
    assert report["ok"] and saved > 3, report  # the callback saved at the signal
    assert any("final: declared, but nothing in the box's manifest matches it" in w
               for w in report["warnings"]), report
    assert "warning:" in said

    # the same job again without the callback: it resumes, and SIGTERM kills it unsaved
    run_id, run_dir = start(cli, tmp_path, "hf_train.py", STEPS="60", SLEEP="0.5")
    after = saved + 3 - saved % 3  # HF's next save_steps boundary
    wait_for(lambda: (home / f"checkpoint-{after}" / "trainer_state.json").exists(),
             timeout=120)
    os.kill(json.loads((run_dir / "state.json").read_text())["runner_pid"], signal.SIGTERM)
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "120").stdout
    assert "stopped" in watched and "exit 143" in watched, watched
    assert f"stopped by SIGTERM, last checkpoint step {after} (checkpoint-{after})" in watched
    report, _ = pull(cli, run_id, tmp_path / "b")
    assert report["ok"] and steps(report)[f"ckpt/checkpoint-{after}"] == after, report
    cli.ok("down", "box", "--yes")


def test_lightning_runs_pulls_verified_lists_and_goes_down(cli, tmp_path):
    cli.ok("up", "box")
    run_id, _ = start(cli, tmp_path, "pl_train.py", STEPS="10")
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "240")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    # Lightning's CSVLogger file (its progress bar prints nothing useful off a terminal)
    assert re.search(r"step 9 · train_loss \d", watched.stdout), watched.stdout
    assert "epoch=0-step=3.ckpt" not in watched.stdout.split("metrics")[-1].split("\n")[0]

    report, _ = pull(cli, run_id, tmp_path / "got")
    assert report["ok"], report["problems"]
    assert steps(report) == {"ckpt/epoch=0-step=3.ckpt": 3, "ckpt/epoch=0-step=6.ckpt": 6,
                             "ckpt/epoch=1-step=9.ckpt": 9, "final/model.ckpt": 10}
    listed = cli.ok("ckpt", "ls", str(tmp_path / "got" / "ckpt")).stdout
    rows = {ln.split()[1]: ln for ln in listed.splitlines() if ln.startswith("│")}
    assert set(rows) == {"3", "6", "9"} and all("lightning" in r for r in rows.values())
    last = tmp_path / "got" / "ckpt" / "epoch=1-step=9.ckpt"
    os.truncate(last, last.stat().st_size // 2)
    bad = cli("ckpt", "verify", str(last))
    assert bad.returncode == 1 and "truncated" in bad.stdout, bad.stdout
    cli.ok("down", "box", "--yes")


def test_lightning_sigterm_is_a_stop_not_a_sync_failure(cli, tmp_path):
    cli.ok("up", "box")
    run_id, run_dir = start(cli, tmp_path, "pl_train.py", STEPS="400", SLEEP="0.3")
    home = home_of(run_dir)
    wait_for(lambda: (home / "epoch=0-step=6.ckpt").exists(), timeout=120)
    # SIGTERM to the job's process group, as a scheduler or `kill -- -PGID` sends it: the
    # runner did not deliver it, the job's shell saw it
    os.killpg(json.loads((run_dir / "state.json").read_text())["pgid"], signal.SIGTERM)
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "120").stdout
    assert "stopped" in watched and "sync-failed" not in watched and "AD4" not in watched
    assert re.search(r"stopped by SIGTERM, last checkpoint step \d+", watched), watched
    report, _ = pull(cli, run_id, tmp_path / "a")
    assert report["ok"] and steps(report)["ckpt/epoch=0-step=6.ckpt"] == 6, report

    # with Lightning's own hook the stop is saved
    run_id, run_dir = start(cli, tmp_path, "pl_train.py", STEPS="400", SLEEP="0.3",
                            SAVE_ON_SIGNAL="1")
    started = json.loads((run_dir / "state.json").read_text())["created"]
    wait_for(lambda: any(p.stat().st_mtime > started for p in home.iterdir()), timeout=120)
    os.killpg(json.loads((run_dir / "state.json").read_text())["pgid"], signal.SIGTERM)
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "120").stdout
    assert "stopped by SIGTERM, last checkpoint on_exception.ckpt" in watched, watched
    report, _ = pull(cli, run_id, tmp_path / "b")
    assert report["ok"] and steps(report)["ckpt/on_exception.ckpt"] > 0, report
    cli.ok("down", "box", "--yes")


def test_hf_trainer_sigterm_over_ssh(cli, sshd_server, tmp_path):
    target = sshd_server.target
    cli.ok("up", "gpu", "--profile", "generic-ssh", "--ssh",
           f"ssh -p {target.port} -i {target.identity} root@127.0.0.1",
           "--data-dir", str(tmp_path / "box-data"), "--durable-dir", str(tmp_path / "durable"))
    run_id, run_dir = start(cli, tmp_path, "hf_train.py", box="gpu", data=tmp_path / "box-data",
                            STEPS="60", SLEEP="0.5", SAVE_ON_SIGNAL="1")
    home = home_of(run_dir)
    wait_for(lambda: (home / "checkpoint-3" / "trainer_state.json").exists(), timeout=120)
    os.kill(json.loads((run_dir / "state.json").read_text())["runner_pid"], signal.SIGTERM)
    watched = cli("watch", "gpu", run_id, "--until-done", "--timeout", "120").stdout
    assert "preempted" in watched and "exit 85" in watched, watched
    report, _ = pull(cli, run_id, tmp_path / "got", box="gpu")
    assert report["ok"] and max(steps(report).values()) > 3, report
    down = cli("down", "gpu", input="gpu\n")
    assert down.returncode == 0, down.stdout + down.stderr
