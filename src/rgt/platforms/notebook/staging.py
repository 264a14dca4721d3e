"""What Colab and Kaggle share: their "box" is a folder on this machine.

Neither platform has a shell rgt can reach. What rgt can reach is a folder here that the
platform fills: for Colab the user's Google Drive sync folder (Drive for desktop, or an rclone
mount), which the notebook writes through Google; for Kaggle a staging folder into which rgt
downloads each kernel version's output. So `connect` returns a `LocalTransport`, and the box's
directories are these folders: the lifecycle's push, manifest, pull and log reading work on
them unchanged, as on a local box.

What such a folder holds was written elsewhere (a Colab VM, a Kaggle kernel) and reached here
by a sync or a download: it is read with size limits, and a file is trusted to be whole only
when it matches the MANIFEST.jsonl written where it was made (`check_manifest`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
import sys
import time
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.onbox.probe import checkpoint_entries, log_facts
from rgt.remote.summary import summarize
from rgt.store import Box, Store
from rgt.transport import LocalTransport, Transport

MAX_STATE_BYTES = 1 << 20
MAX_MANIFEST_BYTES = 64 << 20
RISK_EVERY_S = 300  # how often watch re-measures what `rgt ls` shows as at risk
SHA256_HEX = frozenset("0123456789abcdef")


def local_transport(box: Box) -> Transport:
    """This machine, with the interpreter `rgt up` recorded (the one running rgt)."""
    return LocalTransport(python=box.extra.get("python") or sys.executable)


def read_json(path: Path, limit: int = MAX_STATE_BYTES) -> dict[str, Any] | None:
    """A JSON object written elsewhere: None when absent, half-synced, too big or not an
    object (a sync folder shows a file's name before its bytes)."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _safe_rel(value: Any) -> str | None:
    if not isinstance(value, str) or not value or "\\" in value or "\0" in value:
        return None
    norm = posixpath.normpath(value)
    if norm != value or norm.startswith(("/", "../")) or norm == "..":
        return None
    return norm


def manifest_entries(path: Path) -> list[dict[str, Any]] | None:
    """The file entries of a MANIFEST.jsonl (rgt.onbox.manifest's format: a head line, one line
    per file {path, bytes, sha256}, an end line). None when absent or not complete (no end
    line: still syncing); a malformed line is refused in one line."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size > MAX_MANIFEST_BYTES:
        raise UserError(f"{path} is larger than {MAX_MANIFEST_BYTES >> 20} MiB; rgt will not "
                        "read it as a manifest")
    entries, ended = [], False
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = json.loads(raw)
            except ValueError:
                return None  # cut mid-line by a sync that has not finished
            if not isinstance(line, dict):
                raise UserError(f"{path} line {number} is not an object")
            if line.get("end") is True:
                ended = True
                continue
            if "manifest_version" in line:
                continue
            rel, count, digest = _safe_rel(line.get("path")), line.get("bytes"), line.get("sha256")
            if rel is None or type(count) is not int or count < 0 or not isinstance(digest, str) \
                    or len(digest) != 64 or not set(digest) <= SHA256_HEX:
                raise UserError(f"{path} line {number} is not a manifest entry (path, bytes, "
                                "sha256): rgt will not pull by it")
            entries.append({"path": rel, "bytes": count, "sha256": digest})
    return entries if ended else None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_manifest(root: Path, entries: list[dict[str, Any]], prefix: str = "") -> list[str]:
    """What under `root` differs from the manifest (entries whose path starts with `prefix`):
    one phrase per file, empty when all are whole. Symlinks count as absent."""
    wrong = []
    for entry in entries:
        if not entry["path"].startswith(prefix):
            continue
        path = root / entry["path"]
        try:
            st = path.lstat()
        except OSError:
            wrong.append(f"{entry['path']} (not there yet)")
            continue
        if path.is_symlink() or not path.is_file():
            wrong.append(f"{entry['path']} (not a plain file)")
        elif st.st_size != entry["bytes"]:
            wrong.append(f"{entry['path']} ({st.st_size} of {entry['bytes']} bytes)")
        elif sha256_of(path) != entry["sha256"]:
            wrong.append(f"{entry['path']} (sha256 differs)")
    return wrong


def read_log(path: Path, *, lines: int | None, since_byte: int | None, what: str) -> str:
    """A log file here: all of it, its last `lines`, or from byte `since_byte` on."""
    if lines is not None and lines < 0:
        raise UserError(f"--tail/-n takes a number of lines >= 0, not {lines}")
    try:
        with open(path, "rb") as f:
            if since_byte is not None:
                f.seek(max(0, int(since_byte)))
            data = f.read()
    except OSError:
        if since_byte is not None:
            return ""
        raise UserError(f"no log yet for {what}") from None
    text = data.decode("utf-8", "replace")
    if lines is not None and since_byte is None:
        if lines == 0:
            return ""
        text = "".join(text.splitlines(keepends=True)[-lines:])
    return text


def summary(status: str, *, state: dict[str, Any], log: Path, home: str | None,
            cause: str = "", advice: str = "", heartbeat_age: float | None = None
            ) -> dict[str, Any]:
    """The flat summary every verb reads (`rgt.remote.summary`), from what the folder holds:
    the status rgt decided, the times and exit code the platform's own file gave, the log's
    metrics and the checkpoint home's newest entry."""
    def number(key: str) -> float | None:
        value = state.get(key)
        return float(value) if type(value) in (int, float) else None

    exit_code = state.get("exit_code")
    report = {
        "state": {"status": status, "started": number("started"), "ended": number("ended"),
                  "exit_code": exit_code if type(exit_code) is int else None},
        "verdict": {"status": status, "summary": cause, "action": advice},
        "log": log_facts(str(log)),
        "checkpoints": checkpoint_entries(home) if home and os.path.isdir(home) else [],
        "heartbeat_age_s": heartbeat_age,
    }
    out = summarize(report)
    if cause and status in ("running", "succeeded"):
        out["causes"] = [cause]  # what rgt knows beyond the status (a new attempt, a sync)
    return out


def record_risk(store: Store, box: Box, key: str, what: str | None) -> None:
    """Keep what `rgt ls` shows under the box as at risk (Drive space, GPU quota), measured
    now; ls reads it from the store, asking no platform (it must stay fast)."""
    fresh = store.box(box.name)
    risks = {r["key"]: r for r in fresh.extra.get("at_risk") or [] if isinstance(r, dict)}
    if what:
        risks[key] = {"key": key, "what": what, "at": time.time()}
    else:
        risks.pop(key, None)
    fresh.extra["at_risk"] = list(risks.values())
    store.update_box(box.name, extra=fresh.extra)
    box.extra = fresh.extra


def risk_is_stale(box: Box, key: str) -> bool:
    for risk in box.extra.get("at_risk") or []:
        if isinstance(risk, dict) and risk.get("key") == key:
            return time.time() - float(risk.get("at") or 0) > RISK_EVERY_S
    return True


def tree_bytes(root: Path) -> tuple[int, int]:
    """(bytes, files) under root, links not followed."""
    total = files = 0
    for here, _dirs, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(here, name)).st_size
                files += 1
    return total, files


def gib(count: float) -> str:
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 * 0.1 else f"{count / 2**20:.1f} MiB"


def with_box_resources(box: Box, spec: Any) -> Any:
    """The spec with `rgt render`'s resource flags (kept on its stand-in box) as defaults."""
    asked = {k: v for k, v in (box.extra.get("resources") or {}).items()
             if getattr(spec.resources, k, None) in (None, False)}
    if not asked:
        return spec
    return spec.model_copy(update={"resources": spec.resources.model_copy(update=asked)})


def waiting(info: dict[str, Any], what: str | None, since: float | None = None) -> bool:
    """Say in a run's platform record (`platform_run`) what it waits for outside rgt (a person
    to open its notebook, a place in Kaggle's queue), or clear it (`what` None). `rgt ls` and
    `rgt top` read it from the store as {"what", "since"} and show how long it has waited.
    Returns whether the record changed (the caller saves it)."""
    if what is None:
        return info.pop("waiting", None) is not None
    said = info.get("waiting") or {}
    if said.get("what") == what:
        return False
    info["waiting"] = {"what": what, "since": float(said.get("since") or since or time.time())}
    return True


def words(seconds: float) -> str:
    """A wait as people say it: 40 s, 12 min, 3 h 05 min."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
