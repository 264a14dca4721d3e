"""Which gotchas explain a pasted error line.

Two stages. First the rules: every gotcha's `detect.patterns` regexes are tried on the line as
pasted and on its normalised form (see `normalise`: the log prefix, colour codes, escaped quotes
and runs of blanks a paste carries are not part of the failure); a hit is ranked by how much of
the line the pattern explains (a longer match is the more specific rule: `CUDA out of memory`
beats `out of memory`), and, when the user names the platform, by whether the gotcha belongs to
it. Only when no rule fires does a fuzzy stage answer: it compares the line's distinctive words
with each gotcha's title and symptom and offers the close ones, marked as guesses. Paths, URLs,
addresses and hex ids are masked first, ordinary words of error messages ("error", "failed",
"file") carry no weight, and a line that says nothing is wrong ("API key is configured") gets no
guess at all, so a line that merely shares vocabulary with a gotcha finds nothing.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from rgt.profiles.loader import all_gotchas, load_profile
from rgt.profiles.schema import Gotcha

RULE = "detect pattern"
FUZZY = "fuzzy: title/symptom words"

# Ranks of a rule hit when the user names the platform: its own gotchas, then the universal
# ones, then other platforms'. Within a rank the longer match wins (the more specific rule);
# a universal gotcha the platform's profile points at wins a tie.
_OWN, _UNIVERSAL, _OTHER = 2, 1, 0
_RANK = 1000.0  # more than any match length

_WORD = re.compile(r"[a-z][a-z0-9_+.-]{2,}")
# Words of every error message; they say nothing about which one it is.
_STOPWORDS = frozenset([
    "the", "and", "for", "with", "from", "this", "that", "not", "are", "was", "were", "has",
    "have", "had", "its", "into", "when", "then", "than", "but", "you", "your", "can",
    "cannot", "could", "should", "would", "will", "may", "might", "does", "did", "done", "all",
    "any", "one", "two", "error", "errors", "failed", "failure", "fail", "warning", "warn",
    "info", "debug", "fatal", "exception", "raise", "raised", "traceback", "most", "recent",
    "call", "last", "line", "file", "files", "module", "modules", "python", "import", "true",
    "false", "available", "none", "null", "self", "object", "type", "value", "values",
    "name", "names",
    "unable", "found", "find", "use", "used", "using", "run", "running", "runs", "after",
    "before", "while", "out", "get", "got", "set", "sets", "new", "old", "see", "check",
    "please", "try", "again", "more", "less", "some", "other", "only", "also", "still", "just",
    "time", "times", "code", "text", "data", "path", "paths", "like",
])
# Exception and log-level class names (RuntimeError, OSError, UserWarning): every stack trace
# has one, so sharing one with a gotcha's prose says nothing about which gotcha it is.
_GENERIC_SUFFIXES = ("error", "exception", "warning")
_FUZZY_MIN_SCORE = 0.45
# Two words in common is coincidence more often than not on real logs ("Submitted batch job",
# "Mounted at /content/drive" each share two words with some gotcha); three is evidence.
_FUZZY_MIN_SHARED = 3
# A guess is only offered for a line that says something went wrong; an INFO line that shares
# three words with a gotcha ("wandb: W&B API key is configured") is not a symptom of it. A
# timeout being configured ("timeout to 30 minutes", "timeout=1800") is not one either.
_TROUBLE = re.compile(
    r"error|fail|fatal|exception|traceback|abort|crash|panic|killed|\bkill|refused|denied|"
    r"timed[ -]?out|timing out|\btime[ -]out\b|timeout(?!\s*(=|:\s*\d|to \d|of \d|set\b))|"
    r"unable|cannot|can't|couldn't|could not|\bnot\b|\bno\b|n't\b|missing|"
    r"\blost\b|\bgone\b|invalid|exceed|insufficient|violat|mismatch|wrong|corrupt|broken|"
    r"unreachable|reset|disconnect|\bdie[sd]?\b|\bdead\b|hang|\bhung\b|stuck|stall|frozen|"
    r"\bslow|vanish|disappear|wipe|evict|preempt|throttl|\boom\b|empty|zero|warn|still|"
    r"keeps?\b|never|again|instead",
    re.IGNORECASE)
# A count of zero reports that nothing went wrong: "Evicted 0 pods", "0 failed", "errors: 0".
_NONE_WRONG = re.compile(
    r"\b(?:evicted|failed|failures?|errors?|killed|warnings?|restarts?)\W{0,3}0\b(?![.,]\d)"
    r"|\b0 (?:\w+ )?(?:evicted|failed|failures?|errors?|killed|warnings?|restarts?)\b",
    re.IGNORECASE)

# What a paste carries that is not part of the failure. A log line's own prefix (a timestamp,
# a level, a logger's `file:line]`), colour codes, quotes escaped by a repr or JSON, and runs of
# blanks: the same failure must read the same with or without them.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LOG_PREFIX = re.compile(
    r"^\s*(?:"
    r"\[?\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"  # a timestamp
    r"(?:Z|[+-]\d{2}:?\d{2})?\]?:?"
    r"|\[rank\d+\]:?"  # torch's per-rank tag
    r"|\[?[IWEF]\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?(?:\s+\d+)?\s+[\w./-]+:\d+\]"  # glog
    r"|[IWEDC] \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? [\w./-]+:\d+\]"  # SkyPilot, vLLM
    r"|[IWEF] [\w./-]+\.\w+:\d+\]"  # TensorFlow's `E tensorflow/.../x.cc:314]`
    r"|\[[\w./-]+\.py:\d+(?::\w+)?\]"  # DeepSpeed's `[launch.py:320:sigkill_handler]`
    r"|\[(?:INFO|WARN(?:ING)?|ERROR|DEBUG|CRITICAL|FATAL|[IWEF])\]"
    r"|(?:INFO|WARN(?:ING)?|ERROR|DEBUG|CRITICAL|FATAL)(?: [\w./-]+\.py:\d+ --|(?::[\w.]+)*:)"
    r")\s*")
_ESCAPED_QUOTE = re.compile(r"\\+(['\"])")
_BLANKS = re.compile(r"\s+")
# Typography a paste picks up on its way through a chat, a forum or a word processor: curly and
# full-width quotes (NFKC folds the other full-width forms and non-breaking spaces), markdown
# emphasis and code spans around the line, a quote or list marker, a shell prompt. A longer run of
# asterisks is the program's own (Slurm's `*** JOB 42 CANCELLED ... ***`), not emphasis.
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
                         "\u2032": "'", "\u00b4": "'", "\u201c": '"', "\u201d": '"',
                         "\u201e": '"', "\u201f": '"', "\u2033": '"', "\u00ab": '"',
                         "\u00bb": '"', "\u2013": "-", "\u2014": "-", "\u2212": "-"})
_MARKDOWN = re.compile(r"(?<!\*)\*\*(?!\*)|__(?=\S)|(?<=\S)__|```\w*|`")
_LEAD = re.compile(r"^\s*(?:>\s*)+|^\s*[-*+]\s+|^\s*(?:[\w.@-]+[:~][^\s$#]*)?[$#%]\s+")
# Other log prefixes: syslog's `Nov 20 10:00:00 host proc[12]:`, the kernel's `[ 1234.5678]`,
# a bare clock `12:00:01` or `[12:00:01]`, `kubectl logs --prefix`'s `[pod/name/container]`,
# docker compose's `service-1  |`. sshd's own syslog lines keep their tag: there `Connection
# closed by <addr> port <n>` is a client leaving, not the client-side failure U59 reads.
_SYSLOG = re.compile(
    r"^\s*(?:"
    r"[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} [\w.-]+ (?!sshd\b)[\w./-]+(?:\[\d+\])?:"
    r"|\[\s*\d+\.\d+\]"
    r"|\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?(?= )"
    r"|\[pod/[\w./-]+\]"
    r"|[\w.-]+[-_]\d+\s+\|"
    r")\s*")
# Masked before words are compared: they name this user's files and hosts, not the failure.
_NOISE = re.compile(
    r"[a-z][a-z0-9+.-]*://\S+"  # URLs
    r"|(?<![\w/])(?:~|\.{1,2})?(?:/[\w.@%+~-]+)+/?"  # POSIX paths
    r"|\b[a-z]:\\\S+"  # Windows paths
    r"|\b0x[0-9a-f]+\b|\b[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b"  # addresses, hashes, uuids
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b",  # IPv4 addresses
    re.IGNORECASE)


@dataclass(frozen=True)
class GotchaHit:
    gotcha: Gotcha
    platform: str  # profile name, or "universal"
    why: str  # RULE or FUZZY
    match: str = ""  # the text the rule matched, or the shared words of a fuzzy answer
    score: float = 0.0


def search_gotchas(text: str, profile: str | None = None, limit: int | None = None
                   ) -> list[GotchaHit]:
    """Gotchas explaining `text`, best first; rule hits only, or fuzzy guesses when none fire.

    `profile` (a platform name) ranks that platform's gotchas, and the universal ones its profile
    points at, ahead of the rest; other platforms' hits stay in the list but sink below them.
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

    def search(self, text: str, *, fuzzy: bool = True, limit: int | None = None
               ) -> list[GotchaHit]:
        views = (text, normalised) if (normalised := normalise(text)) != text else (text,)
        hits = [hit for platform, gotcha, patterns in self.entries
                if (hit := self._rule_hit(views, platform, gotcha, patterns)) is not None]
        if not hits and fuzzy and _TROUBLE.search(_NONE_WRONG.sub(" ", text)):
            hits = self._fuzzy_hits(text)
        hits.sort(key=lambda h: -h.score)
        return hits[:limit] if limit else hits

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

    def _fuzzy_hits(self, text: str) -> list[GotchaHit]:
        words = set(_words(_NOISE.sub(" ", normalise(text))))
        if not words:
            return []
        weights, unknown = _idf(), _max_idf()
        total = sum(weights.get(w, unknown) for w in words)
        hits = []
        for platform, gotcha, _ in self.entries:
            if self.profile is not None and platform not in (self.profile, "universal"):
                continue
            shared = words & _haystack(gotcha.title, gotcha.symptom)
            if len(shared) < _FUZZY_MIN_SHARED:
                continue
            score = sum(weights.get(w, unknown) for w in shared) / total
            if score >= _FUZZY_MIN_SCORE:
                hits.append(GotchaHit(gotcha, platform, FUZZY, " ".join(sorted(shared)), score))
        return hits


def normalise(text: str) -> str:
    """`text` without what a paste adds around a failure: colour codes, the log prefix
    (timestamps, levels, `file.py:123]`, syslog's host and tag), backslash-escaped quotes, curly
    and full-width punctuation (NFKC), markdown emphasis and code spans, a quote marker or
    shell prompt, runs of blanks."""
    line = unicodedata.normalize("NFKC", _ANSI.sub("", text)).translate(_QUOTES)
    line = _ESCAPED_QUOTE.sub(r"\1", _MARKDOWN.sub("", line))
    for _ in range(4):  # `[2023-..] [ERROR] [launch.py:320] ...` stacks prefixes
        stripped = _LOG_PREFIX.sub("", line, count=1)
        stripped = _SYSLOG.sub("", _LEAD.sub("", stripped, count=1), count=1)
        if stripped == line:
            break
        line = stripped
    return _BLANKS.sub(" ", line).strip()


def _platform_weight(platform: str, gotcha_id: str, profile: str | None,
                     refs: frozenset[str]) -> float:
    if profile is None:
        return 0.5 if platform == "universal" else 0.0  # ties: the general story first
    if platform == profile:
        return _OWN * _RANK
    if platform == "universal":
        return _UNIVERSAL * _RANK + (0.5 if gotcha_id in refs else 0.0)
    return _OTHER * _RANK


@cache
def _haystack(title: str, symptom: str) -> frozenset[str]:
    return frozenset(_words(f"{title} {symptom}"))


def _words(text: str) -> Iterator[str]:
    for word in _WORD.findall(text.lower()):
        word = word.strip(".-_+")
        if (len(word) >= 3 and word not in _STOPWORDS and not word.isdigit()
                and not word.endswith(_GENERIC_SUFFIXES)):
            yield word


@cache
def _idf() -> dict[str, float]:
    """Inverse document frequency of each word over all gotchas' titles and symptoms: a word
    every other gotcha mentions ("gpu", "box") says less than one only a few mention."""
    documents = [set(_words(f"{g.title} {g.symptom}")) for _, g in all_gotchas()]
    counts = Counter(word for doc in documents for word in doc)
    return {word: math.log((1 + len(documents)) / (1 + n)) + 1 for word, n in counts.items()}


def _max_idf() -> float:
    """The weight of a word no gotcha uses: the rarest there is."""
    return max(_idf().values(), default=1.0) + 1
