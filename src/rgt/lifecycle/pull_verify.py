"""Checking what arrived (`verify_pulled`): every file of the box's manifests re-hashed here,
every checkpoint checked by its format (`rgt.ckpt.formats`) and judged as a unit, every
declared output matched. The same check serves `rgt pull`, `rgt verify` (`rgt.lifecycle.reverify`)
and a resume's carry of checkpoints (`rgt.lifecycle.resume`).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import posixpath
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rgt.ckpt import formats, newest
from rgt.lifecycle.untrusted import Entry, Manifest, open_inside

# A run that ended without succeeding never wrote (or synced) its declared outputs; its
# checkpoints and log are its results, so missing outputs are said, not held against `down`.
STOPPED = ("failed", "cancelled", "preempted", "stopped", "vanished")

FILES_INLINE = 10_000  # file records kept in PULL_VERIFIED.json itself; all go to files_list
HASH_BUF = 1 << 20
RESERVED = ("ckpt", "logs")  # what rgt itself puts at the top of a pull


def verify_pulled(local: Path, manifests: Manifest | list[Manifest], *,
                  run_status: str | None = None, outputs: list[str] | None = None,
                  expected: list[tuple[str, str, str]] | None = None,
                  files_list: Path | None = None) -> dict[str, Any]:
    """Re-hash every manifest file here and check every checkpoint by its format
    (`rgt.ckpt.formats`), streaming the manifests. A problem fails the pull: a malformed,
    escaping or duplicate manifest entry, a copy that is not the box's file, a declared output
    (`expected`, from the spec; None where no spec judges, as for a carry of checkpoints: then
    the box's own list of patterns it found nothing for) that nothing matched in a succeeded
    run. A checkpoint damaged on the box itself, a stopped run's missing outputs and a symlink
    on the box are warnings or notes. Each distinct message is said once. Nothing outside
    LOCAL is read: run `untrusted.sweep_links(local)` first."""
    sources = [manifests] if isinstance(manifests, Manifest) else list(manifests)
    judged = expected is not None  # a spec says what a complete pull holds (even nothing)
    expected = list(expected or [])
    met: set[int] = set()
    files, bad, damaged, notes, verdicts = [], [], [], [], {}
    counts = {"files": 0, "bytes": 0, "failed": 0, "links": 0}
    buf = bytearray(HASH_BUF)
    out = files_list.open("w", encoding="utf-8", errors="surrogateescape") if files_list \
        else None
    try:
        for source in sources:
            for entry in source:
                _meet(entry.path, expected, met)
                if entry.link is not None:
                    counts["links"] += 1
                    notes.append((entry.path, "a symlink on the box, not a file: a link "
                                  "that stays inside is copied as a link, any other is not"))
                    continue
                record = _verify_one(local, entry, buf, bad, damaged, notes, verdicts)
                counts["files"] += 1
                counts["bytes"] += entry.bytes
                counts["failed"] += not record["ok"]
                if out is not None:
                    out.write(json.dumps(record) + "\n")
                if len(files) < FILES_INLINE:
                    files.append(record)
    finally:
        if out is not None:
            out.close()
    manifest_problems = [p for s in sources for p in s.problems]
    named = f" ({', '.join(outputs)})" if outputs else ""  # `out` holds the spec's outputs
    box_missing = [m for s in sources for m in s.missing]
    missing = [f"{label}: declared, but nothing in the box's manifest matches it"
               for i, (label, _, _) in enumerate(expected) if i not in met]
    if not judged:  # no spec to judge by (a carry of checkpoints): the box's own list
        missing = [f"{m}{named if m == 'out' else ''}: declared but absent on the box"
                   for m in box_missing]
    warnings = formats.said_once(damaged)
    if run_status in STOPPED and missing:
        warnings += [f"{m} — the run ended {run_status}; its checkpoints and log are its "
                     "results" for m in missing]
        missing = []
    checkpoints = _checkpoints(local, verdicts)
    warnings += [f"{c['path']}: {c['note']}" for c in checkpoints
                 if not c["ok"] and c.get("note")]
    problems = manifest_problems[:100] + formats.said_once(bad) + missing
    return {"ok": not problems, "verified_at": time.time(), "files": files, "counts": counts,
            "files_list": str(files_list) if files_list else None,
            "manifest_digests": [s.digest for s in sources],
            "expected": [label for label, _, _ in expected],
            "problems": problems, "warnings": warnings, "notes": formats.said_once(notes),
            "checkpoints": checkpoints, "manifest_created": sources[0].created if sources
            else None}


def _meet(path: str, expected: list[tuple[str, str, str]], met: set[int]) -> None:
    """Mark the expectations PATH satisfies: it, or a directory above it, matches the glob."""
    for i, (_, under, pattern) in enumerate(expected):
        if i in met or not path.startswith(under):
            continue
        if not under and path.split("/", 1)[0] in RESERVED:
            continue  # outputs at the top of the pull: rgt's ckpt/ and logs/ are not them
        rel = path[len(under):]
        parts = rel.split("/")
        if any(fnmatch.fnmatchcase("/".join(parts[:n]), pattern)
               for n in range(1, len(parts) + 1)):
            met.add(i)


def _verify_one(local: Path, entry: Entry, buf: bytearray, bad, damaged, notes, verdicts
                ) -> dict[str, Any]:
    record: dict[str, Any] = {"path": entry.path, "bytes": entry.bytes}
    try:
        fd = open_inside(local, entry.path)
    except OSError:
        bad.append((entry.path, "listed on the box, missing here (or not a regular file)"))
        return {**record, "ok": False}
    size, digest = hash_fd(fd, buf)
    record["sha256_ok"] = digest == entry.sha256 and size == entry.bytes
    if not record["sha256_ok"]:
        bad.append((entry.path, "hash or size differs from the box's manifest"))
    kind = formats.kind_of_name(posixpath.basename(entry.path))
    verdict = formats.check_file(local / entry.path, kind, hashed=record["sha256_ok"]) \
        if kind is not None and record["sha256_ok"] else None
    if verdict is not None:
        verdicts[entry.path] = verdict
        record.update(loads=verdict.ok, load_detail=verdict.note,
                      checked=list(verdict.checked), kind=verdict.kind)
        if not verdict.ok:
            # the copy equals the box's file, so the damage is on the box too (a save cut
            # short by a kill): keeping the box saves nothing, but the user must know
            damaged.append((entry.path, f"damaged on the box too: {verdict.note}"))
        elif "not unpickled" in verdict.note:
            notes.append((entry.path, verdict.note))
    record["ok"] = record["sha256_ok"]
    return record


def hash_fd(fd: int, buf: bytearray) -> tuple[int, str]:
    """(bytes, sha256) of an open file, read with one reused buffer; closes FD."""
    h = hashlib.sha256()
    view = memoryview(buf)
    size = 0
    try:  # readv into the one buffer: no file object, no allocation per file
        while n := os.readv(fd, (buf,)):
            h.update(view[:n])
            size += n
    finally:
        os.close(fd)
    return size, h.hexdigest()


def _checkpoints(local: Path, verdicts: dict[str, formats.Verdict]) -> list[dict[str, Any]]:
    """The pulled checkpoints as units, each built from its files' verdicts (nothing checked
    twice) and damaged when any of them is: in the checkpoint home (ckpt/) the units of
    `rgt.ckpt.newest`, elsewhere an HF checkpoint-N, accelerate or DCP directory, or a
    .ckpt/.pt/rgt.ckpt file that says its step."""
    dirs: dict[str, dict[str, formats.Verdict]] = {}  # a directory unit → its files' verdicts
    files: dict[str, list[tuple[str, formats.Verdict]]] = {}  # a file unit → its files
    steps: dict[str, int] = {}
    for rel, verdict in verdicts.items():
        unit = newest.unit_of(rel.removeprefix("ckpt/")) if rel.startswith("ckpt/") else None
        parent = str(Path(rel).parent)
        if unit is not None and unit.is_dir:
            key = f"ckpt/{unit.key}"
        elif formats.kind_of(local / parent) in formats.DIR_KINDS:
            key, unit = parent, None
        else:
            if unit is not None:
                files.setdefault(f"ckpt/{unit.key}", []).append((rel, verdict))
                steps[f"ckpt/{unit.key}"] = unit.step
            elif verdict.kind in ("rgt.ckpt", "lightning", "torch") and verdict.step is not None:
                files.setdefault(rel, []).append((rel, verdict))
            continue
        dirs.setdefault(key, {})[rel[len(key) + 1:]] = verdict
        if unit is not None:
            steps[key] = unit.step
    units = [_file_unit(parts, steps.get(key)) for key, parts in files.items()]
    units += [_dir_unit(local, key, parts, steps.get(key)) for key, parts in dirs.items()]
    return sorted(units, key=lambda u: (u["step"] is None, u["step"] or 0, u["path"]))


def _file_unit(parts: list[tuple[str, formats.Verdict]], step: int | None) -> dict[str, Any]:
    """A checkpoint file (with an rgt.ckpt save's sidecar, when it has one) as one unit."""
    rel, main = next(((r, v) for r, v in parts if v.kind != "rgt.ckpt-sidecar"), parts[0])
    bad = [v for _, v in parts if not v.ok]
    return {"path": rel, "kind": main.kind, "step": main.step if main.step is not None
            else step, "ok": not bad, "checked": list(main.checked),
            "note": "; ".join(f"{v.path.name}: {v.note}" for v in bad) if main.ok else ""}


def _dir_unit(local: Path, key: str, parts: dict[str, formats.Verdict], step: int | None
              ) -> dict[str, Any]:
    """A checkpoint directory as one unit: its layout checked (`formats.check_dir`) when it
    is one rgt knows, and damaged when any file under it is."""
    nested = [v for name, v in parts.items() if "/" in name]
    if formats.kind_of(local / key) in formats.DIR_KINDS:
        whole = formats.check_dir(local / key, hashed=True, parts={
            name: v for name, v in parts.items() if "/" not in name})
        kind, ok, checked, note = whole.kind, whole.ok, list(whole.checked), whole.note
        step = whole.step if whole.step is not None else step
    else:  # a directory named with a step, of no layout rgt knows: its files speak
        kind, ok, checked = "directory", True, sorted({c for v in parts.values()
                                                      for c in v.checked})
        note = f"{len(parts)} checkpoint files verified"
        nested = list(parts.values())
    bad = [v for v in nested if not v.ok]
    if bad:
        said = "; ".join(formats.said_once((os.path.relpath(v.path, local / key), v.note)
                                           for v in bad))
        note = f"{note}; {said}" if not ok else said
        ok = False
    return {"path": key, "kind": kind, "step": step, "ok": ok, "checked": checked,
            "note": note}


class LeftOut(Manifest):
    """A manifest read with the entries LEAVES picks taken out of what this pull verifies: the
    checkpoints left on the box (`pull_checkpoints.in_units`), or the box's own record of its
    copy (`SYNC_MANIFEST.json`, the runner's list of what it copied to the durable tier:
    evidence, kept with rgt's in ``RGT_HOME/evidence/<box>/<run>/manifests/``, not a result in
    the user's tree). The entries taken out are kept in `held` as the stream passes them;
    problems, digest and the rest are the whole manifest's. Each one reads its file afresh."""

    def __init__(self, manifest: Manifest, leaves: Callable[[Entry], bool]) -> None:
        super().__init__(manifest.source, manifest.prefix)
        self.leaves: Callable[[Entry], bool] = leaves
        self.held: list[Entry] = []

    def __iter__(self) -> Iterator[Entry]:
        for entry in super().__iter__():
            if self.leaves(entry):
                self.held.append(entry)
            else:
                yield entry
