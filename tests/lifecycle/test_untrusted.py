"""The trust boundary (rgt.lifecycle.untrusted) and pull's verification against hostile
manifests and trees: the laptop decides completeness, and nothing outside the pull directory
is read or written — checked with canary files planted outside (content, atime) and a listing
of everything outside before and after."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rgt.lifecycle import untrusted
from rgt.lifecycle.pull_verify import verify_pulled
from rgt.lifecycle.untrusted import read_manifest, sweep_links, write_private

SECRET = b"the laptop's private key\n"
SECRET_SHA = hashlib.sha256(SECRET).hexdigest()


def write_manifest(path: Path, entries: list, *, end: bool = True) -> Path:
    lines = [{"manifest_version": 2, "created": 1.0}] + entries
    lines += [{"end": True, "missing": []}] if end else []
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def entry(rel: str, data: bytes) -> dict:
    return {"path": rel, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_an_empty_manifest_does_not_verify_a_run_that_declared_outputs(tmp_path):
    """Item 3: before, an empty manifest verified '0 files, ok' and down allowed teardown."""
    (tmp_path / "pull").mkdir()
    empty = read_manifest(write_manifest(tmp_path / "m.jsonl", []))
    report = verify_pulled(tmp_path / "pull", empty, run_status="succeeded",
                           expected=[("out (model.pt)", "out/", "model.pt")])
    assert not report["ok"]
    assert report["problems"] == [
        "out (model.pt): declared, but nothing in the box's manifest matches it"]
    # a run that ended without succeeding: said, not held against down (issue 21)
    stopped = verify_pulled(tmp_path / "pull", read_manifest(tmp_path / "m.jsonl"),
                            run_status="preempted",
                            expected=[("out (model.pt)", "out/", "model.pt")])
    assert stopped["ok"] and "the run ended preempted" in stopped["warnings"][0]


def test_escaping_absolute_duplicate_and_malformed_entries_are_named(tmp_path):
    """Item 3: before, `../` and absolute entries were hashed where they pointed."""
    pull = tmp_path / "pull"
    (pull / "out").mkdir(parents=True)
    (pull / "out" / "a").write_bytes(b"a")
    outside = tmp_path / "secret"
    outside.write_bytes(SECRET)
    listed = write_manifest(tmp_path / "m.jsonl", [
        entry("out/a", b"a"), entry("out/a", b"a"), entry("../secret", SECRET),
        entry(str(outside), SECRET), {"path": "out/b", "bytes": -1, "sha256": "x"},
        entry("out/n\0ul", b""), entry("out/" + "x" * 300, b"")])
    report = verify_pulled(pull, read_manifest(listed), run_status="succeeded",
                           expected=[("out (a)", "out/", "a")])
    text = "\n".join(report["problems"])
    assert not report["ok"]
    assert "manifest entry out/a: listed twice" in text
    assert "manifest entry ../secret: has a '..'" in text
    assert f"manifest entry {outside}: an absolute path" in text
    assert "manifest entry out/b: bytes or sha256 malformed" in text
    assert "NUL" in text and "longer than 255 bytes" in text
    assert SECRET_SHA not in json.dumps(report)


def test_a_manifest_cut_short_or_not_rgts_fails(tmp_path):
    cut = write_manifest(tmp_path / "m.jsonl", [], end=False)
    report = verify_pulled(tmp_path, read_manifest(cut), run_status="succeeded")
    assert report["problems"] == ["manifest: cut short (no end record); pull again"]
    (tmp_path / "x.jsonl").write_text('{"files": []}\n')
    assert "not an rgt manifest" in verify_pulled(
        tmp_path, read_manifest(tmp_path / "x.jsonl"))["problems"][0]


def test_the_evidence_writer_never_writes_through_a_link(tmp_path):
    """Item 1: write_private replaces a planted link; it never writes to what it names."""
    target = tmp_path / "bashrc"
    target.write_text("original\n")
    (tmp_path / "PULL_VERIFIED.json").symlink_to(target)
    write_private(tmp_path / "PULL_VERIFIED.json", b"{}")
    assert target.read_text() == "original\n"
    assert not (tmp_path / "PULL_VERIFIED.json").is_symlink()


# ------------------------------------------------------------------------ property test

NAMES = st.sampled_from(["a", "b", "out", "ckpt", "..", ".", "", "x" * 300, "n\0ul", "dup"])
PATHS = st.one_of(
    st.lists(NAMES, min_size=1, max_size=4).map("/".join),
    st.sampled_from(["/etc/passwd", "{outside}/secret.txt", "../secret.txt", "sub/../../x"]),
    st.text(min_size=0, max_size=40))
TARGETS = st.sampled_from([
    "{outside}/secret.txt", "{outside}", "../secret.txt", "..", "../..", "sub/l/..",
    "sub/l/../secret.txt", "loop", "self", "out", "out/file", "/", "nowhere", "sub/l"])
LINK_AT = st.sampled_from(["l", "sub/l", "esc", "loop", "self", "out/link", "dup", "out/f2"])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.tuples(PATHS, st.booleans()), max_size=8),
       links=st.lists(st.tuples(LINK_AT, TARGETS), max_size=8))
def test_hostile_manifests_and_trees_never_touch_anything_outside(entries, links):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = base / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_bytes(SECRET)
        os.utime(outside / "secret.txt", (1_000_000, 1_000_000))
        (base / "secret.txt").write_bytes(SECRET)
        os.utime(base / "secret.txt", (1_000_000, 1_000_000))
        pull = base / "pull"
        (pull / "out").mkdir(parents=True)
        (pull / "sub").mkdir()
        (pull / "out" / "file").write_bytes(b"data")
        for at, target in links:  # the tree a box might send, links and all
            path = pull / at
            path.parent.mkdir(parents=True, exist_ok=True)
            if not os.path.lexists(path):
                os.symlink(target.replace("{outside}", str(outside)), path)
        before = snapshot(base, pull)
        records = []
        for rel, claim_secret in entries:
            rel = rel.replace("{outside}", str(outside))
            records.append(entry(rel, SECRET if claim_secret else b"data"))
        listed = write_manifest(base / "m.jsonl", records)

        removed = sweep_links(pull)
        report = verify_pulled(pull, read_manifest(listed), run_status="succeeded",
                               expected=[("out (file)", "out/", "file")],
                               files_list=base / "files.jsonl")

        # no name added or removed outside, nothing there written (size, mtime) or read (atime:
        # both canaries start with atime == mtime, so even relatime records a read)
        assert snapshot(base, pull, extra={"m.jsonl", "files.jsonl"}) == before
        for secret in (outside / "secret.txt", base / "secret.txt"):
            assert secret.stat().st_atime == 1_000_000 and secret.read_bytes() == SECRET
        for link in [p for p in pull.rglob("*") if p.is_symlink()]:
            real = os.path.realpath(link, strict=True)  # every link left resolves, inside
            assert (real + os.sep).startswith(os.path.realpath(pull) + os.sep), (link, removed)
        # nothing the box named outside was read: no record hashed the secret as matching
        assert not any(f.get("sha256_ok") and f["bytes"] == len(SECRET)
                       for f in report["files"]), report
        shutil.rmtree(pull)


def snapshot(base: Path, pull: Path, extra: set[str] = frozenset()) -> dict[str, tuple]:
    """Everything outside the pull directory: names, kinds, sizes, mtimes and atimes (lstat
    only: reading a canary here would itself change its atime)."""
    seen = {}
    for root, dirs, files in os.walk(base):
        if Path(root) == pull or pull in Path(root).parents:
            continue
        for name in dirs + files:
            path = Path(root) / name
            if path == pull or name in extra:
                continue
            st_ = path.lstat()
            # a directory's atime moves with this very listing: files' only
            atime = 0 if stat.S_ISDIR(st_.st_mode) else st_.st_atime_ns
            seen[str(path)] = (st_.st_mode, st_.st_size, st_.st_mtime_ns, atime)
    return seen


def test_unsafe_path_accepts_only_plain_relative_names():
    assert untrusted.unsafe_path("out/a.bin") is None
    for bad in ("", "/abs", "a/../b", "./a", "a//b", "a\0b", "x" * 5000, 3, None, "C:\\x"):
        assert untrusted.unsafe_path(bad) is not None, bad
