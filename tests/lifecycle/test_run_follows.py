"""`rgt run` in a terminal follows the log; Ctrl-C stops following and the run goes on; -d and
a stdout that is not a terminal return at once with the run id (scripts keep working)."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time

from boxkit import wait_for, write_job

TICKING = "for i in $(seq 1 600); do echo tick $i; sleep 0.2; done"


def _in_terminal(cli, *args: str) -> tuple[subprocess.Popen, int]:
    master, slave = pty.openpty()
    env = {**os.environ, **cli.env, "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "rgt", *args], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env=env)
    os.close(slave)
    return proc, master


def _read_until(master: int, needle: str, timeout: float = 60) -> str:
    seen, deadline = b"", time.monotonic() + timeout
    while needle.encode() not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        try:
            seen += os.read(master, 4096)
        except OSError:  # the other end closed
            break
    return seen.decode(errors="replace")


def test_follows_in_a_terminal_and_ctrl_c_detaches(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run=TICKING)
    proc, master = _in_terminal(cli, "run", "box", str(spec))
    shown = _read_until(master, "tick 3")
    proc.send_signal(signal.SIGINT)
    shown += _read_until(master, "cancel:")
    assert proc.wait(timeout=30) == 0, shown
    os.close(master)
    assert "Traceback" not in shown and "detached" in shown and "rgt watch box" in shown
    runs = json.loads(cli.ok("runs", "box", "--json").stdout)["runs"]
    assert runs[0]["status"] == "running", "Ctrl-C while following must not stop the run"
    cli.ok("cancel", "box", "--yes", "--grace", "2")


def test_detach_and_scripts_return_at_once(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run=TICKING)
    proc, master = _in_terminal(cli, "run", "box", str(spec), "-d")
    shown = _read_until(master, "rgt watch box")
    assert proc.wait(timeout=60) == 0
    os.close(master)
    assert "tick" not in shown
    piped = cli.ok("run", "box", str(write_job(tmp_path / "two", name="two", run=TICKING)))
    assert piped.stdout.strip().splitlines()[-1].startswith("two-")
    for run in json.loads(cli.ok("runs", "--json").stdout)["runs"]:
        cli.ok("cancel", "box", run["id"], "--yes", "--grace", "2")
    wait_for(lambda: all(r["status"] == "cancelled"
                         for r in json.loads(cli.ok("runs", "--json").stdout)["runs"]))
