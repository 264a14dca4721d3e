"""Core code names no platform: what differs per platform is a platform's declaration (its
abilities, spec sections, audit lines) or a profile's fact, never an `if` on a name in cli/,
lifecycle/, remote/, agent/ or spec.py (issue 30). Read from the source with `ast`, as the
layering test reads imports.

The rule, and why: code may not name a platform, prose may.
- Code: an identifier (a variable, function, class, argument, attribute, keyword, an import's
  module) and a string with no whitespace in it (a key looked up, a value compared, a profile
  name, a regular expression) — `kind == "slurm"`, `report.get("colab")`, `_slurm_mb` fail.
- Prose: docstrings, comments, and strings with whitespace (messages and help text shown to
  the user, which may name the platform they speak of: "needs a slurm or kubernetes box", as
  a platform's own reasons do) pass. A message that has to pick a platform by name is code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rgt

SRC = Path(rgt.__file__).parent
SCANNED = ["cli", "lifecycle", "remote", "agent", "spec.py", "boxfacts.py"]
PLATFORM_WORDS = ("lambda", "vast", "runpod", "slurm", "kubernetes", "k8s", "colab", "kaggle",
                  "autodl")

# Files with names left, each with the count it holds: a count may only fall, and one that fell
# must be lowered here, so the list only ever shrinks (empty: none left).
PENDING: dict[str, int] = {}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _named(text: str) -> str | None:
    lowered = text.lower()
    return next((word for word in PLATFORM_WORDS if word in lowered), None)


def names_in(source: str) -> list[tuple[int, str, str]]:
    """(line, platform word, the code that holds it) for every platform named as code."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []

    def check(node: ast.AST, text: str | None) -> None:
        if text and (word := _named(text)):
            found.append((getattr(node, "lineno", 0), word, text))

    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            check(node, node.id)
        elif isinstance(node, ast.Attribute):
            check(node, node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            check(node, node.name)
        elif isinstance(node, ast.arg | ast.keyword):
            check(node, node.arg)
        elif isinstance(node, ast.alias):
            check(node, node.name)
            check(node, node.asname)
        elif isinstance(node, ast.ImportFrom):
            check(node, node.module)
        elif isinstance(node, ast.JoinedStr):  # an f-string: prose if its text has a space
            text = "".join(v.value for v in node.values
                           if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if not any(c.isspace() for c in text):
                check(node, text)
            skip.update(id(v) for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in skip and not any(c.isspace() for c in node.value):
            check(node, node.value)
    return sorted(found)


def scanned_files() -> list[Path]:
    files = []
    for part in SCANNED:
        path = SRC / part
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def test_core_code_names_no_platform():
    problems, counts = [], {}
    for path in scanned_files():
        relative = str(path.relative_to(SRC))
        found = names_in(path.read_text(encoding="utf-8"))
        counts[relative] = len(found)
        if relative in PENDING:
            continue
        problems += [f"{relative}:{line}: {word} in {text!r}" for line, word, text in found]
    assert not problems, ("core code names a platform (make it a platform's declaration or a "
                          "profile's fact):\n" + "\n".join(problems))
    grown = {f: (n, counts.get(f, 0)) for f, n in PENDING.items() if counts.get(f, 0) != n}
    assert not grown, f"PENDING counts changed (lower them; never raise): {grown}"


def test_the_rule_tells_code_from_prose():
    source = '''
"""A module about Slurm and kubernetes: prose."""
def f(kind, report, box):
    """Colab's notebook: prose."""
    # a comment about vast.ai: prose
    if kind == "slurm":
        pass
    report.get("colab")
    slurm_mb = 1
    message = f"needs a slurm or kubernetes box, not {kind}"
    raise ValueError("the kaggle kernel is queued")
    return box.extra["autodl"], f"{kind}k8s"
'''
    found = {(line, word) for line, word, _ in names_in(source)}
    assert found == {(6, "slurm"), (8, "colab"), (9, "slurm"), (12, "autodl"), (12, "k8s")}
