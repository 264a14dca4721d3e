"""Local state: boxes, runs, events and evidence, in one SQLite file.

Lives under the user's data directory (override with `RGT_HOME`). Every verb records what it
did and what it measured, so `ls`, `watch` and `down` decide from evidence, not memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from platformdirs import user_data_dir

from rgt import runids, store_backup
from rgt.errors import UserError, did_you_mean

SCHEMA = """
CREATE TABLE IF NOT EXISTS boxes (
    name TEXT PRIMARY KEY,
    profile TEXT NOT NULL,
    connection TEXT NOT NULL,          -- JSON: how to reach it (empty for local)
    data_dir TEXT NOT NULL,
    durable_dir TEXT NOT NULL,
    rate REAL,                         -- USD per hour while up, if known
    state TEXT NOT NULL,               -- up | down
    created REAL NOT NULL,
    down_at REAL,
    extra TEXT NOT NULL DEFAULT '{}'   -- JSON: platform ids, still-billing items ...
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    box TEXT NOT NULL REFERENCES boxes(name),
    job TEXT NOT NULL,
    remote_dir TEXT NOT NULL,
    spec TEXT NOT NULL,                -- JSON of the job spec as launched
    status TEXT NOT NULL,
    exit_code INTEGER,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    box TEXT,
    run TEXT,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_run ON events (box, run, kind, id);
-- Indexes, not scans, for a store of thousands of runs (bench/many_runs.py). A store made
-- before them gains them when it is opened: CREATE ... IF NOT EXISTS, nothing else changes.
CREATE INDEX IF NOT EXISTS runs_by_box ON runs (box, created);
CREATE INDEX IF NOT EXISTS runs_by_resumes ON runs (json_extract(spec, '$.resumes'))
    WHERE json_valid(spec);            -- a run's next attempt is the run that resumes it
CREATE TABLE IF NOT EXISTS evidence (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    box TEXT NOT NULL,
    run TEXT,
    kind TEXT NOT NULL,                -- audit | pull-verified | teardown-confirmed
    ok INTEGER NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS evidence_by_run ON evidence (kind, box, run, id);
CREATE TABLE IF NOT EXISTS teardowns (   -- `rgt down`'s journal (rgt.lifecycle.down_journal)
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    box TEXT NOT NULL,
    box_created REAL NOT NULL,         -- which box of that name: a reused name is a new box
    begun REAL NOT NULL,
    plan TEXT NOT NULL,                -- JSON: what was confirmed, against which verdicts
    steps TEXT NOT NULL,               -- JSON list: the steps, in order
    done TEXT NOT NULL DEFAULT '{}',   -- JSON: step -> what it did, once it completed
    finished REAL
);
"""


# Run statuses: a run is live until the probe (or the scheduler) says it has ended. "paused":
# its machine cannot run it now (a preempted vast.ai instance); "resuming": the machine is back
# and its restart hook is relaunching the run. Neither has ended: `watch --until-done` waits.
# "launching": recorded by `rgt run` before anything starts on the box (rgt.lifecycle.intent).
LIVE = ("launching", "starting", "running", "paused", "resuming")
TERMINAL = ("succeeded", "failed", "sync-failed", "vanished", "preempted", "cancelled",
            "stopped")


def rgt_home() -> Path:
    home = Path(os.environ.get("RGT_HOME") or user_data_dir("rgt"))
    home.mkdir(parents=True, exist_ok=True)
    return home


@dataclass
class Box:
    name: str
    profile: str
    connection: dict[str, Any]
    data_dir: str
    durable_dir: str
    rate: float | None
    state: str
    created: float
    down_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return not self.connection


@dataclass
class Run:
    id: str
    box: str
    job: str
    remote_dir: str
    spec: dict[str, Any]
    status: str
    exit_code: int | None
    created: float
    updated: float


@dataclass
class Evidence:
    at: float
    box: str
    run: str | None
    kind: str
    ok: bool
    detail: dict[str, Any]


@dataclass
class TeardownRecord:
    """One `rgt down`, recorded before its first step and finished with the box's "down"."""

    id: int
    box: str
    box_created: float
    begun: float
    plan: dict[str, Any]
    steps: list[str]
    done: dict[str, str]
    finished: float | None

    @property
    def remaining(self) -> list[str]:
        return [step for step in self.steps if step not in self.done]


class StoreFull(UserError):
    """The disk under RGT_HOME is full: the write did not happen, the store is as it was."""


def _store_error(err: sqlite3.OperationalError, path: Path) -> Exception:
    text = str(err)
    if "full" in text or "disk I/O error" in text or "unable to open" in text:
        return StoreFull(f"cannot write rgt's state in {path.parent} ({text}): free space there "
                         "(df -h and df -i), or point RGT_HOME elsewhere; nothing was recorded "
                         "and the store is as it was")
    return err


class _Connection(sqlite3.Connection):
    """Every statement of the store goes through here, so a full disk (SQLite's atomic
    writes leave the file as it was) is one clear error, not a sqlite traceback, and a damaged
    file met by a query is restored from its backup (rgt.store_backup) and named."""

    store_path: Path = Path("state.db")

    def execute(self, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        cursor = self.cursor(_Cursor)  # its rows are read later: those reads are guarded too
        try:
            return cursor.execute(*args)
        except sqlite3.DatabaseError as err:
            raise self.failure(err) from None

    def executescript(self, script: str) -> sqlite3.Cursor:  # type: ignore[override]
        try:
            return super().executescript(script)
        except sqlite3.DatabaseError as err:
            raise self.failure(err) from None

    def failure(self, err: sqlite3.DatabaseError) -> Exception:
        if isinstance(err, sqlite3.OperationalError):
            return _store_error(err, self.store_path)
        if type(err) is sqlite3.DatabaseError:  # SQLITE_CORRUPT, SQLITE_NOTADB: the file
            return store_backup.recover_midway(self, self.store_path, err)
        return err  # a constraint or a misuse: rgt's own bug, kept as it is


class _Cursor(sqlite3.Cursor):
    """Rows are read from the file as they are fetched: damage can surface there too."""

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as err:
            raise self.connection.failure(err) from None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as err:
            raise self.connection.failure(err) from None

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as err:
            raise self.connection.failure(err) from None


class Store:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or rgt_home() / "state.db"
        self._batch = 0  # > 0 inside `batch()`: one backup at its end, not one per write
        try:
            # missing, empty or damaged: restored or named; none yet: made
            store_backup.check_at_open(self.path, SCHEMA)
        except sqlite3.OperationalError as err:
            raise _store_error(err, self.path) from None
        except OSError as err:
            raise StoreFull(f"cannot read or restore rgt's state in {self.path.parent} "
                            f"({err}): free space there, or point RGT_HOME elsewhere") from None
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                      factory=_Connection)
        except sqlite3.OperationalError as err:
            raise _store_error(err, self.path) from None
        self.db.store_path = self.path
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        # a new store, or one from before backups: start its backup. Nothing changed yet, so
        # damage found here is named at once (there is no backup to restore)
        if not store_backup.backup_of(self.path).exists() and (
                damage := store_backup.take_backup(self.db, self.path)) is not None:
            raise self.db.failure(sqlite3.DatabaseError(damage))

    # backup ----------------------------------------------------------------------------

    def _changed(self) -> None:
        """A box, a run, evidence or a teardown changed: refresh the backup (rgt.store_backup),
        which is what a damaged store is restored from. Events alone do not: they are history,
        written every few seconds by `watch`."""
        if self._batch == 0 and (damage := store_backup.take_backup(self.db, self.path)):
            store_backup.damaged_since_backup(self.path, damage)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Several changes in one transaction (all or none) and one backup after them."""
        self._batch += 1
        try:
            if self._batch == 1:
                self.db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                if self._batch == 1:
                    with contextlib.suppress(sqlite3.Error):  # gone with a restored store
                        self.db.execute("ROLLBACK")
                raise
            if self._batch == 1:
                self.db.execute("COMMIT")
        finally:
            self._batch -= 1
        self._changed()

    # boxes -----------------------------------------------------------------------------

    def add_box(self, box: Box) -> None:
        check_box_name(box.name)
        existing = self.find_box(box.name)
        if existing and existing.state == "up":
            raise UserError(f"a box named {box.name!r} is already up; pick another name or "
                            f"`rgt down {box.name}` first")
        self.db.execute(
            "INSERT OR REPLACE INTO boxes VALUES (?,?,?,?,?,?,?,?,?,?)",
            (box.name, box.profile, json.dumps(box.connection), box.data_dir, box.durable_dir,
             box.rate, box.state, box.created, box.down_at, json.dumps(box.extra)),
        )
        self._changed()

    def find_box(self, name: str) -> Box | None:
        row = self.db.execute("SELECT * FROM boxes WHERE name=?", (name,)).fetchone()
        return _box(row) if row else None

    def box(self, name: str) -> Box:
        found = self.find_box(name)
        if found is None:
            names = [b.name for b in self.boxes()]
            if hint := did_you_mean(name, names):
                raise UserError(f"no box named {name!r}{hint} (`rgt ls --all` lists them)")
            raise UserError(f"no box named {name!r} (known: {', '.join(names) or 'none yet'}); "
                            "register one with `rgt up NAME --profile P ...`")
        return found

    def boxes(self) -> list[Box]:
        return [_box(r) for r in self.db.execute("SELECT * FROM boxes ORDER BY created")]

    def update_box(self, name: str, **fields: Any) -> None:
        for key in ("connection", "extra"):
            if key in fields:
                fields[key] = json.dumps(fields[key])
        sets = ", ".join(f"{key}=?" for key in fields)
        self.db.execute(f"UPDATE boxes SET {sets} WHERE name=?", (*fields.values(), name))
        self._changed()

    # runs ------------------------------------------------------------------------------

    def add_run(self, run: Run) -> None:
        if (teardown := self.open_teardown(run.box)) is not None:
            raise UserError(f"box {run.box!r} is being torn down (`rgt down` began "
                            f"{time.strftime('%H:%M:%S', time.localtime(teardown.begun))} "
                            f"and did not finish): `rgt down {run.box}` finishes it; start "
                            "runs on another box")
        self.db.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
            (run.id, run.box, run.job, run.remote_dir, json.dumps(run.spec), run.status,
             run.exit_code, run.created, run.updated),
        )
        self._changed()

    def runs(self, box: str) -> list[Run]:
        """The runs of the box now registered under this name. A reused name is a new box
        (`up` after `down`): the old box's runs keep their rows untouched and are never
        probed on, or charged to, the new one — runs launched before it came up are not its."""
        rows = self.db.execute(
            "SELECT runs.* FROM runs JOIN boxes ON boxes.name = runs.box "
            "WHERE runs.box=? AND runs.created >= boxes.created ORDER BY runs.created", (box,))
        return [_run(r) for r in rows]

    def runs_by_box(self, statuses: tuple[str, ...] | None = None) -> dict[str, list[Run]]:
        """Every registered box's runs (as `runs` gives them), or only those in STATUSES, in
        one query: a board of a hundred boxes asks once, not once per box."""
        where = f" AND runs.status IN ({','.join('?' * len(statuses))})" if statuses else ""
        rows = self.db.execute(
            "SELECT runs.* FROM runs JOIN boxes ON boxes.name = runs.box "
            f"WHERE runs.created >= boxes.created{where} ORDER BY runs.created",
            tuple(statuses or ()))
        found: dict[str, list[Run]] = {}
        for row in rows:
            found.setdefault(row["box"], []).append(_run(row))
        return found

    def run(self, box: str, run_id: str | None = None) -> Run:
        """A run of the box by id (a unique prefix or suffix, @last, @-1 …: rgt.runids), or
        its newest run."""
        return runids.pick(self.runs(box), "@last" if run_id is None else run_id, box)

    def find_run(self, run_id: str) -> Run | None:
        """A run of any box, by its exact id (ids are unique across boxes)."""
        row = self.db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return _run(row) if row else None

    def next_attempt(self, run_id: str) -> Run | None:
        """The run that resumed `run_id` (on any box), if one did: its chain's next attempt."""
        row = self.db.execute(f"SELECT * FROM runs WHERE json_valid(spec) AND {_RESUMES} = ? "
                              "ORDER BY created LIMIT 1", (run_id,)).fetchone()
        return _run(row) if row else None

    def next_attempts(self) -> dict[str, str]:
        """Every run that was resumed -> the id of the run that resumed it (the first, as
        `next_attempt` says): one query for a whole listing."""
        found: dict[str, str] = {}
        for row in self.db.execute(f"SELECT id, {_RESUMES} FROM runs WHERE json_valid(spec) "
                                   f"AND {_RESUMES} IS NOT NULL ORDER BY created"):
            found.setdefault(row[1], row[0])
        return found

    def chain(self, run: Run) -> list[Run]:
        """Every attempt of `run`'s chain, first to last, across boxes (a cycle, which only a
        hand-edited store could hold, ends the walk)."""
        first, seen = run, {run.id}
        while (earlier := self.find_run(first.spec.get("resumes") or "")) is not None:
            if earlier.id in seen:
                break
            first = earlier
            seen.add(first.id)
        attempts, seen = [first], {first.id}
        while (later := self.next_attempt(attempts[-1].id)) is not None and later.id not in seen:
            attempts.append(later)
            seen.add(later.id)
        return attempts

    def update_run(self, run_id: str, **fields: Any) -> None:
        if "spec" in fields:
            fields["spec"] = json.dumps(fields["spec"])
        fields["updated"] = time.time()
        sets = ", ".join(f"{key}=?" for key in fields)
        self.db.execute(f"UPDATE runs SET {sets} WHERE id=?", (*fields.values(), run_id))
        self._changed()

    def forget_run(self, run_id: str) -> None:
        """Drop a run's row: only for a run that never started (rgt.lifecycle.intent)."""
        self.db.execute("DELETE FROM runs WHERE id=?", (run_id,))
        self._changed()

    # events and evidence ---------------------------------------------------------------

    def record(self, kind: str, detail: dict[str, Any], *, box: str | None = None,
               run: str | None = None) -> None:
        self.db.execute("INSERT INTO events (at, box, run, kind, detail) VALUES (?,?,?,?,?)",
                        (time.time(), box, run, kind, json.dumps(detail, default=str)))

    def edge_events(self, kind: str, box: str, run: str | None
                    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The first and the latest event of a kind for one run (None if there is none)."""
        query = ("SELECT * FROM events WHERE box=? AND run IS ? AND kind=? "
                 "ORDER BY id {} LIMIT 1")
        first = self.db.execute(query.format("ASC"), (box, run, kind)).fetchone()
        if first is None:
            return None
        last = self.db.execute(query.format("DESC"), (box, run, kind)).fetchone()
        return _event(first), _event(last)

    def latest_event(self, kind: str, box: str, run: str | None) -> dict[str, Any] | None:
        """The latest event of a kind for one run (one indexed lookup)."""
        row = self.db.execute("SELECT * FROM events WHERE box=? AND run IS ? AND kind=? "
                              "ORDER BY id DESC LIMIT 1", (box, run, kind)).fetchone()
        return None if row is None else _event(row)

    def add_evidence(self, kind: str, box: str, ok: bool, detail: dict[str, Any],
                     run: str | None = None) -> None:
        self.db.execute(
            "INSERT INTO evidence (at, box, run, kind, ok, detail) VALUES (?,?,?,?,?,?)",
            (time.time(), box, run, kind, int(ok), json.dumps(detail, default=str)))
        self._changed()

    # teardowns: `rgt down`'s journal -------------------------------------------------

    def begin_teardown(self, box: Box, plan: dict[str, Any], steps: list[str]
                       ) -> TeardownRecord:
        with self.batch():  # two `down`s at once: the second sees the first's, never two
            if (other := self.open_teardown(box.name)) is not None:
                raise UserError(
                    f"another `rgt down {box.name}` began at "
                    f"{time.strftime('%H:%M:%S', time.localtime(other.begun))} (still running, "
                    f"or cut short): let it end, then `rgt down {box.name}` finishes it")
            self.db.execute(
                "INSERT INTO teardowns (box, box_created, begun, plan, steps) "
                "VALUES (?,?,?,?,?)", (box.name, box.created, time.time(),
                                       json.dumps(plan, default=str), json.dumps(steps)))
        found = self.open_teardown(box.name)
        assert found is not None
        return found

    def open_teardown(self, box_name: str) -> TeardownRecord | None:
        """The unfinished teardown of the box now registered under this name, if any."""
        row = self.db.execute(
            "SELECT teardowns.* FROM teardowns JOIN boxes ON boxes.name = teardowns.box "
            "WHERE teardowns.box=? AND teardowns.box_created = boxes.created "
            "AND teardowns.finished IS NULL ORDER BY teardowns.id DESC LIMIT 1",
            (box_name,)).fetchone()
        if row is None:
            return None
        return TeardownRecord(row["id"], row["box"], row["box_created"], row["begun"],
                              json.loads(row["plan"]), json.loads(row["steps"]),
                              json.loads(row["done"]), row["finished"])

    def teardown_step_done(self, teardown: TeardownRecord, step: str, what: str) -> None:
        teardown.done[step] = what
        self.db.execute("UPDATE teardowns SET done=? WHERE id=?",
                        (json.dumps(teardown.done), teardown.id))
        self._changed()

    def void_teardown(self, teardown: TeardownRecord, why: str) -> None:
        """Close a teardown whose step refused before doing anything: the box stays as it was
        and the next `down` judges it afresh instead of finishing this one."""
        teardown.done["void"] = why
        teardown.finished = time.time()
        self.db.execute("UPDATE teardowns SET done=?, finished=? WHERE id=?",
                        (json.dumps(teardown.done), teardown.finished, teardown.id))
        self._changed()

    def finish_teardown(self, teardown: TeardownRecord) -> None:
        """Part of the batch that marks the box down: both or neither."""
        teardown.finished = time.time()
        self.db.execute("UPDATE teardowns SET finished=? WHERE id=?",
                        (teardown.finished, teardown.id))
        self._changed()

    def latest_verdicts(self, kind: str) -> dict[tuple[str, str | None], bool]:
        """(box, run) -> whether its latest evidence of this kind was ok, for every run that
        has some: one query where a listing would ask `latest_evidence` once per run."""
        rows = self.db.execute(
            "SELECT box, run, ok FROM evidence WHERE id IN (SELECT MAX(id) FROM evidence "
            "WHERE kind=? GROUP BY box, run)", (kind,))
        return {(row["box"], row["run"]): bool(row["ok"]) for row in rows}

    def latest_evidence(self, kind: str, box: str, run: str | None = None) -> Evidence | None:
        row = self.db.execute(
            "SELECT * FROM evidence WHERE kind=? AND box=? AND run IS ? ORDER BY id DESC LIMIT 1",
            (kind, box, run),
        ).fetchone()
        if row is None:
            return None
        return Evidence(row["at"], row["box"], row["run"], row["kind"], bool(row["ok"]),
                        json.loads(row["detail"]))


# A run's `resumes` (the attempt it continues), as the runs_by_resumes index is built on it:
# a query must spell it the same for SQLite to use the index.
_RESUMES = "json_extract(spec, '$.resumes')"


BOX_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def check_box_name(name: str) -> None:
    """A box name becomes a directory name (a local box's scratch, which `down` deletes) and a
    word on command lines: letters, digits, `_`, `.`, `-`; no `/`, no leading dot."""
    if not BOX_NAME.match(name):
        raise UserError(f"box name {name!r} is not allowed: use letters, digits, '_', '.' and "
                        "'-' (starting with a letter or digit, at most 63 characters)")


def _box(row: sqlite3.Row) -> Box:
    return Box(row["name"], row["profile"], json.loads(row["connection"]), row["data_dir"],
               row["durable_dir"], row["rate"], row["state"], row["created"], row["down_at"],
               json.loads(row["extra"]))


def _event(row: sqlite3.Row) -> dict[str, Any]:
    return {**dict(row), "detail": json.loads(row["detail"])}


def _run(row: sqlite3.Row) -> Run:
    return _StoredRun(row["id"], row["box"], row["job"], row["remote_dir"],
                      _SpecText(row["spec"]), row["status"], row["exit_code"], row["created"],
                      row["updated"])


class _SpecText(str):
    """A run's spec as the store holds it: JSON not decoded yet."""


class _StoredRun(Run):
    """A run read from the store, its spec decoded on first use. Listings read thousands of
    runs (`rgt runs`, `ls`, `top`) and the spec of few; decoding every one was most of their
    time (bench/many_runs.py). Otherwise a Run: same fields, equality and repr."""

    @property  # type: ignore[override]
    def spec(self) -> dict[str, Any]:
        if isinstance(self._spec, _SpecText):
            self._spec = json.loads(self._spec)
        return self._spec

    @spec.setter
    def spec(self, value: dict[str, Any]) -> None:
        self._spec = value

    def __eq__(self, other: object) -> bool:  # a Run read back equals the Run written
        if not isinstance(other, Run):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(Run))
