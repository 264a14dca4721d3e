"""`python train.py` runs with the interpreter `rgt up` found, over the real sshd, on boxes as
images ship them: a stock box with only `python3`, and a box whose PATH has a `python` that is
not the one rgt found (a different Python, or no Python at all) ahead of it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from boxkit import write_job
from stockbox import SYSTEM_PYTHON

TRAIN = ("import os, sys\n"
         "print('train python', os.path.realpath(sys.executable), flush=True)\n"
         "os.makedirs('out', exist_ok=True)\n"
         "open('out/metrics.json', 'w').write('{\"acc\": 1}')\n")
VERSION = subprocess.run([SYSTEM_PYTHON, "-c", "import platform; print(platform.python_version())"],
                         capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def shared_dir():
    """A directory every box user can read (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="rgt-test-decoy-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def up(cli, box, name):
    cli.ok("up", name, "--profile", "generic-ssh", "--ssh", box.ssh,
           "--data-dir", str(box.user.dir(f"{name}-data")),
           "--durable-dir", str(box.user.dir(f"{name}-durable")))


def run_to_end(cli, box_name: str, spec: Path) -> str:
    run_id = cli.ok("run", box_name, str(spec)).stdout.strip().splitlines()[-1]
    watched = cli("watch", box_name, run_id, "--until-done", "--timeout", "90")
    log = cli.ok("logs", box_name, run_id).stdout
    assert watched.returncode == 0, watched.stdout + watched.stderr + log
    return log


def test_python_train_py_runs_on_a_stock_box_with_only_python3(cli, stock_box, tmp_path):
    box = stock_box("rgt-py3only", without=("python", "python2*"))
    up(cli, box, "stock")
    work = tmp_path / "job"
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    spec = write_job(work, run="python train.py", outputs=["out"])

    audit = cli("audit", "stock", "--job", str(spec))  # the job's `python` is python3 here
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert re.search(rf"job python: python3 {re.escape(VERSION)}", audit.stdout), audit.stdout

    log = run_to_end(cli, "stock", spec)
    assert f"train python {os.path.realpath(SYSTEM_PYTHON)}" in log, log
    pulled = cli("pull", "stock", "--dest", str(tmp_path / "results"))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert (tmp_path / "results" / "out" / "metrics.json").read_text() == '{"acc": 1}'


def test_a_decoy_python_earlier_on_the_path_is_not_what_the_job_runs(
        cli, stock_box, tmp_path, shared_dir):
    decoy = shared_dir / "python"
    decoy.write_text("#!/bin/sh\necho 'decoy python: not the interpreter rgt found'\nexit 97\n")
    decoy.chmod(0o755)
    box = stock_box("rgt-decoy", without=("python", "python2*"), extra={"python": str(decoy)})
    up(cli, box, "decoy")
    work = tmp_path / "job"
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    # as a user writes them: `python`, `python3`, and pip for the same interpreter
    spec = write_job(work, run="python train.py\npython3 -c 'print(\"python3 ok\")'\n"
                                "python -m pip --version", outputs=["out"])
    log = run_to_end(cli, "decoy", spec)
    assert "decoy python" not in log, log
    assert f"train python {os.path.realpath(SYSTEM_PYTHON)}" in log and "python3 ok" in log
    # and the box's own `python` is still the decoy: rgt changed only the job's PATH
    own = subprocess.run(["ssh", *box.ssh.split()[1:], "-o", "BatchMode=yes",
                          "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                          "python"], capture_output=True, text=True, timeout=60)
    assert own.returncode == 97 and "decoy python" in own.stdout, own.stdout + own.stderr
