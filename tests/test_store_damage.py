"""The laptop's record survives damage (issue 27 item 7): a store zeroed, truncated, garbled or
deleted is restored from the backup rgt keeps itself and named in one line, never read as "no
boxes yet"; the damaged file is kept beside it; with no backup, one line names the file and
what to do (exit 2). Through the real CLI, with RGT_HOME a temporary directory."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from boxkit import Rgt

from rgt import store_backup


@pytest.fixture(scope="module")
def two_boxes(tmp_path_factory) -> Path:
    """An RGT_HOME with boxes a and b up, made once: each test damages its own copy (only
    `ls` reads it, which never touches the boxes' directories)."""
    home = tmp_path_factory.mktemp("template") / "rgt-home"
    cli = Rgt(home)
    cli.ok("up", "a")
    cli.ok("up", "b")
    return home


@pytest.fixture
def cli(two_boxes, tmp_path) -> Rgt:
    home = tmp_path / "rgt-home"
    shutil.copytree(two_boxes, home)
    return Rgt(home)


def zeroed(data: bytes) -> bytes:
    return b""


def truncated(data: bytes) -> bytes:
    return data[:len(data) // 2]


def garbled(data: bytes) -> bytes:
    """Random bytes over every page but the first (the schema) and the last: the header
    still reads as SQLite's, so only a query finds the damage."""
    noise = random.Random(27).randbytes(len(data) - 2 * 4096)
    return data[:4096] + noise + data[-4096:]


def all_zeros(data: bytes) -> bytes:
    return bytes(len(data))


def box_names(cli: Rgt) -> list[str]:
    return [b["name"] for b in json.loads(cli.ok("ls", "--json").stdout)["boxes"]]


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("damage", [zeroed, truncated, all_zeros])
def test_a_damaged_store_is_restored_from_its_backup_and_kept_aside(cli, damage):
    store = cli.home / "state.db"
    broken = damage(store.read_bytes())
    store.write_bytes(broken)
    first = cli("ls", "--json")
    assert first.returncode == 0, first.stderr
    [line] = notes(first.stderr)
    assert line.startswith(f"note: rgt's state store {store} was ") and "restored" in line
    assert [b["name"] for b in json.loads(first.stdout)["boxes"]] == ["a", "b"]
    [aside] = cli.home.glob("state.db.damaged-*")
    assert str(aside) in line and aside.read_bytes() == broken, "kept as it was, not deleted"
    second = cli("ls")
    assert second.returncode == 0 and second.stderr == "", "restored once, then quiet"


def test_a_garbled_page_met_by_a_query_is_named_restored_and_the_next_command_works(cli):
    store = cli.home / "state.db"
    store.write_bytes(garbled(store.read_bytes()))
    first = cli("ls")
    assert first.returncode == 2 and "Traceback" not in first.stderr, first.stderr
    [line] = notes(first.stderr)
    assert "was damaged (database disk image is malformed)" in line
    assert "restored rgt's backup" in line and line.endswith("run the command again")
    assert len(list(cli.home.glob("state.db.damaged-*"))) >= 1
    assert box_names(cli) == ["a", "b"]


def test_a_deleted_store_is_restored(cli):
    (cli.home / "state.db").unlink()
    first = cli("ls", "--json")
    assert first.returncode == 0
    assert notes(first.stderr) == [f"note: rgt's state store {cli.home / 'state.db'} was "
                                   f"missing: restored rgt's backup of it from "
                                   + first.stderr.split(" from ")[-1].strip()]
    assert [b["name"] for b in json.loads(first.stdout)["boxes"]] == ["a", "b"]


@pytest.mark.parametrize("damage", [zeroed, garbled])
def test_no_backup_is_one_line_naming_the_file_never_no_boxes(cli, damage):
    store = cli.home / "state.db"
    (cli.home / "state.db.bak").unlink()
    broken = damage(store.read_bytes())
    store.write_bytes(broken)
    for verb in (("ls",), ("down", "a", "--yes")):
        done = cli(*verb)
        assert done.returncode == 2 and "No boxes yet" not in done.stdout, done.stdout
        [line] = notes(done.stderr)
        assert str(store) in line and "no backup" in line and "Traceback" not in line
        assert "consoles" in line and f"mv {store}" in line
    assert store.read_bytes() == broken, "never deleted nor rewritten"


def test_a_damaged_backup_too_is_named(cli):
    store = cli.home / "state.db"
    store.write_bytes(b"")
    backup = cli.home / "state.db.bak"
    backup.write_bytes(garbled(backup.read_bytes()))
    done = cli("ls")
    assert done.returncode == 2
    [line] = notes(done.stderr)
    assert "its backup" in line and "damaged too" in line and str(store) in line


def test_a_fresh_install_has_no_boxes_and_starts_its_backup(tmp_path):
    cli = Rgt(tmp_path / "fresh")
    done = cli.ok("ls")
    assert "No boxes yet" in done.stdout and done.stderr == ""
    assert (cli.home / "state.db.bak").exists()


def test_the_backup_follows_each_change_of_a_box(cli):
    cli.ok("up", "c")
    cli.ok("up", "d")
    cli.ok("down", "d", "--yes")
    (cli.home / "state.db").write_bytes(b"")
    listed = json.loads(cli.ok("ls", "--all", "--json").stdout)["boxes"]
    assert {b["name"]: b["state"] for b in listed} == {"a": "up", "b": "up", "c": "up",
                                                        "d": "down"}


def test_a_backup_is_a_checked_copy_never_a_damaged_one(cli):
    """The backup API copies pages as they are: a store damaged on disk must not overwrite
    the last good backup."""
    store, backup = cli.home / "state.db", cli.home / "state.db.bak"
    good = backup.read_bytes()
    store.write_bytes(garbled(store.read_bytes()))
    db = sqlite3.connect(store)
    try:
        damage = store_backup.take_backup(db, store)
    finally:
        db.close()
    assert damage == "database disk image is malformed"
    assert backup.read_bytes() == good
    assert not list(cli.home.glob(".state.db.bak.*")), "no temporary copy left behind"
