"""`rgt doctor BOX [RUN]`: which known gotchas a run ran into, each with its evidence.

Two witnesses: the run's log, read line by line against every gotcha's detection rules (only
rules: a log is long, and a guess per line would be noise), and the box's probe, the same one
`watch` reads (disk and inode use, the runner's verdict and the gotchas it names). A box that
is down or does not answer cannot be probed; the log then comes from the last pull on this
machine, and the report says so.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle.watch import read_log, refresh
from rgt.profiles import find_gotcha
from rgt.profiles.search import Searcher
from rgt.store import Box, Run, Store
from rgt.transport import TransportError

LOG_LINES = 5000  # the log's tail that is read: where a crash and its cause are
FULL_PCT = 90.0  # a disk this full (bytes or inodes) is a finding
# A gotcha id's shape (U7, AD-DANGER, a platform's prefix and a number): what the probe names
# is then looked up in the catalog, and an id it lacks is dropped (`_add`)
_GOTCHA_REF = re.compile(r"\b(?:[A-Z][A-Z0-9]*[A-Z]\d+|U\d+|[A-Z]+-DANGER)\b")
_MAX_EVIDENCE_CHARS = 300


@dataclass
class Finding:
    id: str
    platform: str
    title: str
    evidence: str  # the line that shows it, verbatim (cut at _MAX_EVIDENCE_CHARS)
    where: str  # "log line 412", "probe: disks", "probe: verdict"
    count: int = 1  # how many log lines showed it


@dataclass
class Diagnosis:
    box: str
    run: str
    profile: str
    log_source: str  # "box", "pulled log <path>", or "none"
    probed: bool
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "findings": [asdict(f) for f in self.findings]}


def diagnose(store: Store, box_name: str, run_id: str | None = None,
             lines: int = LOG_LINES) -> Diagnosis:
    box = store.box(box_name)
    run = store.run(box.name, run_id)
    found = Diagnosis(box.name, run.id, box.profile, "none", probed=False)
    summary: dict[str, Any] | None = None
    log: str | None = None
    if box.state != "up":
        found.notes.append(f"box {box.name} is down: nothing to probe; reading the pulled log")
    else:
        try:
            summary = refresh(store, box, run)
            found.probed = True
            log = read_log(box, run, lines=lines)
            found.log_source = "box"
        except (TransportError, UserError) as err:
            found.notes.append(f"box {box.name} did not answer ({_one_line(err)}); "
                               "reading the pulled log instead")
    if log is None:
        log, found.log_source = _pulled_log(store, box, run, lines)
        if log is None:
            found.notes.append(f"no log: the box cannot be read and run {run.id} was never "
                               f"pulled here (`rgt pull {box.name} {run.id}` once it answers)")
    findings: dict[str, Finding] = {}
    searcher = Searcher(box.profile)
    for number, line in _numbered(log or "", lines):
        _from_log(findings, number, line, searcher)
    if summary is not None:
        _from_probe(findings, summary, box.profile)
    found.findings = sorted(findings.values(), key=lambda f: (f.where.startswith("log"), f.id))
    return found


def _numbered(log: str, lines: int) -> list[tuple[int, str]]:
    """(line number in what was read, line) for the log's last `lines` lines."""
    every = log.splitlines()[-lines:] if lines else log.splitlines()
    return [(i, line) for i, line in enumerate(every, 1) if line.strip()]


def _from_log(findings: dict[str, Finding], number: int, line: str, searcher: Searcher
              ) -> None:
    # The best rule hit for the box's platform only: "No space left on device" on a RunPod box
    # is RP11 first, and listing AD4 beside it would send the user to the wrong platform's fix.
    for hit in searcher.search(line, guesses=False, limit=1):
        seen = findings.get(hit.gotcha.id)
        if seen is not None:
            seen.count += 1
            continue
        findings[hit.gotcha.id] = Finding(hit.gotcha.id, hit.platform, hit.gotcha.title,
                                          line.strip()[:_MAX_EVIDENCE_CHARS],
                                          f"log line {number}")


def _from_probe(findings: dict[str, Finding], summary: dict[str, Any], profile: str) -> None:
    for path, disk in (summary.get("disks") or {}).items():
        if not isinstance(disk, dict):
            continue
        for key, label, ids in (("inodes_pct", "inodes", ("AD4", "U7")),
                                ("bytes_pct", "bytes", ("U7", "U6"))):
            pct = disk.get(key)
            if isinstance(pct, int | float) and pct >= FULL_PCT:
                gotcha_id = ids[0] if _applies(ids[0], profile) else ids[1]
                _add(findings, gotcha_id, f"{path}: {label} {pct:.0f}% used", "probe: disks")
    for cause in summary.get("causes") or []:
        for gotcha_id in _GOTCHA_REF.findall(str(cause)):
            _add(findings, gotcha_id, str(cause), "probe: verdict")


def _applies(gotcha_id: str, profile: str) -> bool:
    """Whether a gotcha speaks of this box: a universal one, or one of its own profile's (a
    full inode table is AD4 on the platform that caps inodes, U7 anywhere else)."""
    try:
        owner, _ = find_gotcha(gotcha_id)
    except UserError:
        return False
    return owner in ("universal", profile)


def _add(findings: dict[str, Finding], gotcha_id: str, evidence: str, where: str) -> None:
    if gotcha_id in findings:
        return
    try:
        platform, gotcha = find_gotcha(gotcha_id)
    except UserError:
        return  # an id the probe names that this catalog lacks: nothing to explain it with
    findings[gotcha_id] = Finding(gotcha_id, platform, gotcha.title,
                                  evidence[:_MAX_EVIDENCE_CHARS], where)


def _pulled_log(store: Store, box: Box, run: Run, lines: int) -> tuple[str | None, str]:
    """The log the last pull of this run brought to this machine (logs/<run-id>.log)."""
    pulled = store.latest_evidence("pull-verified", box.name, run.id)
    dest = (pulled.detail.get("dest") if pulled else None) or ""
    path = Path(dest) / "logs" / f"{run.id}.log" if dest else None
    if path is None or not path.is_file():
        return None, "none"
    with path.open("rb") as f:  # the tail only: a pulled log may be tens of MiB
        f.seek(0, 2)
        f.seek(max(0, f.tell() - (8 << 20)))
        text = f.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:]), f"pulled log {path}"


def _one_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
