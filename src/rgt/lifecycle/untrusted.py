"""Everything rgt reads back from a box, parsed and validated here before any other code uses it.

The box is someone else's machine (DESIGN.md, "The trust boundary"), so its manifests, the
state it reports and the tree a pull brings back are hostile input. This module is the one
place that turns them into values the rest of rgt may use:

- **Manifests** (`read_manifest`): the JSON Lines file `rgt.onbox.manifest` writes, read one
  line at a time (a 1,000,000-entry manifest never sits in memory). Each entry is typed
  (path: str, bytes: int >= 0, sha256: 64 hex digits; or a symlink with its target) and its
  path shaped: relative, no ``..``/``.``/empty part, no NUL, at most MAX_PATH characters and
  MAX_PART per part. Entries must come in strictly increasing order, which makes a duplicate
  an error found with O(1) memory. A bad entry is a problem naming it, never silently used.
- **Run state** (`check_state`): the status and fields `pull` and `down` act on, typed.
- **Pulled trees** (`sweep_links`): after every transfer, whatever engine moved it, a pulled
  tree keeps no symlink that leads outside it — or that does not resolve at all (a loop, a
  dangling link). They are removed and reported. The sweep only reads links (lstat,
  readlink); it never opens what they point to. Files are then read with `open_inside`,
  which refuses a symlink in the last component and anything but a regular file.
- **Completeness** is the laptop's call, not the manifest's: `pull_verify.verify_pulled` asks the
  spec (declared outputs, checkpoint home) and the run's final state what must be there.

Where rgt writes its own files: never inside a tree the box controls. The evidence
(`PULL_VERIFIED.json`) and the manifests fetched for it live in
``RGT_HOME/evidence/<box>/<run>/`` (`evidence_dir`), where only rgt writes, and are written
with O_CREAT|O_EXCL|O_NOFOLLOW to a fresh temporary name, then renamed (`write_private`). The
one file rgt adds to a pull directory — a run's log under ``logs/`` — goes in the same way,
after `sweep_links`, into a ``logs`` that is checked to be a real directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.boxread import BoxGarbage, too_deep
from rgt.errors import UserError

MAX_PATH = 4096  # PATH_MAX on Linux; longer names cannot be files here anyway
MAX_PART = 255  # NAME_MAX (bytes) on Linux and macOS
MAX_LINE = 2 * MAX_PATH + 512  # one manifest entry, JSON-encoded with room for escapes
MANIFEST_VERSION = 2
SHA256 = re.compile(r"[0-9a-f]{64}")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
_DECODE = json.JSONDecoder().decode
STATUSES = frozenset({
    "starting", "running", "paused", "resuming", "succeeded", "failed", "cancelled",
    "preempted", "stopped", "vanished", "sync-failed", "pending", "queued", "unknown"})


def unsafe_path(rel: Any) -> str | None:
    """Why REL may not name a file inside a pull directory, or None when it may."""
    if not isinstance(rel, str) or not rel:
        return "not a non-empty string"
    if "\0" in rel:
        return "contains a NUL byte"
    if len(rel) > MAX_PATH:
        return f"longer than {MAX_PATH} characters"
    if rel.startswith("/") or _DRIVE.match(rel):
        return "an absolute path"
    for part in rel.split("/"):
        if part in ("", ".", ".."):
            return "has a '..', '.' or empty part: it could leave the pull directory"
        # a code point is at most 4 bytes in UTF-8: only a long part needs encoding
        if len(part) > MAX_PART // 4 and len(part.encode("utf-8", "surrogatepass")) > MAX_PART:
            return f"has a part longer than {MAX_PART} bytes"
    return None


def shown(rel: Any, limit: int = 120) -> str:
    """A box-supplied name as one safe line for a message (repr escapes control bytes)."""
    text = repr(rel) if not isinstance(rel, str) or not rel.isprintable() else rel
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass(frozen=True, slots=True)
class Entry:
    path: str  # relative to the pull directory (the manifest's prefix applied)
    bytes: int = 0
    sha256: str = ""
    link: str | None = None  # a symlink on the box: its target; it is not a file to hash
    mtime: float | None = None  # when the box says it was written: orders checkpoints only
    disk: int | None = None  # what a sparse file takes on the box's disk: a claim, for room


@dataclass
class Manifest:
    """One manifest file from the box, read as a stream. Iterate it once for its entries;
    afterwards `problems`, `missing`, `count` and `digest` hold what the stream said."""

    source: Path
    prefix: str = ""  # prepended to every path ("ckpt/" for the job's checkpoint home)
    created: float | None = None
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    count: int = 0
    total_bytes: int = 0
    digest: str = ""  # sha256 over the accepted entries: the store keeps this, not the list

    def __iter__(self) -> Iterator[Entry]:
        summer = hashlib.sha256()
        previous: str | None = None
        ended = False
        try:
            handle = open(self.source, "rb")  # noqa: SIM115  (closed in finally)
        except OSError as exc:
            raise UserError(f"cannot read the manifest fetched from the box ({self.source}): "
                            f"{exc.strerror}") from None
        try:
            header = _record(handle.readline(MAX_LINE + 1), 1)
            if not isinstance(header, dict) or header.get("manifest_version") != \
                    MANIFEST_VERSION:
                self.problems.append(f"{self.prefix or 'manifest'}: not an rgt manifest "
                                     f"(version {MANIFEST_VERSION} header expected)")
                return
            created = header.get("created")
            self.created = created if isinstance(created, (int, float)) else None
            # a line is read up to MAX_LINE + 1 bytes and no further: a 500 MB line is
            # refused after reading 8.7 KB of it, not after holding it whole
            for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE + 1), b""),
                                         start=2):
                if ended:
                    self.problems.append(f"manifest line {number}: data after its end")
                    return
                record = _record(raw, number)
                if isinstance(record, str):
                    self.problems.append(record)
                    return
                if record.get("end") is True:
                    ended = True
                    self._trailer(record)
                    continue
                entry = self._entry(record, previous)
                if entry is None:
                    continue
                previous = entry.path
                self.count += 1
                self.total_bytes += entry.bytes
                summer.update(f"{entry.path}\0{entry.bytes}\0{entry.sha256}\0{entry.link}\n"
                              .encode("utf-8", "surrogatepass"))
                yield entry
            if not ended:
                self.problems.append(f"{self.prefix or 'manifest'}: cut short (no end record); "
                                     "pull again")
        finally:
            handle.close()
            self.digest = summer.hexdigest()

    def _entry(self, record: dict, previous: str | None) -> Entry | None:
        rel = record.get("path")
        why = unsafe_path(rel)
        if why is not None:
            self.problems.append(f"manifest entry {shown(rel)}: {why}")
            return None
        path = self.prefix + rel
        if previous is not None and path <= previous:
            what = "listed twice" if path == previous else "out of order (a duplicate can hide)"
            self.problems.append(f"manifest entry {shown(path)}: {what}")
            return None
        link = record.get("link")
        if link is not None:
            if not isinstance(link, str) or "\0" in link or len(link) > MAX_PATH:
                self.problems.append(f"manifest entry {shown(path)}: a bad symlink target")
                return None
            return Entry(path, link=link)
        size, digest = record.get("bytes"), record.get("sha256")
        if type(size) is not int or size < 0 or not isinstance(digest, str) \
                or not SHA256.fullmatch(digest):
            self.problems.append(f"manifest entry {shown(path)}: bytes or sha256 malformed")
            return None
        mtime = record.get("mtime")  # a claim that only orders checkpoints; bad ones unknown
        good = type(mtime) in (int, float) and math.isfinite(mtime)
        disk = record.get("disk")  # said only of a sparse file; a lie only costs ENOSPC
        return Entry(path, size, digest, mtime=mtime if good else None,
                     disk=disk if type(disk) is int and 0 <= disk <= size else None)

    def _trailer(self, record: dict) -> None:
        missing = record.get("missing")
        if isinstance(missing, list) and all(isinstance(m, str) for m in missing):
            self.missing = [shown(m) for m in missing[:1000]]


def _record(raw: bytes, number: int) -> dict | str:
    if len(raw) > MAX_LINE:
        return f"manifest line {number}: longer than {MAX_LINE} bytes"
    try:  # rgt's manifests are UTF-8 (ASCII, in fact): no encoding sniffing per line
        value = _DECODE(raw.decode("utf-8"))
        too_deep(value, f"manifest line {number}", 4)  # an entry is one flat object
    except (RecursionError, BoxGarbage):
        return f"manifest line {number}: nested too deep to be a manifest entry"
    except (ValueError, UnicodeDecodeError):
        return f"manifest line {number}: not JSON"
    return value if isinstance(value, dict) else f"manifest line {number}: not an object"


def read_manifest(path: Path, prefix: str = "") -> Manifest:
    return Manifest(Path(path), prefix)


def check_state(state: Any) -> dict[str, Any]:
    """The fields of a run's state (as probed on the box) that pull and down act on, typed.
    Anything else the box said stays out of decisions."""
    if not isinstance(state, dict):
        raise UserError("the box reported a run state that is not an object; it cannot be "
                        "trusted to decide what to pull")
    status = state.get("status")
    if status not in STATUSES:
        raise UserError(f"the box reported an unknown run status {shown(status)}")
    ended = state.get("ended")
    sync = state.get("sync") if isinstance(state.get("sync"), dict) else {}
    missing = sync.get("missing")
    return {**state, "status": status,
            "ended": ended if isinstance(ended, (int, float)) else None,
            "exit_code": state.get("exit_code") if type(state.get("exit_code")) is int else None,
            "sync": {"error": str(sync.get("error") or "")[:500],
                     "missing": [shown(m) for m in missing[:100]]
                     if isinstance(missing, list) else []}}


def _inside(root: str, real: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def sweep_links(root: Path) -> list[str]:
    """Remove every symlink under ROOT that leads outside it or does not resolve, and say
    which. Nothing is followed: directories are walked by lstat, links read with readlink and
    resolved with realpath (lstat and readlink of the path they name, never an open)."""
    top = os.path.realpath(root)
    removed: list[str] = []
    todo = [str(root)]
    while todo:
        directory = todo.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                todo.append(entry.path)
            elif entry.is_symlink():
                rel = os.path.relpath(entry.path, root)
                target = "?"
                try:
                    target = os.readlink(entry.path)
                    real = os.path.realpath(entry.path, strict=True)
                    why = None if _inside(top, real) else "leads outside the pull directory"
                except OSError:
                    why = "does not resolve (a loop or a dangling link)"
                if why:
                    os.unlink(entry.path)
                    removed.append(f"{shown(rel)} -> {shown(target)}: {why}; removed")
    return sorted(removed)


def open_inside(root: Path, rel: str) -> int:
    """A read-only descriptor for the regular file ROOT/REL; OSError otherwise. REL must have
    passed `unsafe_path` and ROOT `sweep_links` (so no part of REL leads out); the last part
    is never followed (O_NOFOLLOW) and a fifo cannot block the pull (O_NONBLOCK)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(os.path.join(root, rel), flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(f"{rel}: not a regular file")
    return fd


def evidence_dir(home: Path, box: str, run: str) -> Path:
    """Where a pull's evidence lives: under RGT_HOME, which no box can write to."""
    for name in (box, run):
        if unsafe_path(name) or "/" in name:
            raise UserError(f"refusing the name {shown(name)} as an evidence directory")
    path = home / "evidence" / box / run
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write PATH atomically without following a symlink anyone planted: a fresh temporary
    name created exclusively (O_EXCL|O_NOFOLLOW), then renamed over PATH (a rename replaces a
    link, it does not write through it)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def real_subdir(root: Path, name: str) -> Path:
    """ROOT/NAME as a real directory: a symlink or file the box put there is removed first."""
    path = root / name
    try:
        mode = os.lstat(path).st_mode
        if not stat.S_ISDIR(mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
    path.mkdir(exist_ok=True)
    return path


# ----------------------------------------------------------------------------- a run's log

MAX_METRIC_KEY = 64  # longer "keys" are not metric names a person reads off a chart
MAX_SERIES = 50  # a log naming more distinct numeric keys than this is not plotted past it
MAX_RECORDS = 100_000  # metric lines kept (evenly thinned past this): plenty for any chart
MAX_LINE_BYTES = 64 * 1024  # a longer line is not a metrics line; it is skipped unread


@dataclass
class MetricLog:
    """The metrics a run's log reports, checked: keys printable and short, values finite.

    `records` are (step or None, epoch or None, {key: value}) in log order, evenly thinned to
    at most MAX_RECORDS (the last line always kept); `lines` counts the metric lines seen."""

    records: list[tuple[int | None, float | None, dict[str, float]]] = field(
        default_factory=list)
    lines: int = 0
    skipped_keys: set[str] = field(default_factory=set)


def read_metric_log(data: bytes) -> MetricLog:
    """Parse a run's log (bytes the box wrote, or their pulled copy) with the probe's own
    metric parser (`rgt.onbox.probe.parse_metrics`: HF dicts, JSON lines, `step=N loss=X`),
    keeping only what is safe to show and plot."""
    from rgt.onbox.probe import _clean, parse_metrics  # the parser the probe runs on the box

    log = MetricLog()
    stride, seen, last = 1, 0, None
    keys: set[str] = set()
    for raw in data.split(b"\n"):
        if len(raw) > MAX_LINE_BYTES or not raw.strip():
            continue
        found = parse_metrics(_clean(raw.decode("utf-8", "replace")))
        if found is None:
            continue
        values = {}
        for key, value in found["values"].items():
            ok_key = 0 < len(key) <= MAX_METRIC_KEY and key.isprintable()
            number = float(value) if isinstance(value, (int, float)) else None
            if not ok_key or number is None or not math.isfinite(number) or abs(number) > 1e300:
                log.skipped_keys.add(shown(key, 40))
                continue
            if key not in keys and len(keys) >= MAX_SERIES:
                continue
            keys.add(key)
            values[key] = number
        if not values:
            continue
        step = found.get("step")
        epoch = values.get(found.get("epoch_key") or "epoch")  # `epoch 2`, `[ep 2]`
        record = (step if type(step) is int else None, epoch, values)
        log.lines += 1
        last = record
        if seen % stride == 0:
            log.records.append(record)
            if len(log.records) > MAX_RECORDS:  # thin evenly: every other kept line goes
                log.records = log.records[::2]
                stride *= 2
        seen += 1
    if last is not None and (not log.records or log.records[-1] is not last):
        log.records.append(last)
    return log
