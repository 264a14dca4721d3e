"""Each failure class keeps answering in the wordings it was widened to (a regression guard).

class_variants.yaml holds lines written for this test in the shapes the classes take in other
tools, versions and locales: an OOM kill as kubelet, Docker, PyCharm, torch elastic, a
Chinese-locale bash or Colab says it; a collective timeout as several torch versions say it; a
truncated download as torch, safetensors and pickle say it. The rules were written with them in
view, so they measure nothing about unseen lines (heldout_corpus.yaml does); they fail when a
later change narrows a class back to one wording.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rgt.profiles import search_gotchas
from rgt.profiles.loader import all_gotchas

VARIANTS = yaml.safe_load((Path(__file__).parent / "class_variants.yaml").read_text(
    encoding="utf-8"))["variants"]


def test_every_expected_gotcha_exists():
    assert {e["expect"] for e in VARIANTS} <= {g.id for _, g in all_gotchas()}


@pytest.mark.parametrize("entry", VARIANTS, ids=lambda e: e["line"][:40])
def test_the_class_is_found_in_this_wording(entry):
    top3 = [hit.gotcha.id for hit in search_gotchas(entry["line"], limit=3)]
    assert entry["expect"] in top3, top3
