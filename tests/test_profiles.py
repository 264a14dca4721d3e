"""Every profile validates, holds every gotcha of its platform, and keeps its own rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rgt.profiles import all_profiles, profile_names, universal_catalog
from rgt.profiles.schema import Profile

PLATFORMS = {
    "autodl", "lambda", "vastai", "generic-ssh", "slurm", "kubernetes", "colab", "kaggle",
    "local", "runpod",
}

# The gotcha ids the platform documents define, by the profile that must hold them.
EXPECTED_IDS = {
    "lambda": [f"LAM{i}" for i in range(1, 14)],
    "autodl": [f"AD{i}" for i in range(1, 10)] + ["AD-DANGER"],
    "vastai": [f"VAST{i}" for i in range(1, 14)],
    "generic-ssh": [f"GEN{i}" for i in range(1, 9)],
    "slurm": [f"SLURM{i}" for i in range(1, 7)],
    "kubernetes": [f"K8S{i}" for i in range(1, 7)],
    "runpod": [f"RP{i}" for i in range(1, 16)],
}
NOTEBOOK_IDS = [f"NB{i}" for i in range(1, 6)]

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="module")
def profiles() -> dict[str, Profile]:
    return {p.name: p for p in all_profiles()}


def test_the_ten_platforms_are_there(profiles):
    assert set(profile_names()) == PLATFORMS
    assert set(profiles) == PLATFORMS


@pytest.mark.parametrize("name", sorted(EXPECTED_IDS))
def test_every_seed_gotcha_is_present_and_whole(profiles, name):
    found = {g.id: g for g in profiles[name].gotchas}
    missing = [i for i in EXPECTED_IDS[name] if i not in found]
    assert not missing, f"{name} lacks {missing}"
    for gotcha in found.values():
        assert gotcha.symptom.strip() and gotcha.cause.strip() and gotcha.fix.strip()


def test_notebook_gotchas_are_in_colab_or_kaggle(profiles):
    ids = {g.id for name in ("colab", "kaggle") for g in profiles[name].gotchas}
    assert set(NOTEBOOK_IDS) <= ids


def test_universal_catalog_is_complete():
    ids = [g.id for g in universal_catalog().gotchas]
    # U1…U44 come from the reference catalog; U45 on were added from the pasted-error corpus
    # (tests/knowledge): numbered without gaps, none reused.
    assert sorted(ids, key=lambda i: int(i[1:])) == [f"U{i}" for i in range(1, len(ids) + 1)]
    assert len(ids) >= 52
    for gotcha in universal_catalog().gotchas:
        assert gotcha.symptom.strip() and gotcha.cause.strip() and gotcha.fix.strip()


def test_profiles_reference_only_existing_universal_ids(profiles):
    known = {g.id for g in universal_catalog().gotchas}
    for profile in profiles.values():
        assert set(profile.universal_refs) <= known, profile.name


def test_see_also_points_at_real_gotchas(profiles):
    known = {g.id for g in universal_catalog().gotchas}
    known |= {g.id for p in profiles.values() for g in p.gotchas}
    everything = list(universal_catalog().gotchas) + [g for p in profiles.values()
                                                       for g in p.gotchas]
    dangling = {(g.id, ref) for g in everything for ref in g.see_also if ref not in known}
    assert not dangling


@pytest.mark.skipif(not (SHARED / "seeds").is_dir(), reason="shared/seeds not beside the repo")
def test_no_gotcha_id_of_the_source_documents_is_missing(profiles):
    text = "".join(p.read_text(encoding="utf-8") for p in (SHARED / "seeds").glob("*.txt"))
    text += "".join(p.read_text(encoding="utf-8") for p in (SHARED / "reference").glob("*.md"))
    cited = set(re.findall(r"\b(LAM\d+|AD\d+|AD-DANGER|VAST\d+|GEN\d+|SLURM\d+|K8S\d+|NB\d+|"
                           r"RP\d+|U\d+)\b", text))
    held = {g.id for g in universal_catalog().gotchas}
    held |= {g.id for p in profiles.values() for g in p.gotchas}
    assert cited - held == set()


def test_every_detect_block_matches_its_examples(profiles):
    gotchas = list(universal_catalog().gotchas) + [g for p in profiles.values()
                                                   for g in p.gotchas]
    detectable = [g for g in gotchas if g.detect]
    assert len(detectable) >= 40  # detection is the point of the data, not an afterthought
    for gotcha in detectable:
        for example in gotcha.detect.examples:
            assert gotcha.detect.matches(example), (gotcha.id, example)
        if gotcha.detect.probe:
            probe = gotcha.detect.probe
            assert re.search(probe.matches, probe.example_output, re.IGNORECASE), gotcha.id


def test_money_facts_carry_a_citation(profiles):
    """An action that keeps billing must say where that comes from; where the source document
    dated its check (Lambda, vast.ai), the date is kept so a user can judge its freshness."""
    for name in ("lambda", "vastai", "autodl", "runpod"):
        profile = profiles[name]
        billing = [a for a in profile.actions if a.keeps_billing]
        assert billing, name
        for action in billing:
            cited = action.sources + profile.sources
            assert cited, (name, action.name)
            if name in ("lambda", "vastai"):
                assert any(c.verified for c in cited), (name, action.name)


def test_lambda_terminate_facts(profiles):
    lam = profiles["lambda"]
    stop = lam.action("terminate")
    assert stop is lam.meter_stop
    assert stop.stops_compute_meter and stop.irreversible
    nvme = [t for t in lam.storage.tiers if "nvme" in (t.name + t.path + t.notes).lower()]
    assert nvme and all(t.survives["terminate"] is False for t in nvme)
    billing = " ".join(b.what.lower() + b.rate for b in stop.keeps_billing)
    assert "filesystem" in billing and "0.20" in billing


def test_autodl_shutdown_is_the_exception(profiles):
    autodl = profiles["autodl"]
    stop = autodl.action("关机")
    assert stop is autodl.meter_stop
    assert stop.stops_compute_meter and not stop.irreversible
    assert stop.timer is not None and stop.timer.seconds == 15 * 24 * 3600
    data_disk = [t for t in autodl.storage.tiers if "autodl-tmp" in t.path]
    assert data_disk and data_disk[0].survives[stop.name] is True


def test_vastai_stop_keeps_billing_the_disk(profiles):
    stop = profiles["vastai"].action("stop")
    assert stop is not None and stop.stops_compute_meter and not stop.stops_storage_meter
    assert any("disk" in b.what.lower() or "storage" in b.what.lower()
               for b in stop.keeps_billing)
    assert profiles["vastai"].meter_stop.name == "destroy"


def test_a_china_mirror_is_set_only_where_the_box_sits_behind_the_gfw(profiles):
    """hf-mirror.com is AutoDL's (seed 001 §3); a generic box gets no mirror on every job."""
    for profile in profiles.values():
        endpoint = profile.network.mirror_env.get("HF_ENDPOINT", "")
        if "mirror" in endpoint or endpoint.endswith(".cn"):
            assert profile.facts.china_mirror_needed is True, profile.name
    assert "HF_ENDPOINT" not in profiles["generic-ssh"].network.mirror_env


def test_kubernetes_deleting_the_job_leaves_the_node_billing(profiles):
    """Seed 004, Kubernetes: 'delete ≠ scale-down — the node release is the real cost lever'."""
    k8s = profiles["kubernetes"]
    assert k8s.meter_stop.name == "scale-down-node-pool"
    for name in ("delete-job", "job-end", "active-deadline"):
        action = k8s.action(name)
        assert action is not None and not action.stops_compute_meter, name
        assert any("node" in b.what.lower() for b in action.keeps_billing), name
