"""Room first (issue 28): a pull knows from the box's manifests how many bytes it will write
before it writes one, so it compares them with the free space of the destination and of
rgt's evidence directory, and refuses in one line when they do not fit. Its order puts what
matters most first (declared outputs, then the newest checkpoint, then everything else), so a
box whose sizes lie runs the disk out only after those arrived; and when a pull gives up, the
transfer engine's hidden partial files are removed, so the disk is not left full, and the
user is told what arrived and what did not.

A sparse file on the box (the manifest says what it takes on the box's disk, `Entry.disk`)
costs what it takes there: the engine leaves its holes as holes (`rgt.onbox.xfer`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rgt.errors import UserError
from rgt.lifecycle.untrusted import Entry
from rgt.onbox import xfer
from rgt.onbox.audit import human

BIG_FILE = 64 << 20  # a file of the checkpoint home that is not a checkpoint and this big
# comes after the newest checkpoint ("everything else": a dataset cache, a stray dump)
PAGE = 4096
EVIDENCE_PER_FILE = 1024  # a file's record in PULL_FILES.jsonl and PULL_VERIFIED.json
EVIDENCE_BASE = 1 << 20  # the report itself, the box's records, a margin
FIRST_PASS_RULES = 5000  # past this many exclude rules the engine's matching costs more
# than the order is worth: the home then comes in one pass


def disk_need(entry: Entry) -> int:
    """Bytes ENTRY takes here once pulled: all of them, or for a sparse file what it takes on
    the box (its holes stay holes here) and a page at the end of each of its ranges."""
    if entry.link is not None:
        return 0
    if entry.disk is None or entry.bytes < (1 << 20):  # small: its blocks, whatever it says
        return entry.bytes
    return min(entry.bytes, entry.disk + PAGE * xfer.range_count(entry.bytes))


def complete_here(local: Path, entry: Entry) -> bool:
    """Whether ENTRY is already here as a file of its size (an earlier pull brought it: the
    engine does not fetch it again). Never follows a symlink."""
    try:
        st = os.lstat(local / entry.path)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == entry.bytes


@dataclass
class Part:
    """One of the pull's parts, in the order it fetches them."""

    label: str
    files: int = 0
    here: int = 0  # files of it already complete here
    need: int = 0  # bytes it still writes here

    def add(self, local: Path, entry: Entry) -> int:
        if entry.link is not None:
            return 0
        self.files += 1
        if complete_here(local, entry):
            self.here += 1
            return 0
        need = disk_need(entry)
        self.need += need
        return need


@dataclass
class Room:
    """What a pull will write, by part, and by checkpoint unit for `--checkpoints N`."""

    local: Path
    evidence: Path
    parts: list[Part] = field(default_factory=list)
    unit_need: dict[str, int] = field(default_factory=dict)  # kept units, newest first
    kept: list[str] = field(default_factory=list)
    entries: dict[str, list[Entry]] = field(default_factory=dict)  # part label -> its files

    def part(self, label: str) -> Part:
        for part in self.parts:
            if part.label == label:
                return part
        self.parts.append(Part(label))
        self.entries[label] = []
        return self.parts[-1]

    def count(self, label: str, entry: Entry, unit: str | None = None) -> None:
        need = self.part(label).add(self.local, entry)
        if entry.link is None:
            self.entries[label].append(entry)
        if unit is not None:
            self.unit_need[unit] = self.unit_need.get(unit, 0) + need

    @property
    def need(self) -> int:
        return sum(p.need for p in self.parts)

    @property
    def files(self) -> int:
        return sum(p.files for p in self.parts)


def partial_bytes(local: Path) -> int:
    """Bytes the engine's partial files hold under LOCAL: an interrupted pull's, which the
    next one resumes (and so writes no second time)."""
    return sum(size for size in _partials(local, remove=False))


def remove_partials(local: Path) -> int:
    """Remove the hidden partial files (``.rgt-partial/``) the transfer engine left under
    LOCAL; the bytes of disk this frees. Nothing is followed: only real directories of that
    name, which no file from the box may carry (`xfer.check_name`), are emptied."""
    return sum(_partials(local, remove=True))


def _partials(local: Path, *, remove: bool) -> Iterable[int]:
    for top, dirs, _ in os.walk(local):
        if xfer.PARTIAL_DIR not in dirs:
            continue
        dirs.remove(xfer.PARTIAL_DIR)  # never walked into: its files are all counted here
        where = os.path.join(top, xfer.PARTIAL_DIR)
        try:
            if not stat.S_ISDIR(os.lstat(where).st_mode):
                continue
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            path = os.path.join(where, name)
            try:
                st = os.lstat(path)
                if remove:
                    os.unlink(path)
            except OSError:
                continue
            yield getattr(st, "st_blocks", 0) * 512 if stat.S_ISREG(st.st_mode) else 0
        if remove:
            with contextlib.suppress(OSError):
                os.rmdir(where)


def _free(path: Path) -> int:
    return shutil.disk_usage(path).free


def check_room(room: Room, run_id: str) -> None:
    """Refuse, before anything is written, a pull whose bytes do not fit where they go: the
    destination's disk and the evidence directory's (one disk when they share it)."""
    credit = partial_bytes(room.local)  # an interrupted pull's partials: resumed, not rewritten
    need = max(0, room.need - credit)
    evidence_need = EVIDENCE_BASE + EVIDENCE_PER_FILE * room.files
    free = _free(room.local)
    shared = os.stat(room.local).st_dev == os.stat(room.evidence).st_dev
    evidence_free = free if shared else _free(room.evidence)
    short_dest = need + (evidence_need if shared else 0) > free
    short_evidence = not shared and evidence_need > evidence_free
    if not short_dest and not short_evidence:
        return
    here = sum(p.here for p in room.parts)
    already = f" ({here} file(s) already here from an earlier pull)" if here else ""
    said = [f"not enough room to pull run {run_id}: it writes {human(need)} into "
            f"{room.local}{already}"]
    if shared:
        said.append(f"and {human(evidence_need)} of evidence into {room.evidence}, on the same "
                    f"disk, which has {human(free)} free")
    else:
        said.append(f"whose disk has {human(free)} free" if short_dest else
                    f"which fits ({human(free)} free)")
        if short_evidence:
            said.append(f"and {human(evidence_need)} of evidence into {room.evidence}, whose "
                        f"disk has {human(evidence_free)} free")
    if short_dest:
        todo = (f"free space on the disk of {room.local} or give --dest a directory on "
                f"{'another disk' if shared else 'a disk with room'}")
    else:  # only rgt's own record lacks room: a --dest elsewhere would not help
        todo = f"free space on the disk of {room.evidence} (RGT_HOME, rgt's record)"
    fewer = _fewer(room, free - (evidence_need if shared else 0) + credit)
    if fewer is not None and short_dest:
        todo += f", or bring fewer checkpoints: --checkpoints {fewer[0]} needs {human(fewer[1])}"
    raise UserError(", ".join(said) + f"; {todo} — nothing was written")


def _fewer(room: Room, free: int) -> tuple[int, int] | None:
    """(N, bytes) of the most of the newest checkpoints that fit FREE, when fewer than the
    pull would bring do (at least one stays: the newest is what a run is resumed from)."""
    total = room.need - sum(room.unit_need.get(k, 0) for k in room.kept)
    best = None
    for n, key in enumerate(room.kept[:-1], start=1):
        total += room.unit_need.get(key, 0)
        if total > free:
            break
        best = (n, total)
    return best


def gave_up(room: Room, run_id: str, box: str, error: BaseException) -> UserError:
    """The one line a pull that gave up says: why, what arrived, what did not, and that its
    partial files are gone (so the disk is not left full)."""
    freed = remove_partials(room.local)
    arrived, missing = [], []
    for part in room.parts:
        if not part.files:
            continue
        here = sum(1 for e in room.entries[part.label] if complete_here(room.local, e))
        (arrived if here == part.files else missing).append(
            f"{part.label} {here}/{part.files} files")
    why = re.sub(r"\s+", " ", str(error)).strip() or type(error).__name__
    where = room.local
    try:
        free = f", {human(_free(where))} free now"
    except OSError:
        free = ""
    return UserError(
        f"pull of run {run_id} gave up: {why}; arrived: {', '.join(arrived) or 'nothing'}; "
        f"not arrived: {', '.join(missing) or 'nothing'}; removed {human(freed)} of its "
        f"partial files from {where}{free}; nothing was verified or recorded — free space "
        f"or give --dest elsewhere, then `rgt pull {box} {run_id}` (what arrived is not "
        "fetched again)")
