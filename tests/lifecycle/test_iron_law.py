"""The Iron Law (lifecycle/down.py `iron_law`), row by row, and `down` deleting only what rgt
created. Rows are built as store rows; two paths go through the real CLI and real processes."""

from __future__ import annotations

import os
import signal
import time

import pytest
from boxkit import wait_for, write_job

from rgt.lifecycle import down
from rgt.store import Box, Run, Store


def _store(tmp_path) -> tuple[Store, Box]:
    store = Store(tmp_path / "state.db")
    box = Box("b", "local", {}, str(tmp_path / "d"), str(tmp_path / "u"), None, "up", 0.0)
    store.add_box(box)
    return store, box


def _run(store: Store, run_id: str, status: str, resumes: str | None = None) -> Run:
    run = Run(run_id, "b", "job", f"/x/rgt/{run_id}", {"resumes": resumes} if resumes else {},
              status, None, time.time(), time.time())
    store.add_run(run)
    return run


# (row, reachable, status now, ended now, pull: None | (ok, run_status at its start,
#  run_ended), superseded, status event after the pull, verdict)
ROWS = [
    (1, True, "running", None, (True, "succeeded", 5.0), False, False, "live"),
    (2, False, "running", None, (True, "succeeded", 5.0), False, False, "unverified"),
    (3, True, "failed", 5.0, None, True, False, "superseded"),
    (3, False, "preempted", None, None, True, False, "superseded"),
    (4, True, "succeeded", 5.0, None, False, False, "unverified"),
    (4, False, "succeeded", None, None, False, False, "unverified"),
    (5, True, "succeeded", 5.0, (False, "succeeded", 5.0), False, False, "unverified"),
    (6, True, "vanished", None, (True, "running", None), False, False, "unverified"),
    (6, False, "succeeded", None, (True, "running", None), False, False, "unverified"),
    (7, True, "succeeded", 9.0, (True, "succeeded", 5.0), False, False, "unverified"),
    (8, False, "vanished", None, (True, "succeeded", 5.0), False, True, "unverified"),
    (9, True, "succeeded", 5.0, (True, "succeeded", 5.0), False, False, "ok"),
    (9, False, "failed", None, (True, "failed", 5.0), False, False, "ok"),
]


@pytest.mark.parametrize("row", ROWS, ids=[f"row{r[0]}-{'up' if r[1] else 'gone'}-{r[2]}"
                                           for r in ROWS])
def test_iron_law_truth_table(tmp_path, row):
    _, reachable, status, ended, pull, superseded, changed, verdict = row
    store, box = _store(tmp_path)
    run = _run(store, "r1", status)
    if pull is not None:
        ok, run_status, run_ended = pull
        store.add_evidence("pull-verified", "b", ok, {"run_status": run_status,
                                                      "run_ended": run_ended,
                                                      "problems": [] if ok else ["bad"]},
                           run="r1")
    if changed:
        time.sleep(0.01)
        store.record("status", {"from": "succeeded", "to": status}, box="b", run="r1")
    if superseded:
        _run(store, "r2", "running", resumes="r1")
    got, reason = down.judge_run(store, box, run, {"status": status, "ended": ended},
                                 reachable=reachable)
    assert got == verdict, reason
    assert "r1" in reason


def test_truth_table_is_in_the_docstring():
    doc = down.iron_law.__doc__
    for n in range(1, 10):
        assert f"\n    {n}  " in doc


def test_pull_of_a_live_run_does_not_count_after_it_vanishes(cli, tmp_path):
    cli.ok("up", "box")
    scratch = cli.home / "boxes" / "box" / "scratch"
    spec = write_job(tmp_path / "job", outputs=["out"], run=(
        'mkdir -p "$RGT_OUT_DIR/out" && echo w > "$RGT_OUT_DIR/out/w.bin" && echo ready; '
        "sleep 300"))
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    run_dir = scratch / "rgt" / run_id
    state = wait_for(lambda: (s := cli.state(run_dir)).get("pid") and s, timeout=20)
    wait_for(lambda: "ready" in (run_dir / "log").read_text(), timeout=20)
    cli("pull", "box", run_id, "--dest", str(tmp_path / "early"))  # while it runs
    os.kill(state["runner_pid"], signal.SIGKILL)
    os.killpg(state["pid"], signal.SIGKILL)
    time.sleep(0.5)
    refused = cli("down", "box", "--yes")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "before its end was observed" in refused.stderr
    assert run_dir.is_dir()
    cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "late"))  # after: it counts
    cli.ok("down", "box", "--yes")


def test_down_of_a_local_box_keeps_the_users_data_dir(cli, tmp_path):
    mine = tmp_path / "my-data"
    (mine / "datasets").mkdir(parents=True)
    (mine / "datasets" / "train.bin").write_text("precious")
    durable = tmp_path / "durable"
    cli.ok("up", "box", "--data-dir", str(mine), "--durable-dir", str(durable))
    spec = write_job(tmp_path / "job", run="mkdir -p out && echo w > out/w.bin",
                     outputs=["out"])
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "res"))
    out = cli.ok("down", "box", "--yes").stdout
    assert (mine / "datasets" / "train.bin").read_text() == "precious"
    assert not (mine / "rgt").exists()  # the run dir rgt made there is gone …
    deleted = [line for line in out.splitlines() if "deletes" in line]
    assert len(deleted) == 1 and f"{mine}/rgt/{run_id}" in deleted[0], out  # … and named
    assert (durable / "rgt" / run_id).is_dir()


def test_a_reused_box_name_is_a_new_box(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run="mkdir -p out && echo w > out/w.bin",
                     outputs=["out"])
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "res"))
    cli.ok("down", "box", "--yes")
    before = Store(cli.home / "state.db").find_run(run_id)
    cli.ok("up", "box", "--data-dir", str(tmp_path / "other"))  # same name, a new box
    down_again = cli("down", "box", "--yes")  # the old run neither blocks it …
    assert down_again.returncode == 0, down_again.stdout + down_again.stderr
    after = Store(cli.home / "state.db").find_run(run_id)
    assert (after.status, after.updated) == (before.status, before.updated)  # … nor changes
