"""Ctrl-C anywhere (issue 13 item 9): a real SIGINT sent to a real `rgt` process group (as a
terminal sends it) at each stage of up, run, pull and down. Afterwards the store says what is
true, the box keeps no half-made run directory, and the message says what was started and what
to do; exit 130."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from boxkit import wait_for, write_job

MANY = 30_000  # small files: enough that copying or deleting them takes seconds


def many_files(root: Path, count: int = MANY) -> None:
    for i in range(count):
        folder = root / f"d{i // 1000}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}").write_bytes(b"x")


def start(cli, *args: str, env: dict | None = None) -> subprocess.Popen:
    """`rgt ARGS` in a session of its own: SIGINT to its group is what a terminal's Ctrl-C
    does (rgt and the ssh/bash children it started get it, pytest does not)."""
    full = {**os.environ, **cli.env, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "rgt", *args], env=full, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def ctrl_c(proc: subprocess.Popen, when, timeout: float = 120) -> tuple[int, str, str]:
    """Wait until WHEN() holds (the stage under test is under way), then press Ctrl-C."""
    wait_for(lambda: when() or proc.poll() is not None, timeout=timeout, every=0.05)
    assert proc.poll() is None, "rgt finished before the stage under test was reached"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err and "Aborted!" not in err, err
    return proc.returncode, out, err


def runs(cli) -> list[dict]:
    return json.loads(cli.ok("runs", "--json").stdout)["runs"]


def run_dirs(cli) -> list[str]:
    root = cli.home / "boxes" / "box" / "scratch" / "rgt"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_ctrl_c_during_push_leaves_no_run_and_no_directory(cli, tmp_path):
    work = tmp_path / "job"
    many_files(work / "data")
    spec = write_job(work, run="sleep 60", secrets=["TOKEN"])
    cli.ok("up", "box")
    proc = start(cli, "run", "box", str(spec), "-d", env={"TOKEN": "s3cret"})
    code_dir = cli.home / "boxes" / "box" / "scratch" / "rgt"
    rc, _, err = ctrl_c(proc, lambda: any(code_dir.glob("*/code/data/d1")))
    assert rc == 130, err
    assert "interrupted (Ctrl-C) before run" in err and "nothing runs" in err
    assert "partial push" in err and "was removed" in err
    assert run_dirs(cli) == [], "no orphan push directory (nor its secrets file) on the box"
    assert runs(cli) == []
    quick = write_job(tmp_path / "quick", name="job", run="true")
    again = cli.ok("run", "box", str(quick), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", again, "--until-done", "--timeout", "60")  # no lock left behind


def test_ctrl_c_after_the_job_started_records_the_run(cli, tmp_path):
    # a `cat` that stalls once it has shown the runner's state.json: Ctrl-C lands after the
    # job started and before rgt recorded it, the window a real Ctrl-C can hit
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "cat").write_text('#!/bin/bash\n/bin/cat "$@"; rc=$?\n'
                               'case "$*" in *state.json*) [ $rc = 0 ] && sleep 60;; esac\n'
                               'exit $rc\n')
    (hooks / "cat").chmod(0o755)
    spec = write_job(tmp_path / "job", run="sleep 60")
    cli.ok("up", "box")
    proc = start(cli, "run", "box", str(spec), "-d",
                 env={"PATH": f"{hooks}{os.pathsep}{os.environ['PATH']}"})
    root = cli.home / "boxes" / "box" / "scratch" / "rgt"
    rc, _, err = ctrl_c(proc, lambda: any(root.glob("*/state.json")))
    assert rc == 130 and "had already started" in err, err
    [run] = runs(cli)
    assert run["status"] in ("starting", "running") and run["id"] in err
    assert f"rgt cancel box {run['id']}" in err and run_dirs(cli) == [run["id"]]
    cli.ok("cancel", "box", run["id"], "--yes", "--grace", "1")


def test_ctrl_c_during_pull_records_nothing_and_the_next_pull_resumes(cli, tmp_path, tmpfs):
    # The box's disks are a tmpfs: the runner copies each of the MANY outputs to the durable
    # dir with an fsync (minutes on a busy disk, seconds here); the pull still writes them to
    # this machine's disk one by one, the stage the Ctrl-C interrupts.
    disk = tmpfs("size=256m")
    work = tmp_path / "job"
    work.mkdir()
    (work / "gen.py").write_text(
        "import os\n"
        f"for i in range({MANY}):\n"
        "    os.makedirs(f'out/d{i // 1000}', exist_ok=True)\n"
        "    open(f'out/d{i // 1000}/f{i}', 'w').write('y')\n")
    spec = write_job(work, run="python3 gen.py", outputs=["out"])
    cli.ok("up", "box", "--data-dir", str(disk / "data"), "--durable-dir", str(disk / "durable"))
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "120")
    dest = tmp_path / "results"
    proc = start(cli, "pull", "box", run_id, "--dest", str(dest))
    rc, _, err = ctrl_c(proc, lambda: any(dest.glob("out/d2/*")))
    assert rc == 130 and "interrupted (Ctrl-C) while pulling" in err, err
    assert "nothing was verified" in err and f"rgt pull box {run_id}" in err
    refused = cli("down", "box", "--yes")
    assert refused.returncode == 3, "an interrupted pull is no evidence: down still refuses"
    report = json.loads(cli.ok("pull", "box", run_id, "--dest", str(dest), "--json").stdout)
    assert report["pull"]["ok"], report["pull"]["problems"]
    assert report["pull"]["counts"]["files"] == MANY  # the box's SYNC_MANIFEST.json is evidence
    cli.ok("down", "box", "--yes")


def test_ctrl_c_during_down_keeps_the_box_up_and_down_again_finishes(cli, tmp_path):
    spec = write_job(tmp_path / "job", run="true")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "results"))
    scratch = cli.home / "boxes" / "box" / "scratch"
    many_files(scratch / "junk", 3 * MANY)  # what a deleted scratch held: slow to delete
    proc = start(cli, "down", "box", "--yes")
    rc, _, err = ctrl_c(proc, lambda: not (scratch / "junk" / "d0").exists())
    assert rc == 130 and "interrupted (Ctrl-C) while stopping" in err, err
    assert "`rgt down box`" in err
    [box] = json.loads(cli.ok("ls", "--json").stdout)["boxes"]
    assert box["state"] == "up", "the box reads up until the meter-stop verb returned"
    cli.ok("down", "box", "--yes")
    assert not scratch.exists()
    assert json.loads(cli.ok("ls", "--all", "--json").stdout)["boxes"][0]["state"] == "down"


def test_ctrl_c_during_up_registers_nothing(cli, tmp_path):
    # a host that accepts the connection and never says a word: ssh waits for its banner
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(5)
    accepted = []
    threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True).start()
    port = silent.getsockname()[1]
    proc = start(cli, "up", "far", "--host", "127.0.0.1", "--port", str(port), "--user", "me",
                 "--profile", "generic-ssh")
    rc, _, err = ctrl_c(proc, lambda: bool(accepted))
    silent.close()
    assert rc == 130 and "interrupted (Ctrl-C)" in err and "not registered" in err, err
    assert json.loads(cli.ok("ls", "--all", "--json").stdout)["boxes"] == []


def test_a_push_that_fails_half_way_leaves_no_directory(cli, tmp_path, tmpfs):
    small = tmpfs("size=1m")  # the box's data disk: the code does not fit
    work = tmp_path / "job"
    work.mkdir()
    (work / "weights.bin").write_bytes(os.urandom(3 << 20))
    spec = write_job(work, run="true", secrets=["TOKEN"])
    cli.ok("up", "box", "--data-dir", str(small))
    failed = cli("run", "box", str(spec), "-d", env={"TOKEN": "s3cret"})
    assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
    assert list((small / "rgt").iterdir()) == [], "the partial push was removed"
    assert runs(cli) == []
