"""`rgt VERB --help` in an 80-column terminal: every paragraph of a verb's description flows as
one paragraph. Typer keeps a docstring's own line breaks after the first paragraph, so text
wrapped at 100 columns in the source came out with a short line after every long one
("rent one" / "through its API first, …")."""

from __future__ import annotations

import pytest
from cli import rgt

from rgt.cli.verbs import VERBS

SUBCOMMANDS = [("profile", "show"), ("ckpt", "ls"), ("ckpt", "verify")]
WIDTH = 80


def _description(text: str) -> list[str]:
    """The prose between the usage line and the first panel, one entry per printed line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    prose = []
    for line in lines[start:]:
        if line.lstrip().startswith("╭"):
            break
        prose.append(line.strip())
    return prose


def _early_breaks(prose: list[str]) -> list[tuple[str, str]]:
    """Pairs of lines where the next line's first word would have fitted on the line before."""
    return [(line, after) for line, after in zip(prose, prose[1:], strict=False)
            if line and after and len(line) + 1 + len(after.split()[0]) <= WIDTH - 10]


@pytest.mark.parametrize("words", [(v.name,) for v in VERBS if not v.hidden] + SUBCOMMANDS,
                         ids=" ".join)
def test_help_paragraphs_flow_at_80_columns(words):
    shown = rgt(*words, "--help", env={"COLUMNS": str(WIDTH)})
    assert shown.returncode == 0, shown.stderr
    prose = _description(shown.stdout)
    assert any(prose), shown.stdout
    assert not _early_breaks(prose), shown.stdout


def test_a_paragraph_still_ends_where_the_docstring_ends_it():
    shown = rgt("watch", "--help", env={"COLUMNS": str(WIDTH)})
    prose = _description(shown.stdout)
    assert "" in prose[1:-1]  # the summary and the exit codes stay two paragraphs
    codes = " ".join(prose[prose.index("", 1) + 1:])
    assert "Exit codes with --until-done" in codes and "7 cancelled." in codes
