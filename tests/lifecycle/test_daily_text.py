"""The words a newcomer from SkyPilot or dstack meets: what `rgt status` and `rgt profile
autodl` point to, which verb to use when (in `rgt --help`), and flags shown as flags."""

from __future__ import annotations

import re

import pytest
from cli import rgt


@pytest.mark.parametrize("words, points_to", [
    (("status",), "`rgt ls`"),
    (("exec", "box"), "`rgt run BOX -- CMD`"),
    (("profile", "autodl"), "`rgt profile show autodl`"),
])
def test_words_from_other_tools_point_to_rgts(words, points_to):
    said = rgt(*words)
    assert said.returncode == 2 and "No such command" in said.stderr
    assert points_to in " ".join(said.stderr.split()), said.stderr


def test_a_word_that_is_no_profile_gets_no_profile_hint():
    said = rgt("profile", "nonesuch")
    assert said.returncode == 2 and "profile show" not in said.stderr


def test_help_says_which_verb_when():
    shown = " ".join(rgt("--help").stdout.split())
    assert "Which verb when:" in shown
    for verb in ("`watch BOX`", "`logs BOX`", "`top`", "`runs`", "`ls`", "`ssh BOX`"):
        assert verb in shown, verb


@pytest.mark.parametrize("verb", ["down", "cancel", "pull", "logs", "ssh", "run"])
def test_flags_show_no_bool_type(verb):
    shown = rgt(verb, "--help").stdout
    assert "<bool>" not in shown
    assert re.search(r"--help\s+-h\s+Show this message", shown), shown
