"""`rgt run` ships rgt.ckpt with the code: a job whose Python has no rgt still imports it.

The job runs tests/shipped_ckpt_job.py (save, load, verify with rgt.ckpt) from a workdir that
holds no rgt, under an interpreter that cannot see the laptop's install: `python -S` (no
site-packages, where the editable install lives) and, where one exists, Python 3.8.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from boxkit import write_job
from oldpython import NO_PY38, PY38

import rgt
from rgt.platforms.slurm.platform import SlurmPlatform
from rgt.spec import JobSpec
from rgt.store import Box

JOB = Path(__file__).parents[1] / "shipped_ckpt_job.py"


def run_shipped_ckpt_job(cli, tmp_path: Path, python: str) -> tuple[dict, Path]:
    cli.ok("up", "box")
    scratch = cli.home / "boxes" / "box" / "scratch"
    workdir = tmp_path / "job"
    workdir.mkdir()
    shutil.copy(JOB, workdir / "train.py")
    spec = write_job(workdir, run=f'{python} -S train.py "$RGT_CKPT_DIR"',
                     env={"PYTHONPATH": "/opt/image-libs"})
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "90")
    run_dir = scratch / "rgt" / run_id
    log = (run_dir / "log").read_text()
    assert watched.returncode == 0, f"{watched.stdout}{watched.stderr}\n{log}"
    reports = [line for line in log.splitlines() if line.startswith("{")]
    assert reports, log
    return json.loads(reports[-1]), run_dir


def assert_used_the_shipped_copy(report: dict, run_dir: Path) -> None:
    lib = run_dir / "lib"
    assert report["ckpt_file"] == str(lib / "rgt" / "ckpt" / "__init__.py")
    assert report["rgt_file"] == str(lib / "rgt" / "__init__.py")
    # the image's (here the spec's) PYTHONPATH is kept, after the shipped copy
    assert report["pythonpath"] == f"{lib}:/opt/image-libs"
    assert report["loaded_step"] == 4 and report["loaded_state"] == {"step": 4, "w": [0.25]}
    assert report["verified"] == [True, True] and not report["torch_imported"]


def test_a_job_without_rgt_imports_the_copy_shipped_with_the_code(cli, tmp_path):
    # `python -S` cannot see site-packages, so the laptop's rgt is out of its reach
    cant = subprocess.run([sys.executable, "-S", "-c", "import rgt.ckpt"], capture_output=True,
                          cwd=tmp_path)
    assert cant.returncode != 0, "this interpreter sees rgt without PYTHONPATH"
    report, run_dir = run_shipped_ckpt_job(cli, tmp_path, sys.executable)
    assert_used_the_shipped_copy(report, run_dir)
    assert report["version"] == rgt.__version__


@pytest.mark.may_skip
@pytest.mark.skipif(PY38 is None, reason=NO_PY38)
def test_a_python38_job_checkpoints_with_the_shipped_copy(cli, tmp_path):
    report, run_dir = run_shipped_ckpt_job(cli, tmp_path, PY38)
    assert report["python"] == [3, 8]
    assert_used_the_shipped_copy(report, run_dir)


def test_a_slurm_job_gets_the_shipped_copy_first_on_pythonpath():
    """sbatch replaces the runner there; its script puts RUN_DIR/lib first and keeps what the
    node set (a `module load` exports its own PYTHONPATH)."""
    box = Box(name="hpc", profile="slurm", connection={"host": "login"}, data_dir="/d",
              durable_dir="/scratch/u", rate=None, state="up", created=time.time())
    script = SlurmPlatform().render(box, JobSpec(name="mlp", run="python train.py"), "r9")
    line = next(x for x in script.splitlines() if x.startswith("export PYTHONPATH="))
    show = line + '; printf %s "$PYTHONPATH"'
    kept = subprocess.run(["bash", "-c", show], env={"PYTHONPATH": "/node/mods"},
                          capture_output=True, text=True)
    alone = subprocess.run(["bash", "-c", show], env={}, capture_output=True, text=True)
    assert (kept.stdout, alone.stdout) == ("/d/rgt/r9/lib:/node/mods", "/d/rgt/r9/lib")
