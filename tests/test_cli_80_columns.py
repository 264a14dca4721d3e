"""`rgt ls` and `rgt audit` in an 80-column terminal (issue 13 item 10): no line wider than 80
cells, no name cut, at most three lines per box, boxes that are down hidden unless --all; audit in
one unit family (GiB) without Python reprs, and never probing a box that is down."""

from __future__ import annotations

import re
import time

import pytest
from cli import rgt
from rich.cells import cell_len

from rgt.profiles import load_profile, profile_names
from rgt.store import Box, Run, Store

NARROW = {"COLUMNS": "80"}
LONG_NAME = "a-rather-long-box-name-for-the-training-cluster-0042"  # 51 of the 63 allowed


def _fits(text: str) -> list[str]:
    lines = text.splitlines()
    wide = [line for line in lines if cell_len(line) > 80]
    assert not wide, wide
    return lines


@pytest.fixture
def boxes(tmp_path):
    """A box on every platform (a long-named one too), runs, a down one, a billing down one."""
    store = Store(tmp_path / "state.db")
    now = time.time()
    names = []
    for i, profile in enumerate(profile_names()):
        name = f"{profile}-{i}"
        extra = {"instance_id": "0920582c7ff041399e34823a0be62549"} if profile == "lambda" else {}
        store.add_box(Box(name, profile, {"host": "10.0.0.1"}, "/d", "/dd", 2.5, "up",
                          now - 7200, extra=extra))
        store.add_run(Run(f"job-{i}", name, "job", "/d/rgt/x", {}, "running", None, now - 60,
                          now - 30))
        names.append(name)
    store.add_box(Box(LONG_NAME, "generic-ssh", {"host": "h"}, "/d", "/dd", 0.4, "up", now - 99))
    store.add_box(Box("gone", "vastai", {"host": "h"}, "/d", "/dd", 0.3, "down", now - 999,
                      now - 500))
    store.add_box(Box("lam-fs", "lambda", {"host": "h"}, "/d", "/dd", 2.0, "down", now - 999,
                      now - 500, {"still_billing": [
                          "filesystem ckpts (100.0 GiB at $0.20/GiB/month = $20.00/month) until "
                          "you delete it in the console or through the API (LAM6)"]}))
    store.db.close()
    return {"RGT_HOME": str(tmp_path), **NARROW}, [*names, LONG_NAME, "lam-fs"]


def test_ls_fits_80_columns_and_cuts_no_name(boxes):
    env, shown = boxes
    listing = rgt("ls", env=env)
    assert listing.returncode == 0, listing.stderr
    lines = _fits(listing.stdout)
    assert lines[0].split() == ["BOX", "PROFILE", "STATE", "UP", "SPENT", "RUNS", "INSTANCE"]
    starts = []
    for name in shown:  # every name whole, as a word of its own
        (where,) = [i for i, line in enumerate(lines) if re.match(rf"{re.escape(name)}( |$)",
                                                                    line)]
        starts.append(where)
    starts.sort()
    ends = starts[1:] + [len(lines) - 1]  # the last line counts the boxes left out
    assert all(end - start <= 3 for start, end in zip(starts, ends, strict=True)), lines
    for profile in profile_names():
        assert any(re.search(rf"\s{re.escape(profile)}\s", line) for line in lines), profile
    assert not any(line.startswith("gone") for line in lines)  # down: hidden
    assert lines[-1] == "1 down, not shown: rgt ls --all"
    assert "still billing: filesystem ckpts" in listing.stdout  # down, but it still bills
    everything = _fits(rgt("ls", "--all", env=env).stdout)
    assert any(line.startswith("gone ") and " down " in line for line in everything)


def test_ls_says_when_every_box_is_down(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_box(Box("old", "local", {}, "/d", "/dd", None, "down", time.time() - 99,
                      time.time() - 9))
    store.db.close()
    listing = rgt("ls", env={"RGT_HOME": str(tmp_path)})
    assert "No box is up (1 down: rgt ls --all lists them)" in listing.stdout


def test_audit_fits_80_columns_in_gib_without_reprs(tmp_path):
    env = {"RGT_HOME": str(tmp_path), **NARROW}
    assert rgt("up", "b", env=env).returncode == 0
    audit = rgt("audit", "b", env=env)
    assert audit.returncode in (0, 1), audit.stderr
    lines = _fits(audit.stdout)
    text = "\n".join(lines)
    assert "GiB" in text and not re.search(r"\d (GB|MB|KB)\b", text), text
    for repr_mark in ("['", "{'", "=None", "=False", "=True", "None,", "files="):
        assert repr_mark not in text, (repr_mark, text)
    assert re.search(r"^cpus \d+  ram [\d.]+ GiB", text, re.M)

    assert rgt("down", "b", "--yes", env=env).returncode == 0
    for args in (("audit", "b"), ("audit", "b", "--json")):
        down = rgt(*args, env=env)
        assert down.returncode == 2 and down.stdout == ""
        assert down.stderr.strip().splitlines() == [
            down.stderr.strip().splitlines()[0]] and "'b' is down" in down.stderr


def test_profiles_fit_80_columns_with_nothing_cut(tmp_path):
    listing = rgt("profiles", env={"RGT_HOME": str(tmp_path), **NARROW})
    assert listing.returncode == 0, listing.stderr
    lines = _fits(listing.stdout)
    words = {word for line in lines for word in line.split()}
    assert "…" not in listing.stdout
    for name in profile_names():  # each name whole, at the start of its row
        assert any(line.startswith(f"{name} ") for line in lines), name
    for name in profile_names():  # every meter-stop verb and detach word is there whole
        facts = load_profile(name).facts
        for word in (facts.meter_stop_verb + " " + facts.detach_primitive).split():
            assert word in words, (name, word)


def test_ckpt_ls_fits_80_columns_with_whole_file_names(tmp_path):
    from rgt.ckpt import Checkpointer

    ckpt = Checkpointer(tmp_path / "c", keep_last=3, format="pickle")
    for step in (10, 20, 30):
        ckpt.save({"step": step, "blob": b"x" * 5000}, step, metric=0.5)
    (tmp_path / "c" / "ckpt-0000000040.pt").write_bytes(b"half")  # killed before its sidecar
    listing = rgt("ckpt", "ls", str(tmp_path / "c"), env=NARROW)
    assert listing.returncode == 0, listing.stderr
    lines = _fits(listing.stdout)
    for step in (10, 20, 30, 40):
        assert any(f" ckpt-{step:010d}.pt " in line for line in lines), (step, lines)
    assert "…" not in listing.stdout
