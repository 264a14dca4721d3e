"""Which gotchas explain a pasted error line.

First the rules: every gotcha's `detect.patterns` regexes are tried on the line as pasted and on
its normalised form (see `paste.normalise`: the log prefix, colour codes, escaped quotes and runs
of blanks a paste carries are not part of the failure); a hit is ranked by how much of the line
the pattern explains (a longer match is the more specific rule: `CUDA out of memory` beats `out
of memory`), and, when the user names the platform, by whether the gotcha belongs to it.

Where the rules name fewer than three gotchas, guesses fill the list up to three, after every
rule hit and marked as guesses (see `similar`): gotchas one of whose known lines looks like this
one, then, when no rule fired, gotchas whose words it shares. A line that does not say anything
went wrong ("API key is configured", "Evicted 0 pods") gets no guess at all, so a line that
merely shares vocabulary with a gotcha finds nothing; nor does an ordinary programming error
(a KeyError, a module the code imports wrongly: see `paste.ordinary_error`). Such a line gets,
at most, the closest titles to read (`closest`), which are not an answer.

A paste of several lines (or a log file) is searched line by line (see `block`): each hit then
says which line showed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rgt.profiles.loader import all_gotchas, load_profile
from rgt.profiles.paste import normalise, ordinary_error, reports_trouble
from rgt.profiles.schema import Gotcha
from rgt.profiles.similar import FUZZY, LIKE, Guesser

__all__ = ["FUZZY", "LIKE", "RULE", "GotchaHit", "Searcher", "normalise", "search_gotchas"]

RULE = "detect pattern"

# Ranks of a rule hit when the user names the platform: its own gotchas, then the universal
# ones, then other platforms'. Within a rank the longer match wins (the more specific rule);
# a universal gotcha the platform's profile points at wins a tie.
_OWN, _UNIVERSAL, _OTHER = 2, 1, 0
_RANK = 1000.0  # more than any match length
# The rules' answers are complete enough at three gotchas (what a user reads, what the corpora
# score); below that, guesses fill the list.
_ENOUGH = 3


@dataclass(frozen=True)
class GotchaHit:
    gotcha: Gotcha
    platform: str  # profile name, or "universal"
    why: str  # RULE, or a guess: LIKE or FUZZY
    match: str = ""  # the text the rule matched, the known line it resembles, or shared words
    score: float = 0.0
    line_no: int = 0  # in a paste of several lines: the line (from 1) that showed it
    line: str = ""  # that line, as pasted

    @property
    def guess(self) -> bool:
        return self.why != RULE


def search_gotchas(text: str, profile: str | None = None, limit: int | None = None
                   ) -> list[GotchaHit]:
    """Gotchas explaining `text`, best first: rule hits, then guesses while fewer than three.

    `profile` (a platform name) ranks that platform's gotchas, and the universal ones its profile
    points at, ahead of the rest; other platforms' hits stay in the list but sink below them,
    and guesses come only from the platform's and the universal gotchas.
    """
    return Searcher(profile).search(text, limit=limit)


class Searcher:
    """The catalog read once, its regexes compiled once: for searching many lines (a log)."""

    def __init__(self, profile: str | None = None) -> None:
        self.profile = profile
        self.refs = frozenset(load_profile(profile).universal_refs) if profile else frozenset()
        self.entries = [(platform, gotcha, [re.compile(p, re.IGNORECASE)
                                            for p in (gotcha.detect.patterns
                                                      if gotcha.detect else [])])
                        for platform, gotcha in all_gotchas()]

    def search(self, text: str, *, guesses: bool = True, limit: int | None = None
               ) -> list[GotchaHit]:
        """Rule hits best first; with `guesses`, guesses after them up to three gotchas in all.

        Text of several non-blank lines is a paste: each line is searched (`block`)."""
        if "\n" in text.strip():
            from rgt.profiles.block import search_lines  # block builds on this class

            return search_lines(self, text.splitlines(), guesses=guesses, limit=limit)
        hits = self.rule_hits(text)
        if guesses and len(hits) < _ENOUGH and self.may_guess(text):
            hits += self._guesses(text, {h.gotcha.id for h in hits})[:_ENOUGH - len(hits)]
        return hits[:limit] if limit else hits

    def rule_hits(self, text: str) -> list[GotchaHit]:
        """The gotchas whose detection rules match one line, the most specific first."""
        views = (text, normalised) if (normalised := normalise(text)) != text else (text,)
        hits = [hit for platform, gotcha, patterns in self.entries
                if (hit := self._rule_hit(views, platform, gotcha, patterns)) is not None]
        hits.sort(key=lambda h: -h.score)
        return hits

    @staticmethod
    def may_guess(text: str) -> bool:
        """Whether a guess may answer this line: it says something went wrong, and not as an
        ordinary programming error (which a rented box does not cause)."""
        return reports_trouble(text) and not ordinary_error(text)

    def guesses(self, text: str, answered: set[str]) -> list[GotchaHit]:
        """Guesses for one line, leaving out the gotchas in `answered` (for `block`)."""
        return self._guesses(text, answered) if self.may_guess(text) else []

    def closest(self, text: str, count: int = 3) -> list[GotchaHit]:
        """The gotchas whose known lines come nearest to `text`, however far: titles to offer
        as "not a match, but see" when nothing answers. Never an answer: no threshold holds."""
        allowed = [i for i, (platform, _, _) in enumerate(self.entries)
                   if self.profile is None or platform in (self.profile, "universal")]
        guesser = _guesser(tuple(gotcha for _, gotcha, _ in self.entries))
        return [GotchaHit(self.entries[g.index][1], self.entries[g.index][0], g.why, g.match,
                          g.score)
                for g in guesser.nearest(text, allowed, count)]

    def _rule_hit(self, views: tuple[str, ...], platform: str, gotcha: Gotcha,
                  patterns: list[re.Pattern[str]]) -> GotchaHit | None:
        best = ""
        for pattern in patterns:
            for view in views:
                found = pattern.search(view)
                if found and len(found.group(0)) > len(best):
                    best = found.group(0) or " "
        if not best:
            return None
        score = len(best.strip()) + _platform_weight(platform, gotcha.id, self.profile,
                                                     self.refs)
        return GotchaHit(gotcha, platform, RULE, best.strip(), score)

    def _guesses(self, text: str, answered: set[str]) -> list[GotchaHit]:
        allowed = [i for i, (platform, gotcha, _) in enumerate(self.entries)
                   if gotcha.id not in answered
                   and (self.profile is None or platform in (self.profile, "universal"))]
        guesser = _guesser(tuple(gotcha for _, gotcha, _ in self.entries))
        # Shared words are the weakest evidence: asked only when no rule fired.
        return [GotchaHit(self.entries[g.index][1], self.entries[g.index][0], g.why, g.match,
                          g.score)
                for g in guesser.guesses(text, allowed, words=not answered)]


_GUESSERS: dict[tuple[int, ...], Guesser] = {}


def _guesser(gotchas: tuple[Gotcha, ...]) -> Guesser:
    """One index per catalog (the loaded gotchas, by identity: a profile path that changes the
    catalog gets a new one); building it reads every example and word once."""
    key = tuple(map(id, gotchas))
    if key not in _GUESSERS:
        _GUESSERS.clear()  # the Guesser holds its gotchas, so their ids stay theirs
        _GUESSERS[key] = Guesser(list(gotchas))
    return _GUESSERS[key]


def _platform_weight(platform: str, gotcha_id: str, profile: str | None,
                     refs: frozenset[str]) -> float:
    if profile is None:
        return 0.5 if platform == "universal" else 0.0  # ties: the general story first
    if platform == profile:
        return _OWN * _RANK
    if platform == "universal":
        return _UNIVERSAL * _RANK + (0.5 if gotcha_id in refs else 0.0)
    return _OTHER * _RANK
