"""Helpers shared by the on-box tests (a uniquely named module, importable from tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from rgt.onbox import script_source


def shipped(name: str, directory: Path) -> Path:
    """Write the text a box gets (``script_source``) to DIRECTORY/NAME.py, as the launcher does."""
    path = Path(directory) / f"{name}.py"
    path.write_bytes(script_source(name))
    return path


def feed(name: str, *args: str, python: str = sys.executable, timeout: float = 60):
    """Run on-box script NAME as the lifecycle does: its shipped text on stdin of ``python -``."""
    return subprocess.run(
        [python, "-", *args],
        input=script_source(name).decode(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_for(predicate, timeout: float = 15.0, interval: float = 0.05, what: str = "condition"):
    """Poll PREDICATE until it returns something truthy; fail with WHAT after TIMEOUT."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def read_state(run_dir: Path):
    try:
        return json.loads((run_dir / "state.json").read_text())
    except (OSError, ValueError):
        return None


def wait_status(run_dir: Path, statuses, timeout: float = 20.0) -> dict:
    statuses = (statuses,) if isinstance(statuses, str) else tuple(statuses)

    def check():
        state = read_state(run_dir)
        return state if state and state.get("status") in statuses else None

    return wait_for(check, timeout, what=f"state.json status in {statuses} ({run_dir})")


def wait_log(run_dir: Path, text: str, timeout: float = 15.0) -> str:
    def check():
        try:
            log = (run_dir / "log").read_text()
        except OSError:
            return None
        return log if text in log else None

    return wait_for(check, timeout, what=f"{text!r} in {run_dir}/log")
