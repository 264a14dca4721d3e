"""`rgt run --down` and `rgt autostop`: a real detached watcher process takes a local box down
only under the Iron Law, says what it did in `rgt ls`, and is restarted after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from boxkit import up_ssh, wait_for, write_job

from rgt.lifecycle import autodown
from rgt.store import Store

WRITE = "mkdir -p out && echo weights > out/w.bin"


@pytest.fixture
def fast(cli, tmp_path, monkeypatch):
    """The CLI with a quick watcher (polls of 0.2 s, autostop minutes of 1 s), run from a
    directory of its own: the watcher pulls into ./rgt-results there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RGT_HOME", str(cli.home))  # `seen` reads the watcher's lock here
    cli.env.update(RGT_AUTODOWN_POLL_S="0.2", RGT_AUTOSTOP_MINUTE_S="1")
    cli.ok("up", "box")
    yield cli
    lock = cli.home / "autodown" / "box.lock"  # a failed test leaves no watcher waiting
    if lock.exists() and lock.read_text().isdigit() and _alive(pid := int(lock.read_text())):
        os.kill(pid, signal.SIGKILL)


def listing(cli) -> dict:
    """What `rgt ls --json` says of the box (one real `rgt ls`: for what it prints)."""
    box, = json.loads(cli.ok("ls", "--all", "--json").stdout)["boxes"]
    return box


def seen(cli) -> tuple[str, str]:
    """The box's state and its autodown line as `rgt ls` reads them, read here: polled
    many times, without a process each time."""
    store = Store(cli.home / "state.db")
    try:
        box = store.box("box")
        return box.state, autodown.shown(store, box) or ""
    finally:
        store.db.close()


def start(cli, tmp_path: Path, run: str, *flags: str) -> str:
    spec = write_job(tmp_path / "job", run=run, outputs=["out"])
    return cli.ok("run", "box", str(spec), "-d", *flags).stdout.strip().splitlines()[-1]


def test_down_after_the_run_pulls_verifies_and_stops(fast, tmp_path):
    scratch = fast.home / "boxes" / "box" / "scratch"
    run_id = start(fast, tmp_path, WRITE, "--down")
    wait_for(lambda: seen(fast)[0] == "down", timeout=30)
    assert not scratch.exists()
    pulled = tmp_path / "rgt-results" / "box" / run_id / "out" / "w.bin"
    assert pulled.read_text() == "weights\n"
    assert fast.verified("box", run_id)["ok"]
    shown = fast.ok("ls", "--all").stdout
    assert "down by --down watcher at " in shown and f"run {run_id} succeeded" in shown


def test_a_failed_run_keeps_the_box_up_and_says_why(fast, tmp_path):
    run_id = start(fast, tmp_path, "echo boom; exit 3", "--down")
    line = wait_for(lambda: seen(fast)[1].startswith("--down watcher kept") and seen(fast)[1],
                    timeout=30)
    assert f"run {run_id} ended failed (exit 3)" in line
    assert listing(fast)["state"] == "up"
    assert (fast.home / "boxes" / "box" / "scratch").is_dir()
    assert "kept it up" in fast.ok("ls").stdout


def test_a_killed_watcher_is_shown_and_the_next_watch_restarts_it(fast, tmp_path):
    flag = tmp_path / "go"  # the run waits for it: the watcher is killed mid-wait
    run_id = start(fast, tmp_path, f"while [ ! -e {flag} ]; do sleep 0.1; done; {WRITE}",
                   "--down")
    lock = fast.home / "autodown" / "box.lock"
    pid = int(lock.read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: "NOT running" in seen(fast)[1], timeout=10)
    assert "watcher is NOT running" in fast.ok("ls").stdout
    watched = fast.ok("watch", "box", run_id)
    assert "was not running" in watched.stderr
    assert int(lock.read_text()) != pid
    flag.touch()
    wait_for(lambda: seen(fast)[0] == "down", timeout=30)
    assert (tmp_path / "rgt-results" / "box" / run_id / "out" / "w.bin").exists()


def test_idle_autostop_waits_for_the_pull_then_stops(fast, tmp_path):
    run_id = start(fast, tmp_path, WRITE)
    fast.ok("watch", "box", run_id, "--until-done", "--timeout", "30")
    armed = fast.ok("autostop", "box", "1")  # one "minute" is a second here
    assert "goes down after 1 min with no live run" in armed.stdout
    waiting = wait_for(lambda: "waiting: refusing to stop" in seen(fast)[1] and seen(fast)[1],
                       timeout=20)
    assert run_id in waiting and listing(fast)["state"] == "up"  # unpulled: never down
    fast.ok("pull", "box", run_id)
    wait_for(lambda: seen(fast)[0] == "down", timeout=20)
    assert "down by autostop watcher" in fast.ok("ls", "--all").stdout


def test_autostop_off_disarms_and_the_watcher_exits(fast, tmp_path):
    fast.ok("autostop", "box", "60")
    pid = int((fast.home / "autodown" / "box.lock").read_text())
    assert "disarmed" in fast.ok("autostop", "box", "--off").stdout
    wait_for(lambda: not _alive(pid), timeout=10)
    box = listing(fast)
    assert box["state"] == "up" and box["autodown"] is None
    assert "nothing was armed" in fast.ok("autostop", "box", "--off").stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_down_is_refused_where_only_the_console_stops_the_meter(cli, sshd_server, tmp_path):
    assert up_ssh(cli, sshd_server, tmp_path, "box").returncode == 0  # registered by hand
    spec = write_job(tmp_path / "job", run=WRITE, outputs=["out"])
    refused = cli("run", "box", str(spec), "-d", "--down")
    assert refused.returncode == 2 and "rgt cannot stop box's meter itself" in refused.stderr
    assert not (tmp_path / "box-data" / "rgt").exists()  # refused before anything was pushed
    assert cli("autostop", "box", "5").returncode == 2
    assert "no autostop and no --down armed" in cli.ok("autostop", "box").stdout
