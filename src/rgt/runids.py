"""Naming a run on the command line: a whole id, any unique prefix or suffix of one, or
`@last` / `@-N` (the newest run, the one N before it).

Run ids are `JOB-YYYYmmdd-HHMMSS-xxxx` (rgt.lifecycle.launch): every run of a job shares the
prefix, so the four hex digits at the end are what a person copies (`rgt watch s1 7d92`). A
word that matches more than one run is refused with the candidates on one line: rgt never
guesses which run a cancel or a pull meant.

Outside the layers (tests/test_layering.py): the store's `run()` and the CLI's completion
both use it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from rgt.errors import UserError, did_you_mean

SHOWN = 6  # candidates named in an "ambiguous" line; the rest are counted
_RELATIVE = re.compile(r"@(?:last|-(\d+))")


class _HasId(Protocol):
    id: str


def pick(runs: Sequence[_HasId], word: str, box: str) -> _HasId:
    """The one run of `runs` (oldest first) that `word` names; a UserError (exit 2) naming
    the candidates when it names none or several."""
    if not runs:
        raise UserError(f"box {box!r} has no runs yet; start one with `rgt run {box} JOB.yaml`")
    if (relative := _RELATIVE.fullmatch(word)) is not None:
        back = int(relative.group(1) or 0)
        if back >= len(runs):
            raise UserError(f"run {word!r}: box {box!r} has {len(runs)} run"
                            f"{'s' * (len(runs) != 1)}, so @-{len(runs) - 1} is the oldest "
                            f"(`rgt runs {box}` lists them)")
        return runs[-1 - back]
    if word.startswith("@"):
        raise UserError(f"run {word!r}: say @last for the newest run, @-1 for the one before "
                        "it, @-2 …; or give the run's id or its start or end")
    matches = candidates(runs, word)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        hint = did_you_mean(word, [r.id for r in runs])
        recent = ", ".join(r.id for r in runs[-5:])
        raise UserError(f"run {word!r} not found on box {box!r}{hint} (recent runs: {recent}; "
                        f"`rgt runs {box}` lists them)")
    shown = ", ".join(r.id for r in matches[-SHOWN:])
    more = f" and {len(matches) - SHOWN} older" if len(matches) > SHOWN else ""
    raise UserError(f"run {word!r} is ambiguous on box {box!r}: it could be {shown}{more}; "
                    "give more of its start or end, or @last")


def candidates(runs: Sequence[_HasId], word: str) -> list:
    """Every run `word` could name: the one whose id it is, else those whose id starts or ends
    with it (in the order given)."""
    exact = [r for r in runs if r.id == word]
    if exact or not word:
        return exact
    return [r for r in runs if r.id.startswith(word) or r.id.endswith(word)]


def suggestions(runs: Sequence[_HasId], typed: str) -> list[str]:
    """What shell completion offers for a half-typed run word: whole ids that start with it,
    newest first, and `@last`/`@-1` once `@` is typed."""
    if typed.startswith("@"):
        return [w for w in ("@last", "@-1", "@-2") if w.startswith(typed)]
    return [r.id for r in reversed(runs) if r.id.startswith(typed)]
