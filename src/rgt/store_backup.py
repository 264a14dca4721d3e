"""The store's safety net: a missing, emptied or damaged state.db is named and restored from a
backup rgt keeps itself, never read as "no boxes yet".

SQLite reads a 0-byte file as an empty database, so a store emptied by a crash, a full disk or
a sync tool would list no boxes while its boxes bill on; a truncated or garbled one fails every
query. So:

- after each change of a box, a run, evidence or a teardown, `take_backup` copies the store
  with SQLite's backup API into a temporary file, checks the copy (`PRAGMA quick_check`) and
  renames it over STATE.bak: the backup is always whole, and a store damaged on disk is caught
  there instead of overwriting the last good backup;
- at open, `check_at_open` reads the file's 100-byte header (no query, so `rgt ls` stays fast):
  missing, empty, not SQLite, or shorter than its header says → the damaged file is moved aside
  (never deleted), the backup restored, and one line on stderr says so; with no backup, one
  line names the file and what to do. No store and no backup is a fresh install;
- damage only a query meets (a garbled page in the middle) surfaces as sqlite3.DatabaseError:
  `recover_midway` moves the file aside, restores, and asks for the command again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rgt.errors import UserError

MAGIC = b"SQLite format 3\x00"
SIDE_FILES = ("-wal", "-shm")  # a WAL database's companions: they belong to that very file


class StoreDamaged(UserError):
    """The store could not be read and was not (or could not be) restored."""


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def header_problem(path: Path) -> str | None:
    """What is wrong with the store file, judged from its size and 100-byte header alone."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    if size == 0:
        return "empty (0 bytes)"
    with open(path, "rb") as file:
        head = file.read(100)
    page = int.from_bytes(head[16:18], "big") if len(head) == 100 else 0
    page = 65536 if page == 1 else page
    if not head.startswith(MAGIC) or len(head) < 100 or page < 512 or page & (page - 1):
        return "not a SQLite database"
    pages = int.from_bytes(head[28:32], "big")
    # The header's page count is trusted only where SQLite trusts it (change counter at 24 ==
    # version-valid-for at 92), and only with no WAL: a checkpoint cut short may leave page 1
    # ahead of the file's length while the WAL still holds every page.
    wal = path.with_name(path.name + "-wal")
    if pages and head[24:28] == head[92:96] and not _has_bytes(wal) and size < pages * page:
        return f"truncated ({size} of its {pages * page} bytes)"
    return None


def check_at_open(path: Path, schema: str) -> None:
    """Before the store is opened: restore a missing or damaged one from its backup (saying so
    on stderr), or raise `StoreDamaged`. A missing store with no backup is a fresh install:
    made with `schema` in a temporary file and renamed into place, so no crash can leave an
    empty store to be mistaken for a damaged one."""
    problem = header_problem(path)
    if problem is None:
        return
    with _locked(path):
        problem = header_problem(path)  # another rgt may have restored it meanwhile
        if problem is None:
            return
        if problem == "missing" and not backup_of(path).exists():
            _set_aside(path, companions_only=True)  # a WAL left by a deleted store is not ours
            _create(path, schema)
            return
        _say(restore(path, problem))


def restore(path: Path, problem: str) -> str:
    """Move the damaged store aside and put its backup in its place; return the line that
    says so. Raises `StoreDamaged` where there is no usable backup."""
    backup = backup_of(path)
    if not backup.exists():
        raise StoreDamaged(
            f"rgt's state store {path} is {problem} and rgt has no backup of it ({backup}): "
            "boxes recorded there may still bill, so check your platforms' consoles; then move "
            f"it aside (mv {path} {path}.damaged) and rgt starts a new one")
    staged = _staged_copy(backup, path)
    moved = _set_aside(path, companions_only=problem == "missing")
    os.replace(staged, path)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(backup.stat().st_mtime))
    if problem == "missing":
        return f"rgt's state store {path} was missing: restored rgt's backup of it from {when}"
    return (f"rgt's state store {path} was {problem}: moved it to {moved} (kept, not deleted) "
            f"and restored rgt's backup of it from {when}")


def recover_midway(db: sqlite3.Connection, path: Path, err: sqlite3.DatabaseError
                   ) -> StoreDamaged:
    """A query met damage the header did not show: restore the backup and return the error to
    raise (the command stopped part way, as if the laptop had died there)."""
    db.close()  # SQLite removes "<store>-wal" by name on close: not after a restore put one back
    with _locked(path):
        if _quick_check(path) == "ok":
            return StoreDamaged(f"rgt's state store {path} was damaged ({err}) and another rgt "
                                "restored it meanwhile; run the command again")
        line = restore(path, f"damaged ({err})")
    return StoreDamaged(f"{line}; run the command again")


def take_backup(db: sqlite3.Connection, path: Path) -> str | None:
    """Copy the store to its backup: into a temporary file, checked, then renamed over the old
    backup, so a crash or a full disk leaves the previous backup whole. Returns None, or the
    damage the check found in the store itself (the previous backup is then kept)."""
    backup = backup_of(path)
    temporary = path.with_name(f".{backup.name}.{os.getpid()}.tmp")
    try:
        copy = sqlite3.connect(temporary)
        try:
            # a scratch file until renamed: no journal of its own, one fsync below instead of
            # SQLite's several (what a change costs is mostly fsyncs)
            copy.execute("PRAGMA journal_mode=OFF")
            copy.execute("PRAGMA synchronous=OFF")
            db.backup(copy)
            verdict = str(copy.execute("PRAGMA quick_check").fetchone()[0])
        finally:
            copy.close()
        if verdict == "ok":
            _fsync(temporary)
    except sqlite3.OperationalError as err:  # a full disk, a read-only directory
        _remove(temporary)
        _say(f"warning: could not update rgt's backup of its state ({backup}: {err}); the "
             "change itself is recorded in the store")
        return None
    except sqlite3.DatabaseError as err:  # the backup API met a page it could not read
        verdict = str(err)
    if verdict != "ok":  # the backup API copies pages as they are: the store is damaged
        _remove(temporary)
        return verdict
    os.replace(temporary, backup)
    return None


def damaged_since_backup(path: Path, damage: str) -> None:
    """Say that the store failed its check after a change: the change is only in it."""
    backup = backup_of(path)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(backup.stat().st_mtime)) \
        if backup.exists() else "none"
    _say(f"warning: rgt's state store {path} fails SQLite's check ({damage}); its last good "
         f"backup (from {when}) was kept: copy {path} somewhere safe, what changed since is "
         "only there")


def _create(path: Path, schema: str) -> None:
    made = path.with_name(f".{path.name}.new.{os.getpid()}")
    db = sqlite3.connect(made)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(schema)
    finally:
        db.close()  # the last connection of a WAL database folds its WAL in and removes it
    os.replace(made, path)


def _staged_copy(backup: Path, path: Path) -> Path:
    """The backup copied beside the store and checked: ready to be renamed into place."""
    staged = path.with_name(f".{path.name}.restore.{os.getpid()}")
    shutil.copyfile(backup, staged)
    verdict = _quick_check(staged)
    for suffix in SIDE_FILES:  # checking it may have left a WAL of the copy's own
        _remove(staged.with_name(staged.name + suffix))
    if verdict != "ok":
        _remove(staged)
        raise StoreDamaged(
            f"rgt's state store {path} cannot be read and its backup {backup} is damaged too "
            f"({verdict}): boxes recorded there may still bill, so check your platforms' "
            f"consoles; then move both aside (mv {path} {path}.damaged) and rgt starts anew")
    return staged


def _quick_check(path: Path) -> str:
    try:
        db = sqlite3.connect(path)
        try:
            return str(db.execute("PRAGMA quick_check").fetchone()[0])
        finally:
            db.close()
    except sqlite3.DatabaseError as err:
        return str(err)


def _set_aside(path: Path, *, companions_only: bool = False) -> Path:
    """Rename the store (and its WAL files, which belong to it alone) to a dated name beside
    it; returns the new name of the store. Nothing is deleted."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    count = 1
    while any(Path(f"{aside}{s}").exists() for s in ("", *SIDE_FILES)):
        count += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{count}")
    for suffix in ("", *SIDE_FILES) if not companions_only else SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    return aside


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One rgt at a time restores: two commands started together see the damage once."""
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _fsync(path: Path) -> None:
    """On disk before the rename: a crash must not leave a backup with holes in it."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _has_bytes(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def _remove(path: Path) -> None:
    """Remove a temporary file of rgt's own making."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _say(line: str) -> None:
    # plain stderr: the store is opened before (and without) the CLI's Rich consoles
    print(line if line.startswith("warning:") else f"note: {line}", file=sys.stderr)
