"""Guesses for a pasted line the rules do not explain: the gotchas whose known lines look like
it, then those whose words it shares.

The rules (`detect.patterns`) are exact about the wordings they were written from and blind to
the next wording of the same failure: another tool's spelling, a newer version's message, a
translation. Two comparisons catch much of that, each on the line as `paste.mask` leaves it:

- **Like a known line.** Every gotcha carries `detect.examples`, real lines its failure printed.
  A new wording of the same failure shares most of its letter sequences with one of them
  (`SignalException: Process 8665 got signal: 1` with `... got signal: 1` from another
  launcher), so the line and each example are compared as vectors of character 3- and 4-grams,
  weighted by how rare each gram is among all examples (cosine similarity).
- **Shared words.** The line's distinctive words against each gotcha's title, symptom, cause,
  fix and the literal words of its patterns. CamelCase names are split
  (`QOSMinCpuNotSatisfied` says qos, min, cpu), plural and tense endings dropped, and words of
  every error message weigh nothing; a word rare across the catalog weighs more than a common
  one, and a word no gotcha uses counts against the guess (it is evidence of something else).

Both only guess: the caller shows them after any rule hit, marked as such, and offers none for a
line that does not say anything went wrong.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from rgt.profiles.paste import mask
from rgt.profiles.schema import Gotcha

LIKE = "like a known line"
FUZZY = "fuzzy: shared words"

# A known line this close (cosine of character-gram vectors) is the same message in other
# clothes; below it, lines share only the vocabulary of their kind ("error", "cuda", "node").
_MIN_LIKENESS = 0.4
# Below this a known line shares only letters with the pasted one: not even worth a "see".
_FLOOR = 0.15
# Shared words must carry this share of the line's weight, and be at least two: one word in
# common is coincidence on real logs.
_MIN_WORD_SCORE = 0.55
_MIN_SHARED_WORDS = 2
_GRAMS = (3, 4)
# How much each part of a gotcha speaks for it: the words of its title, symptom and patterns are
# the ones a failing program prints; cause and fix are the story behind them. Its examples are
# left to the likeness stage: whole lines carry incidental words (an HTTP verb, a host name).
_FIELD_WEIGHT = {"title": 1.0, "symptom": 1.0, "patterns": 1.0, "cause": 0.7, "fix": 0.5}

# Numbers of three digits or more (pids, sizes, ports, job ids) name this occurrence, not the
# failure, and read as one; a shorter one (a signal, an errno, exit status 1) stays itself.
_LONG_NUMBER = re.compile(r"\d{3,}")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_ENDINGS = ("ing", "ed", "es", "s")
# Regex syntax around a pattern's literal words: escapes (\b, \s, \d), classes, group openers.
_REGEX_SYNTAX = re.compile(r"\\[a-zA-Z]|\[[^\]]*\]|\(\?[:=!<]+")
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
    # what every process, job and service reports about itself
    "process", "processes", "completed", "complete", "exit", "exited", "status", "enabled",
    "disabled", "need", "needs", "exists", "exist", "create", "created",
    "version", "versions", "information",
])
# Exception and warning classes every kind of failure raises: the class says nothing, and its
# parts ("runtime", "value", "key") would read as words of the failure. Names that do say
# something (MemoryError, TimeoutError, ConnectionResetError, OutOfMemoryError) are read.
_GENERIC_CLASSES = frozenset([
    "exception", "baseexception", "runtimeerror", "valueerror", "typeerror", "keyerror",
    "indexerror", "attributeerror", "assertionerror", "nameerror", "oserror", "ioerror",
    "environmenterror", "lookuperror", "notimplementederror", "systemerror", "userwarning",
    "runtimewarning", "futurewarning", "deprecationwarning",
])


@dataclass(frozen=True)
class Guess:
    index: int  # the gotcha's place in the list the Guesser was built from
    why: str  # LIKE or FUZZY
    match: str  # the known line it resembles, or the shared words
    score: float  # in (0, 1]


class Guesser:
    """The catalog's known lines and words, indexed once for many lines."""

    def __init__(self, gotchas: list[Gotcha]) -> None:
        self.gotchas = gotchas

    def guesses(self, text: str, allowed: Iterable[int], *, words: bool = True) -> list[Guess]:
        """Gotchas (by index, only those in `allowed`) the line resembles, the closest known
        line first, then (with `words`) shared words; each gotcha once."""
        allowed = set(allowed)
        line = mask(text)
        found: dict[int, Guess] = {}
        for guess in [*self._like(line, allowed), *(self._words(line, allowed) if words else [])]:
            found.setdefault(guess.index, guess)
        return list(found.values())

    def nearest(self, text: str, allowed: Iterable[int], count: int) -> list[Guess]:
        """The `count` gotchas (of `allowed`) whose known lines come nearest to the line, with
        no threshold: what to offer as "not a match, but see", never as an answer. A gotcha
        nothing about the line resembles at all (below `_FLOOR`) is left out."""
        near = self._like(mask(text), set(allowed), floor=_FLOOR)
        return near[:count]

    # ── like a known line ──

    @cached_property
    def _examples(self) -> tuple[list[tuple[int, str]], dict[str, list[tuple[int, float]]],
                                 dict[str, float], float]:
        known = [(i, line) for i, g in enumerate(self.gotchas) if g.detect
                 for line in g.detect.examples]
        counts = [_grams(mask(line)) for _, line in known]
        document_frequency = Counter(gram for grams in counts for gram in grams)
        idf = {gram: math.log((1 + len(known)) / (1 + n)) + 1
               for gram, n in document_frequency.items()}
        unseen = math.log(1 + len(known)) + 1
        postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for number, grams in enumerate(counts):
            for gram, weight in _unit(grams, idf, unseen).items():
                postings[gram].append((number, weight))
        return known, postings, idf, unseen

    def _like(self, line: str, allowed: set[int], floor: float = _MIN_LIKENESS
              ) -> list[Guess]:
        known, postings, idf, unseen = self._examples
        similarity: Counter[int] = Counter()
        for gram, weight in _unit(_grams(line), idf, unseen).items():
            for number, other in postings.get(gram, ()):
                similarity[number] += weight * other
        best: dict[int, tuple[float, str]] = {}
        for number, score in similarity.items():
            index, example = known[number]
            if (score >= floor and index in allowed
                    and score > best.get(index, (0.0, ""))[0]):
                best[index] = (score, example)
        return sorted((Guess(i, LIKE, example, min(score, 1.0))
                       for i, (score, example) in best.items()), key=lambda g: -g.score)

    # ── shared words ──

    @cached_property
    def _vocabulary(self) -> tuple[list[dict[str, float]], dict[str, float], float]:
        documents = [_weighted_words(g) for g in self.gotchas]
        document_frequency = Counter(word for doc in documents for word in doc)
        idf = {word: math.log((1 + len(documents)) / (0.5 + n))
               for word, n in document_frequency.items()}
        return documents, idf, max(idf.values(), default=1.0) + 1

    def _words(self, line: str, allowed: set[int]) -> list[Guess]:
        documents, idf, unseen = self._vocabulary
        forms = list(_word_forms(line))
        # A CamelCase name counts as its parts; whole, only where some gotcha uses it whole.
        words = {word for word, _, whole in forms if not whole or word in idf}
        if not words:
            return []
        total = sum(idf.get(w, unseen) for w in words)
        spelled: dict[str, str] = {}  # shown to the user as the line spells them, not stems
        for word, spelling, _ in forms:
            spelled.setdefault(word, spelling)
        guesses = []
        for index in allowed:
            weights = documents[index]
            shared = [w for w in words if w in weights]
            if len(shared) < _MIN_SHARED_WORDS:
                continue
            score = sum(idf[w] * weights[w] for w in shared) / total
            if score >= _MIN_WORD_SCORE:
                guesses.append(Guess(index, FUZZY, " ".join(sorted(spelled[w] for w in shared)),
                                     score))
        return sorted(guesses, key=lambda g: -g.score)


def words_of(text: str, *, whole_camel: bool = True) -> Iterator[str]:
    """The distinctive words of `text`, lowercased and without plural or tense endings."""
    for word, _, whole in _word_forms(text):
        if whole_camel or not whole:
            yield word


def _word_forms(text: str) -> Iterator[tuple[str, str, bool]]:
    """(word as compared, as the text spells it, whether it is a whole CamelCase name) for each
    distinctive word of `text`: a CamelCase name gives its parts, then itself."""
    for raw in _TOKEN.findall(text):
        if raw.lower() in _GENERIC_CLASSES:
            continue
        pieces = [(part, False) for part in _CAMEL.split(raw)]
        if len(pieces) > 1:
            pieces.append((raw, True))
        for part, whole in pieces:
            spelling = part.lower()
            if len(spelling) >= 3 and spelling not in _STOPWORDS:
                yield _stem(spelling), spelling, whole


def _stem(word: str) -> str:
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 4:
            return word[: -len(ending)]
    return word


def _weighted_words(gotcha: Gotcha) -> dict[str, float]:
    detect = gotcha.detect
    fields = {"title": gotcha.title, "symptom": gotcha.symptom, "cause": gotcha.cause,
              "fix": gotcha.fix,
              "patterns": " ".join(_REGEX_SYNTAX.sub(" ", p) for p in detect.patterns)
              if detect else ""}
    weights: dict[str, float] = {}
    for field, text in fields.items():
        for word in set(words_of(text)):
            weights[word] = max(weights.get(word, 0.0), _FIELD_WEIGHT[field])
    return weights


def _grams(line: str) -> Counter[str]:
    """Character 3- and 4-grams of the line, lowercased, every long number read as 0."""
    text = f" {_LONG_NUMBER.sub('0', ' '.join(line.lower().split()))} "
    return Counter(text[i:i + n] for n in _GRAMS for i in range(len(text) - n + 1))


def _unit(counts: Counter[str], idf: dict[str, float], unseen: float) -> dict[str, float]:
    weights = {gram: (1 + math.log(n)) * idf.get(gram, unseen) for gram, n in counts.items()}
    norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
    return {gram: w / norm for gram, w in weights.items()}
