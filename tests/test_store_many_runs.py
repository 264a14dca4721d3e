"""A store of many runs answers by index, and the listings stay short (issue 33, item 7).

No timing here (bench/many_runs.py measures 10,000 runs): these hold the mechanism — the
indexes exist (an old store gains them when opened), the queries use them instead of scanning,
the one-query answers agree with the per-run ones, and `runs`/`top` say what they left out.
"""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from cli import rgt

from rgt.store import Box, Run, Store

NEW_INDEXES = {"runs_by_box", "runs_by_resumes", "evidence_by_run"}


def _indexes(path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    finally:
        db.close()


def _fill(store: Store, runs: int, boxes: int = 2) -> list[Run]:
    """RUNS ended runs over BOXES boxes; every third run resumes the one before it on its box,
    every fourth is pulled (the latest evidence of every eighth says it failed)."""
    now = time.time()
    made: list[Run] = []
    with store.batch():
        for b in range(boxes):
            store.add_box(Box(f"b{b}", "generic-ssh", {"host": "10.0.0.1"}, "/d", "/dd", 1.0,
                              "up", now - 86400))
        for i in range(runs):
            box = f"b{i % boxes}"
            spec = {"name": "job", "attempt": 1}
            if i % 3 == 2 and i >= boxes:
                spec.update(attempt=2, resumes=made[i - boxes].id)
            run = Run(f"job-{i:04d}", box, "job", f"/d/rgt/job-{i:04d}", spec,
                      "succeeded" if i % 2 else "failed", 0, now - 3600 + i, now - 3000 + i)
            store.add_run(run)
            made.append(run)
            if i % 4 == 0:
                store.add_evidence("pull-verified", box, True, {}, run=run.id)
                if i % 8 == 0:
                    store.add_evidence("pull-verified", box, False, {}, run=run.id)
    return made


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    home = tmp_path_factory.mktemp("many")
    store = Store(home / "state.db")
    made = _fill(store, 60)
    return home, store, made


def test_an_old_store_gains_the_indexes_when_opened(tmp_path):
    path = tmp_path / "state.db"
    store = Store(path)
    _fill(store, 6)
    for name in NEW_INDEXES:  # as a store from before them was
        store.db.execute(f"DROP INDEX {name}")
    store.db.close()
    assert not NEW_INDEXES & _indexes(path)
    reopened = Store(path)
    assert _indexes(path) >= NEW_INDEXES
    assert reopened.next_attempt("job-0000").id == "job-0002"
    assert len(reopened.runs("b0")) == 3


def test_next_attempt_and_verdicts_are_lookups_not_scans(many):
    _, store, _ = many
    plans = {
        "next_attempt": ("SELECT * FROM runs WHERE json_valid(spec) AND json_extract(spec, "
                         "'$.resumes') = ? ORDER BY created LIMIT 1", ("job-0000",)),
        "runs": ("SELECT runs.* FROM runs JOIN boxes ON boxes.name = runs.box WHERE runs.box=? "
                 "AND runs.created >= boxes.created ORDER BY runs.created", ("b0",)),
        "latest_evidence": ("SELECT * FROM evidence WHERE kind=? AND box=? AND run IS ? "
                            "ORDER BY id DESC LIMIT 1", ("pull-verified", "b0", "job-0000")),
    }
    for name, (query, args) in plans.items():
        plan = " ".join(row[3] for row in store.db.execute("EXPLAIN QUERY PLAN " + query, args))
        assert "USING" in plan and "SCAN runs" not in plan and "SCAN evidence" not in plan, \
            (name, plan)


def test_one_query_answers_agree_with_the_per_run_ones(many):
    _, store, made = many
    later = store.next_attempts()
    verdicts = store.latest_verdicts("pull-verified")
    by_box = store.runs_by_box()
    assert later and verdicts
    for run in made:
        one = store.next_attempt(run.id)
        assert later.get(run.id) == (one.id if one else None), run.id
        evidence = store.latest_evidence("pull-verified", run.box, run.id)
        assert verdicts.get((run.box, run.id)) == (evidence.ok if evidence else None), run.id
    assert by_box == {b: store.runs(b) for b in ("b0", "b1")}
    failed = {b: [r for r in store.runs(b) if r.status == "failed"] for b in ("b0", "b1")}
    assert store.runs_by_box(("failed",)) == {b: runs for b, runs in failed.items() if runs}
    # a run read back is the run written; its spec decoded only when asked for
    assert store.runs("b0") == [r for r in made if r.box == "b0"]
    assert store.find_run("job-0008").spec == {"name": "job", "attempt": 2, "resumes": "job-0006"}


def test_runs_shows_the_newest_and_says_how_many_it_left_out(many):
    home, _, made = many
    env = {"RGT_HOME": str(home)}
    out = rgt("runs", env=env).stdout
    ids = {r.id for r in made}  # a run's own row starts with its id (links are indented)
    shown = [words[0] for words in map(str.split, out.splitlines())
             if words and words[0] in ids]
    assert sorted(shown) == [r.id for r in made[-50:]], shown[:3]  # (by box, then age)
    assert "… 10 older runs not shown: rgt runs --all, or rgt runs BOX" in out
    every = rgt("runs", "--all", env=env).stdout
    assert all(r.id in every for r in made) and "not shown" not in every
    listed = json.loads(rgt("runs", "--json", env=env).stdout)["runs"]
    assert len(listed) == 60
    by_id = {row["id"]: row for row in listed}
    assert by_id["job-0002"]["resumes"] == "job-0000" and by_id["job-0000"]["resumed_by"] \
        == "job-0002"
    assert by_id["job-0008"]["pulled"] == "failed" and by_id["job-0004"]["pulled"] == "verified"


def test_top_shows_the_newest_ended_runs_and_counts_the_rest(many):
    home, _, made = many
    board = json.loads(rgt("top", "--once", "--json", env={"RGT_HOME": str(home)}).stdout)
    for box in board["boxes"]:
        unpulled = [r for r in made if r.box == box["name"]  # (a failed pull is no pull)
                    and (int(r.id[-4:]) % 4 or int(r.id[-4:]) % 8 == 0)]
        shown = [row["id"] for row in box["runs"]]
        assert shown == [r.id for r in unpulled[-3:]]
        assert box["ended_runs_not_shown"] == len(unpulled) - 3
    text = rgt("top", "--once", env={"RGT_HOME": str(home), "COLUMNS": "80"}).stdout
    assert "older ended runs not pulled: rgt runs b0 --all" in text
