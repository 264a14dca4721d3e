"""A Colab run whose notebook nobody opened: watch, ls and top say so and how long it has
waited; `rgt down` needs no --discard-results for it (there are no results) but still asks,
and removes only what rgt wrote. A run that did start (state.json on Drive, or a notebook
Colab saved back) still obeys the Iron Law, and so does one that starts while down waits for
its confirmation."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import yaml
from cli import rgt


def setup_box(tmp: Path) -> tuple[Path, dict]:
    drive = tmp / "drive"
    drive.mkdir()
    (drive / "notes.txt").write_text("the user's own file")
    env = {"RGT_HOME": str(tmp / "home")}
    up = rgt("up", "c1", "--profile", "colab", "--drive", str(drive), env=env)
    assert up.returncode == 0, up.stderr
    return drive, env


def launch(tmp: Path, env: dict, name: str = "mlp") -> str:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    (work / "train.py").write_text("print('hello')\n")
    job = tmp / f"{name}.yaml"
    job.write_text(yaml.safe_dump({"name": name, "workdir": str(work), "run": "python train.py",
                                   "outputs": ["out"]}))
    started = rgt("run", "c1", str(job), "-d", env=env)
    assert started.returncode == 0, started.stderr
    return started.stdout.strip().splitlines()[-1]


def watch_json(env: dict, run_id: str) -> dict:
    done = rgt("watch", "c1", run_id, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["run"]


def test_an_unopened_notebook_is_said_and_down_removes_only_what_rgt_wrote(tmp_path):
    drive, env = setup_box(tmp_path)
    run_id = launch(tmp_path, env)
    run_dir = drive / "rgt" / run_id
    notebook = next(run_dir.glob("*.ipynb"))

    seen = watch_json(env, run_id)
    said = " ".join(seen["causes"])
    assert seen["status"] == "starting", seen
    assert "has not been opened yet" in said and f"MyDrive/rgt/{run_id}/{notebook.name}" in said
    assert "Run all" in said and "(waiting " in said, said

    listed = json.loads(rgt("ls", "--json", env=env).stdout)["boxes"][0]
    assert [w["run"] for w in listed["waiting"]] == [run_id], listed
    assert "not opened yet" in listed["waiting"][0]["what"] and \
        listed["waiting"][0]["waited_s"] >= 0
    shown = rgt("ls", env={**env, "COLUMNS": "80"}).stdout
    assert "waiting " in shown and "notebook not opened yet" in shown, shown
    top = rgt("top", "--once", env=env).stdout
    assert "waiting 0 min: notebook not opened yet" in top, top

    # no --discard-results, but the usual confirmation: a wrong name does nothing
    wrong = rgt("down", "c1", input="nope\n", env=env)
    assert wrong.returncode == 1 and run_dir.is_dir(), wrong.stdout + wrong.stderr
    panel = " ".join(wrong.stdout.split())
    assert "never started" in panel and "no results to lose" in panel, panel
    assert "NOT PULLED" not in panel and "--discard-results" not in wrong.stderr

    down = rgt("down", "c1", input="c1\n", env=env)
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"MyDrive/rgt/{run_id}" in " ".join(down.stdout.split())
    assert not run_dir.exists() and not (drive / "rgt").exists()  # rgt's, and nothing else
    assert (drive / "notes.txt").read_text() == "the user's own file"
    gone = json.loads(rgt("ls", "--all", "--json", env=env).stdout)["boxes"][0]
    assert gone["state"] == "down" and gone["still_billing"] == [], gone
    runs = json.loads(rgt("runs", "c1", "--json", env=env).stdout)
    assert {r["status"] for r in runs["runs"]} == {"cancelled"}, runs


def test_a_started_or_opened_run_still_needs_its_results_pulled(tmp_path):
    drive, env = setup_box(tmp_path)
    opened = launch(tmp_path, env, "opened")
    started = launch(tmp_path, env, "started")
    untouched = launch(tmp_path, env, "untouched")
    older = launch(tmp_path, env, "older")
    with sqlite3.connect(tmp_path / "home" / "state.db") as db:  # a run from before the record
        db.execute("UPDATE runs SET spec = json_remove(spec, '$.platform_run.wrote') "
                   "WHERE id = ?", (older,))
    said = " ".join(watch_json(env, older)["causes"])
    assert "cannot tell whether it was opened" in said and "Run all" in said, said

    # Colab saves a notebook it opened back to Drive: not what rgt wrote any more
    notebook = next((drive / "rgt" / opened).glob("*.ipynb"))
    saved = json.loads(notebook.read_text())
    saved["metadata"]["colab"] = {"provenance": []}
    notebook.write_text(json.dumps(saved))
    said = " ".join(watch_json(env, opened)["causes"])
    assert "was opened in Colab (Colab saved" in said and "has not been opened" not in said

    (drive / "rgt" / started / "state.json").write_text(json.dumps(
        {"status": "running", "sessions": 1, "heartbeat": time.time()}))
    assert watch_json(env, started)["status"] == "running"

    refused = rgt("down", "c1", "--yes", env=env)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    text = " ".join(refused.stderr.split())
    assert f"{opened} is still starting" in text and f"{started} is still running" in text
    assert f"{older} is still starting" in text
    assert untouched not in text and "--discard-results" in text, text
    assert all((drive / "rgt" / r).is_dir() for r in (opened, started, untouched, older))


def test_a_run_that_starts_while_down_asks_is_not_removed(tmp_path):
    drive, env = setup_box(tmp_path)
    run_id = launch(tmp_path, env)
    run_dir = drive / "rgt" / run_id
    proc = subprocess.Popen([sys.executable, "-m", "rgt", "down", "c1"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **env})
    shown = b""
    deadline = time.monotonic() + 60
    while b"to confirm" not in shown and time.monotonic() < deadline:
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        shown += chunk
    assert b"never started" in shown, shown
    # the user opens the notebook and runs it before typing the name
    (run_dir / "state.json").write_text(json.dumps({"status": "starting", "sessions": 1,
                                                    "heartbeat": time.time()}))
    out, err = proc.communicate(b"c1\n", timeout=60)
    assert proc.returncode == 2, (out + err).decode()
    assert b"started after rgt looked" in err and b"nothing was done" in err, err
    assert (run_dir / "state.json").is_file() and list(run_dir.glob("*.ipynb"))
    listed = json.loads(rgt("ls", "--json", env=env).stdout)["boxes"][0]
    assert listed["state"] == "up" and listed["live_runs"] == 1, listed
    assert watch_json(env, run_id)["status"] == "starting"
    refused = rgt("down", "c1", "--yes", env=env)
    assert refused.returncode == 3 and re.search(rf"{run_id}\s+is still starting",
                                                 refused.stderr), refused.stderr
