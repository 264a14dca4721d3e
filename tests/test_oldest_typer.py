"""rgt under the oldest Typer pyproject.toml admits. Stock images carry an older Typer than the
one tests run with: on an H200 image's Typer 0.27 every verb died with AttributeError, because
rgt patched a hook Typer has only from 0.29. The floor is read from pyproject.toml, so raising
or lowering it moves this test with it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_verbs_run_under_the_declared_typer_floor(tmp_path):
    declared = (ROOT / "pyproject.toml").read_text()
    floor = re.search(r"\"typer>=([\d.]+)\"", declared).group(1)
    site = tmp_path / "site"
    got = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--target", str(site), f"typer=={floor}"],
                         capture_output=True, text=True, timeout=300)
    if got.returncode != 0:
        pytest.skip(f"pip could not fetch typer=={floor}: {got.stderr.strip()[-200:]}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")]),
           "RGT_HOME": str(tmp_path / "home"), "COLUMNS": "120"}

    def rgt(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rgt", *args], env=env,
                              capture_output=True, text=True, timeout=120)
    probe = subprocess.run([sys.executable, "-c", "import typer; print(typer.__version__)"],
                           env=env, capture_output=True, text=True)
    assert probe.stdout.strip().startswith(floor), probe.stdout + probe.stderr
    up = rgt("up", "here")
    assert up.returncode == 0 and "answers" in up.stdout, up.stdout + up.stderr
    assert "rgt 0." not in up.stdout  # an old Typer misreading --version called it every time
    assert "--yes" in rgt("down", "--help").stdout
    down = rgt("down", "here", "--yes")
    assert down.returncode == 0 and "is down" in " ".join(down.stdout.split()), down.stdout
