"""What `rgt gotcha search` does to a pasted line before matching it (issue 16).

A paste carries a logger's prefix, colour codes and quotes escaped by a repr; the rules must read
the failure the same with or without them. The fuzzy stage must not guess for a line that says
nothing went wrong, nor on words that only name the user's own paths.
"""

from __future__ import annotations

import pytest

from rgt.profiles import search_gotchas
from rgt.profiles.search import FUZZY, RULE, normalise


@pytest.mark.parametrize("pasted, bare", [
    ("[2023-11-13 16:59:55,650] [ERROR] [launch.py:320:sigkill_handler] exits with code = -9",
     "exits with code = -9"),
    ("2020-11-11 10:46:37.467224: E tensorflow/stream_executor/cuda/cuda_driver.cc:314] "
     "failed call to cuInit", "failed call to cuInit"),
    ("[rank6]:[E1206 18:44:16.997991020 ProcessGroupNCCL.cpp:1515] [PG 1 Rank 6] timed out",
     "[PG 1 Rank 6] timed out"),
    ("W 11-26 19:36:31 cloud_vm_ray_backend.py:689]   2022-11-26 19:36:18,508 WARN "
     "node_provider.py:462 -- create_instances failed", "create_instances failed"),
    ("\x1b[31mKilled\x1b[0m", "Killed"),
    ("Failed to resolve \\'huggingface.co\\'", "Failed to resolve 'huggingface.co'"),
    ("a   b\t c", "a b c"),
])
def test_normalise_drops_what_the_paste_added(pasted, bare):
    assert normalise(pasted) == bare


@pytest.mark.parametrize("line, gotcha", [
    ("2020-11-11 10:46:37: lost connection", "GEN3"),  # `^lost connection$` once the stamp goes
    ("\x1b[31mKilled\x1b[0m", "U9"),  # a coloured terminal's bare `Killed`
])
def test_anchored_rules_fire_through_a_log_prefix_or_colour(line, gotcha):
    hits = search_gotchas(line, limit=3)
    assert hits and hits[0].why == RULE and hits[0].gotcha.id == gotcha, hits


def test_no_guess_for_a_line_that_says_nothing_is_wrong():
    # shares 'api', 'key', 'wandb', 'configured' with U35, and was a false answer before
    assert search_gotchas("wandb: W&B API key is configured. Use wandb login --relogin") == []
    # no rule names this wording ("api key missing" is one since U35 learnt the class), so the
    # fuzzy stage answers
    guess = search_gotchas("wandb cannot find an api key inside the job")
    assert guess and guess[0].why == FUZZY and guess[0].gotcha.id == "U35"
    assert search_gotchas("wandb api key missing inside the job")[0].why == RULE


def test_paths_are_not_words():
    # the same words guess U35 as prose; as the user's own path they say nothing
    assert [h.gotcha.id for h in search_gotchas("error reading wandb offline api key wrappers")
            ][:1] == ["U35"]
    assert search_gotchas("error reading /wandb/offline/api/key/wrappers") == []
