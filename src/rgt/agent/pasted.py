"""`doctor` on a pasted log: the gotchas a log shows, without a box or a run.

An agent often holds a log rgt did not start (a job the user ran by hand, a CI failure). The
log is read as `rgt doctor` reads a run's: its last lines, each against every gotcha's
detection rules only (a guess per line would be noise over a long log), the best rule hit per
line for the named platform, counted per gotcha with the first line that showed it.
"""

from __future__ import annotations

from typing import Any

from rgt.lifecycle.doctor import LOG_LINES
from rgt.profiles.search import Searcher
from rgt.textsafe import log_text

MAX_PASTE_CHARS = 4 * 1024 * 1024  # the tail beyond this is where a crash is not
_EVIDENCE_CHARS = 300


def diagnose_text(log: str, profile: str) -> dict[str, Any]:
    """{"profile", "lines_read", "findings": [{id, platform, title, evidence, where, count}]}."""
    text = log_text(log[-MAX_PASTE_CHARS:])
    lines = text.splitlines()[-LOG_LINES:]
    searcher = Searcher(profile)
    findings: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        for hit in searcher.search(line, guesses=False, limit=1):
            seen = findings.get(hit.gotcha.id)
            if seen is not None:
                seen["count"] += 1
                continue
            findings[hit.gotcha.id] = {
                "id": hit.gotcha.id, "platform": hit.platform, "title": hit.gotcha.title,
                "evidence": line.strip()[:_EVIDENCE_CHARS], "where": f"line {number}",
                "count": 1}
    return {"profile": profile, "lines_read": len(lines), "findings": list(findings.values()),
            "then": "symptom, cause and fix of one: tool gotcha(id)"}
