"""Every fact in the profiles says where it comes from (issue 16 item 3).

A unit of facts — a profile's frontmatter and first-contact text, each section, each action,
each gotcha — carries at least one citation that a reader can check: a seed file and section
(`seeds/001 … §5`), the reference catalog (`reference/universal-gotchas.md`), a public page
with the date it was checked, or a statement that the fact is an inference and from what.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import rgt.profiles
from rgt.profiles import all_profiles, universal_catalog
from rgt.profiles.schema import Citation

_SEED = re.compile(r"^seeds/00\d \(")
_REFERENCE = "reference/universal-gotchas.md"
DATA = Path(rgt.profiles.__file__).parent / "data"


def checkable(citation: Citation) -> bool:
    if citation.inference:
        return len(citation.doc.split()) >= 4  # says what it follows from
    if _SEED.match(citation.doc) or citation.doc.startswith(_REFERENCE):
        return True
    return citation.verified is not None  # a page, with the date it said so


def units():
    for p in all_profiles():
        yield f"{p.name}: facts and surface", p.sources
        for section in ("launch", "storage", "network", "spot", "daemon"):
            yield f"{p.name}: {section}", getattr(p, section).sources
        for action in p.actions:
            yield f"{p.name}: action {action.name}", action.sources
        for gotcha in p.gotchas:
            yield f"{p.name}: gotcha {gotcha.id}", gotcha.sources
    for gotcha in universal_catalog().gotchas:
        yield f"universal: gotcha {gotcha.id}", gotcha.sources


def test_every_unit_of_facts_names_a_checkable_source():
    unsourced = [name for name, cites in units() if not any(checkable(c) for c in cites)]
    assert not unsourced, f"{len(unsourced)} units without a checkable source: {unsourced}"


def test_inferences_are_marked_and_few():
    inferred = [name for name, cites in units() if any(c.inference for c in cites)]
    assert inferred and len(inferred) <= 15, inferred


def test_every_public_page_carries_the_date_it_was_checked():
    # a unit may also cite a seed, but a page without its date cannot be rechecked against the
    # version that said so
    undated = [(name, c.doc) for name, cites in units() for c in cites
               if c.doc.startswith(("http://", "https://")) and c.verified is None]
    assert not undated, undated


def test_no_profile_file_repeats_a_key():
    # YAML keeps the last of two equal keys without a word: a gotcha's `sources: []` above its
    # real `sources:` list hid nothing, but the other order would drop every citation silently.
    repeated = []

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                repeated.append(f"{key} at {key_node.start_mark}")
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    for path in sorted(DATA.glob("*.yaml")):
        yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)  # a SafeLoader subclass
    assert not repeated, repeated


# Facts issue 34 found stated without a source of their own, and RunPod's global volumes: each is
# cited by a source that names it, a provider page where one states it, "reported in <thread>"
# where only users report it. AutoDL's 15-day release is the console's own text, which no public
# page reachable here states: it cites the seed that recorded that text, and says so.
NAMED_FACTS = [
    # (profile, words the profile states the fact in, words its citation must name, source kind)
    ("lambda", "Alert", "Alert status", "https://docs.lambda.ai/"),
    ("slurm", "KillWait", "default 30 seconds", "https://slurm.schedmd.com/slurm.conf.html"),
    ("colab", "90 minutes", "90-minute idle timeout", "reported in https://"),
    ("runpod", "Global Volume", "GlobalVolume", "https://docs.runpod.io/"),
    ("autodl", "15 days", "关机 15 天后释放", "seeds/001"),
]


def test_each_named_platform_fact_cites_a_source_that_states_it():
    profiles = {p.name: p for p in all_profiles()}
    for name, stated, named, kind in NAMED_FACTS:
        text = (DATA / f"{name}.yaml").read_text(encoding="utf-8")
        assert stated in text, (name, stated)  # the profile does state the fact
        cites = [c for unit, cs in units() if unit.startswith(f"{name}:") for c in cs]
        naming = [c for c in cites if named in c.doc]
        assert naming, f"{name}: no citation names {named!r}"
        assert any(kind in c.doc and checkable(c) for c in naming), (name, kind, naming)
        assert profiles[name].sources, name


def test_runpod_names_global_volumes_beside_network_volumes():
    runpod = (DATA / "runpod.yaml").read_text(encoding="utf-8")
    assert "Global Volume" in runpod and "Network Volume" in runpod
    rp7 = next(g for g in next(p for p in all_profiles() if p.name == "runpod").gotchas
               if g.id == "RP7")
    assert "Global" in rp7.fix and any("GlobalVolume" in c.doc for c in rp7.sources)
