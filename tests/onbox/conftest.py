"""Fixtures for the on-box scripts: real runner processes, real tmpfs mounts, no mocks."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# Like tests/conftest.py: helper modules here are imported by name from the test files.
sys.path.insert(0, str(Path(__file__).parent))
from onbox_helpers import read_state, shipped  # noqa: E402


@pytest.fixture
def make_run(tmp_path):
    """Write RUN_DIR/run.json (+ code/job.py, secrets.env) the way the launcher will."""

    def _make(
        job_source: str,
        *,
        run_id: str = "r1",
        args: str = "",
        outputs=(),
        durable_dir=None,
        setup=None,
        env=None,
        secrets=None,
        heartbeat_s: float = 0.5,
    ) -> Path:
        run_dir = tmp_path / "data" / "rgt" / run_id
        code = run_dir / "code"
        code.mkdir(parents=True)
        (code / "job.py").write_text(job_source)
        spec = {
            "run_id": run_id,
            "command": f"{sys.executable} job.py {args}".strip(),
            "workdir": str(code),
            "env": dict(env or {}),
            "outputs": list(outputs),
            "heartbeat_s": heartbeat_s,
            "kill_grace_s": 2,
        }
        if setup:
            spec["setup"] = setup
        if durable_dir:
            spec["durable_dir"] = str(durable_dir)
        (run_dir / "run.json").write_text(json.dumps(spec))
        if secrets:
            path = run_dir / "secrets.env"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.writelines(f"{k}={v}\n" for k, v in secrets.items())
        return run_dir

    return _make


class Launcher:
    """Start runners like the lifecycle does (setsid nohup … </dev/null >/dev/null 2>&1 &), from
    the shipped text written to RUN_DIR/runner.py (or fed on stdin)."""

    def __init__(self):
        self.started = []  # (Popen, run_dir)

    def start(self, run_dir: Path, via_stdin: bool = False) -> subprocess.Popen:
        runner = str(shipped("runner", run_dir))
        nohup = ["nohup"] if shutil.which("nohup") else []
        if via_stdin:
            argv = nohup + [sys.executable, "-", str(run_dir)]
            stdin = open(runner, "rb")  # noqa: SIM115 - handed to the child, closed below
        else:
            argv = nohup + [sys.executable, runner, str(run_dir)]
            stdin = subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                argv,
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            if via_stdin:
                stdin.close()
        self.started.append((proc, run_dir))
        return proc

    def cleanup(self) -> None:
        """Kill only what these tests started: each runner and its recorded job group."""
        for proc, run_dir in self.started:
            state = read_state(run_dir) or {}
            pgid = state.get("pgid") or state.get("pid")
            if pgid and state.get("status") in ("starting", "running"):
                with contextlib.suppress(OSError):
                    os.killpg(pgid, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)


@pytest.fixture
def launcher():
    launch = Launcher()
    yield launch
    launch.cleanup()


