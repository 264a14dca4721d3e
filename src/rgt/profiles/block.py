"""Gotchas in a paste of many lines (a traceback, a `kubectl get pods` table, a log file).

Users paste what their terminal showed, not the one decisive line: a prompt and the error, a
traceback with the exception at its end, NCCL's first WARN and the twenty INFO lines that
follow, a table whose header says nothing and whose one row says `OOMKilled`. So a paste is
searched line by line, each line through the same rules as a single pasted line, and each
gotcha found is reported once, with the line that shows it best (the longest rule match: the
most specific wording), the earliest such line on a tie (the first error is the cause; later
lines are its follow-ons).

Guesses are made only for a paste short enough to be one failure (`_GUESS_LINES`), and only when
no line fired a rule: on a log, a guess per line would be noise. A log file is read from its
end (`TAIL_LINES`): where a run's crash and its cause are.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rgt.profiles.search import GotchaHit, Searcher

TAIL_LINES = 5000  # of a log file: the end, where a crash and its cause are
_GUESS_LINES = 40  # a paste longer than this is a log: rules only
_ENOUGH = 3
_MAX_LINE = 2000  # a longer line is cut: a minified blob or a progress bar without newlines


def search_lines(searcher: Searcher, lines: list[str], *, guesses: bool = True,
                 limit: int | None = None) -> list[GotchaHit]:
    """The gotchas the lines show, best first, each once and with its line (`line_no` from 1
    within `lines`)."""
    best: dict[str, GotchaHit] = {}
    for number, raw in enumerate(lines, 1):
        line = raw[:_MAX_LINE]
        if not line.strip():
            continue
        for hit in searcher.rule_hits(line):
            kept = best.get(hit.gotcha.id)
            if kept is None or hit.score > kept.score:
                best[hit.gotcha.id] = replace(hit, line_no=number, line=raw.strip())
    hits = sorted(best.values(), key=lambda h: (-h.score, h.line_no))
    shown = sum(1 for line in lines if line.strip())
    if guesses and len(hits) < _ENOUGH and shown <= _GUESS_LINES:
        hits += _guesses(searcher, lines, {h.gotcha.id for h in hits})[:_ENOUGH - len(hits)]
    return hits[:limit] if limit else hits


def _guesses(searcher: Searcher, lines: list[str], answered: set[str]) -> list[GotchaHit]:
    """The closest guesses any one line of a short paste earns, best first, each gotcha once.
    Shared words count only where no rule fired on any line (`answered` is empty), as for a
    single line."""
    found: dict[str, GotchaHit] = {}
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        for hit in searcher.guesses(raw[:_MAX_LINE], answered):
            kept = found.get(hit.gotcha.id)
            if kept is None or hit.score > kept.score:
                found[hit.gotcha.id] = replace(hit, line_no=number, line=raw.strip())
    return sorted(found.values(), key=lambda h: -h.score)
