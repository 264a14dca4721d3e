"""`rgt gotcha search` against real error lines users pasted into public trackers.

The corpus (error_corpus.yaml) names, for every line, the thread it was copied from and the
gotchas a right answer contains. The bar: a right gotcha in the top 3 for at least 90% of the
lines, and nothing at all for lines no gotcha explains.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from cli import rgt

from rgt.profiles import search_gotchas
from rgt.profiles.loader import all_gotchas
from rgt.profiles.search import FUZZY, RULE
from rgt.store import Box, Store

CORPUS = yaml.safe_load((Path(__file__).parent / "error_corpus.yaml").read_text(encoding="utf-8"))
POSITIVE, NEGATIVE = CORPUS["positive"], CORPUS["negative"]
KNOWN_IDS = {g.id for _, g in all_gotchas()}


def _top3(line: str, profile: str | None = None) -> list[str]:
    return [hit.gotcha.id for hit in search_gotchas(line, profile, limit=3)]


def test_the_corpus_is_big_enough_and_every_line_is_sourced():
    assert len(POSITIVE) >= 60 and len(NEGATIVE) >= 30
    for entry in POSITIVE + NEGATIVE:
        assert entry["line"].strip(), entry
        assert entry["source"].startswith("https://"), entry
    for entry in POSITIVE:
        assert entry["expect"] and set(entry["expect"]) <= KNOWN_IDS, entry


def test_the_corpus_covers_the_platforms_and_tools_users_paste_from():
    sources = " ".join(e["source"] for e in POSITIVE).lower()
    for project in ("pytorch", "slurm", "kubernetes", "huggingface", "wandb", "skypilot",
                    "runpod", "colab", "kaggle"):
        assert project in sources or any(project in e["line"].lower() for e in POSITIVE), project


def test_a_right_gotcha_is_in_the_top_3_for_90_percent_of_the_lines():
    missed = [(e["line"][:80], e["expect"], _top3(e["line"])) for e in POSITIVE
              if not set(_top3(e["line"])) & set(e["expect"])]
    rate = 1 - len(missed) / len(POSITIVE)
    print(f"gotcha search hit rate: {rate:.1%} of {len(POSITIVE)} lines; missed {missed}")
    assert rate >= 0.90, missed


def test_lines_seen_on_a_platform_still_find_it_when_that_platform_is_named():
    named = [e for e in POSITIVE if e.get("profile")]
    assert named
    for entry in named:
        assert set(_top3(entry["line"], entry["profile"])) & set(entry["expect"]), entry


@pytest.mark.parametrize("entry", NEGATIVE, ids=lambda e: e["line"][:40])
def test_an_unrelated_line_matches_nothing(entry):
    assert search_gotchas(entry["line"]) == []


@pytest.mark.parametrize("profile, first", [("autodl", "AD4"), ("runpod", "RP11"),
                                            ("vastai", "VAST10"), ("generic-ssh", "U7"),
                                            (None, "U7")])
def test_a_line_common_to_many_platforms_ranks_by_the_platform(profile, first):
    line = "OSError: [Errno 28] No space left on device"
    hits = search_gotchas(line, profile)
    assert hits[0].gotcha.id == first
    assert {"U7", "AD4", "RP11", "VAST10"} <= {h.gotcha.id for h in hits}  # the rest stay


def test_rule_hits_name_the_text_they_matched():
    line = "RuntimeError: CUDA out of memory. Tried to allocate 92.00 MiB (GPU 0)"
    first, second = search_gotchas(line)[:2]
    assert first.gotcha.id == "U10" and first.why == RULE and first.match == "CUDA out of memory"
    assert second.gotcha.id == "U3" and second.match == "out of memory"  # the vaguer rule


def test_without_a_rule_a_fuzzy_search_answers_and_says_so():
    hits = search_gotchas("tmux session gone after the box rebooted")
    assert hits and all(h.why == FUZZY for h in hits)
    assert {"LAM9", "GEN6"} & {h.gotcha.id for h in hits[:3]}
    human = rgt("gotcha", "search", "tmux session gone after the box rebooted")
    assert human.returncode == 0 and "(guesses)" in human.stdout


def test_json_search_exits_1_when_nothing_matches():
    empty = rgt("gotcha", "search", "npm ERR! code ERESOLVE", "--json")
    assert empty.returncode == 1 and json.loads(empty.stdout) == []
    found = rgt("gotcha", "search", "Permission denied (publickey).", "--json")
    assert found.returncode == 0
    assert json.loads(found.stdout)[0] | {"id": "U48", "why": RULE} == json.loads(found.stdout)[0]


def test_box_ranks_by_the_box_platform(tmp_path):
    home = tmp_path / "rgt-home"
    home.mkdir()
    Store(home / "state.db").add_box(Box(
        name="gpu1", profile="runpod", connection={"host": "x"}, data_dir="/workspace/data",
        durable_dir="/workspace/ckpt", rate=None, state="up", created=time.time()))
    env = {"RGT_HOME": str(home)}
    result = rgt("gotcha", "search", "No space left on device", "--box", "gpu1", "--json",
                 env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["id"] == "RP11"
    unknown = rgt("gotcha", "search", "x", "--box", "nope", env=env)
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    both = rgt("gotcha", "search", "x", "--box", "gpu1", "--profile", "autodl", env=env)
    assert both.returncode == 2 and "not both" in both.stderr
