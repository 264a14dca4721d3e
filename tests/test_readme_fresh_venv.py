"""The README's first command, exactly as a newcomer types it, in a fresh virtual environment
without system site-packages: only what pyproject.toml declares can be there, and the demo's
job runs without torch's "Failed to initialize NumPy" warning."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_demo_command() -> str:
    """The line of the README's "Two commands" block that runs the demo."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    line = next(ln for ln in block.splitlines() if "rgt demo" in ln)
    return re.sub(r"\s+#.*$", "", line).strip()


@pytest.mark.slow
def test_readme_demo_in_a_fresh_venv(tmp_path):
    command = readme_demo_command()
    assert command.startswith("pip install ") and command.endswith("rgt demo")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", RGT_HOME=str(tmp_path / "home"),
               PIP_DISABLE_PIP_VERSION_CHECK="1", COLUMNS="120")
    # the README's own words, run from a checkout as the newcomer would (`-e .`)
    result = subprocess.run(["bash", "-c", command.replace("rgt demo", "rgt demo --steps 100")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    said = " ".join(result.stdout.split())  # Rich wraps long lines
    assert "5. down" in said and "kept durable" in said, said[-2000:]
    # torch without numpy warns "Failed to initialize NumPy" in every job's log: the line
    # installs the `torch` extra, which declares numpy beside torch
    assert "NumPy" not in result.stdout + result.stderr, said[-2000:]
    pulled = list((tmp_path / "home" / "demo").glob("*/results/logs/*.log"))
    assert len(pulled) == 1, pulled
    log = pulled[0].read_text(errors="replace")
    assert "step=100 " in log and "NumPy" not in log, log[-2000:]
