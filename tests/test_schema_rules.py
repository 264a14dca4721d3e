"""The schema rejects profiles that contradict themselves, with an error naming the field."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from rgt.profiles import load_profile
from rgt.profiles.loader import DATA_DIR, ProfileError
from rgt.profiles.schema import Detect, Profile


@pytest.fixture()
def local_data() -> dict:
    return yaml.safe_load((DATA_DIR / "local.yaml").read_text())


def _invalid(data: dict) -> str:
    with pytest.raises(ValidationError) as info:
        Profile.model_validate(data)
    return str(info.value)


def test_the_reference_profile_is_valid(local_data):
    profile = Profile.model_validate(local_data)
    assert profile.meter_stop.name == "down" and profile.storage.checkpoint_tier == "durable"


def test_irreversible_flag_must_agree_with_the_action(local_data):
    data = copy.deepcopy(local_data)
    data["facts"]["meter_stop_irreversible"] = False
    assert "meter_stop_irreversible" in _invalid(data)


def test_checkpoint_tier_must_survive_the_meter_stop_verb(local_data):
    data = copy.deepcopy(local_data)
    data["storage"]["checkpoint_tier"] = "scratch"
    assert "does not survive" in _invalid(data)


def test_meter_stop_verb_must_be_an_action(local_data):
    data = copy.deepcopy(local_data)
    data["facts"]["meter_stop_verb"] = "explode"
    assert "not in actions" in _invalid(data)


def test_survival_matrix_must_cover_every_action(local_data):
    data = copy.deepcopy(local_data)
    del data["storage"]["tiers"][0]["survives"]["reboot"]
    assert "missing actions ['reboot']" in _invalid(data)


def test_survival_matrix_must_name_only_actions(local_data):
    data = copy.deepcopy(local_data)
    data["storage"]["tiers"][0]["survives"]["hibernate"] = True
    assert "unknown actions ['hibernate']" in _invalid(data)


def test_meter_stop_action_must_stop_the_compute_meter(local_data):
    data = copy.deepcopy(local_data)
    stop = next(a for a in data["actions"] if a["name"] == data["facts"]["meter_stop_verb"])
    stop["stops_compute_meter"] = False
    assert "must stop the compute meter" in _invalid(data)


def test_tier_names_are_unique(local_data):
    """Else the survival rules would be checked on one of two same-named tiers only."""
    data = copy.deepcopy(local_data)
    data["storage"]["tiers"].append(copy.deepcopy(data["storage"]["tiers"][0]))
    assert "duplicate tier names" in _invalid(data)


def test_unknown_keys_are_errors(local_data):
    data = copy.deepcopy(local_data)
    data["facts"]["meter_stop_verbb"] = "down"
    assert "meter_stop_verbb" in _invalid(data)


def test_detect_regex_must_compile_and_match_its_example():
    with pytest.raises(ValidationError, match="does not compile"):
        Detect(patterns=["(unclosed"], examples=["x"])
    with pytest.raises(ValidationError, match="matches none"):
        Detect(patterns=["CUDA error"], examples=["No space left on device"])
    assert Detect(patterns=["No space left"], examples=["cp: No space left on device"])


def test_malformed_file_is_one_clear_line(tmp_path: Path, monkeypatch, local_data):
    bad = copy.deepcopy(local_data)
    bad["facts"]["spot_available"] = "sometimes"
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(bad, allow_unicode=True))
    monkeypatch.setenv("RGT_PROFILE_PATH", str(tmp_path))
    with pytest.raises(ProfileError) as info:
        load_profile("local")
    message = str(info.value)
    assert "facts.spot_available" in message and "\n" not in message


def test_broken_yaml_names_the_line(tmp_path: Path, monkeypatch):
    (tmp_path / "mine.yaml").write_text("name: mine\nfacts: [unclosed\n")
    monkeypatch.setenv("RGT_PROFILE_PATH", str(tmp_path))
    with pytest.raises(ProfileError, match=r"mine.yaml: line \d+ is not valid YAML"):
        load_profile("mine")


def test_a_file_that_is_not_utf8_is_one_clear_line(tmp_path: Path, monkeypatch):
    (tmp_path / "latin.yaml").write_bytes("name: café\n".encode("latin-1"))
    monkeypatch.setenv("RGT_PROFILE_PATH", str(tmp_path))
    with pytest.raises(ProfileError, match=r"latin.yaml: not UTF-8 text"):
        load_profile("latin")


def test_user_profile_directory_adds_profiles(tmp_path: Path, monkeypatch, local_data):
    mine = copy.deepcopy(local_data)
    mine["name"] = mine["facts"]["platform"] = "my-lab"
    (tmp_path / "my-lab.yaml").write_text(yaml.safe_dump(mine, allow_unicode=True))
    monkeypatch.setenv("RGT_PROFILE_PATH", str(tmp_path))
    assert load_profile("my-lab").name == "my-lab"


def test_an_edited_profile_is_read_again(tmp_path: Path, monkeypatch, local_data):
    """Even where the file system's clock is too coarse to move the mtime."""
    mine = copy.deepcopy(local_data)
    mine["name"] = mine["facts"]["platform"] = "my-lab"
    path = tmp_path / "my-lab.yaml"
    path.write_text(yaml.safe_dump(mine, allow_unicode=True))
    monkeypatch.setenv("RGT_PROFILE_PATH", str(tmp_path))
    assert load_profile("my-lab").title == local_data["title"]
    before = path.stat().st_mtime_ns
    mine["title"] = "My lab, edited"
    path.write_text(yaml.safe_dump(mine, allow_unicode=True))
    os.utime(path, ns=(before, before))
    assert load_profile("my-lab").title == "My lab, edited"


def test_a_dangling_profile_link_is_one_clear_line(tmp_path: Path, monkeypatch):
    (tmp_path / "ghost.yaml").symlink_to(tmp_path / "gone.yaml")
    monkeypatch.setenv("RGT_PROFILE_PATH", str(tmp_path))
    with pytest.raises(ProfileError, match=r"cannot read .*ghost.yaml"):
        load_profile("ghost")


def test_checkpoint_homes_must_live_on_the_checkpoint_tier(local_data):
    """rgt puts checkpoint homes under DURABLE_DIR; a profile naming another tier would say one
    thing and do another (issue 16: AutoDL's data-disk vs autodl-fs)."""
    data = copy.deepcopy(local_data)
    data["overrides"]["DURABLE_DIR"] = "{RGT_HOME}/boxes/{box}/scratch"
    assert "is not on checkpoint_tier 'durable'" in _invalid(data)
    data["overrides"]["DURABLE_DIR"] = "{RGT_HOME}/boxes/{box}/durable/deeper"
    assert Profile.model_validate(data)


def test_py_override_must_be_the_interpreter_rgt_uses(local_data):
    data = copy.deepcopy(local_data)
    data["overrides"]["PY"] = "/opt/conda/bin/python"
    assert "differs from launch.env_contract.python" in _invalid(data)


def test_autodl_checkpoints_go_where_the_profile_says():
    autodl = load_profile("autodl")
    home = next(t for t in autodl.storage.tiers if t.name == autodl.storage.checkpoint_tier)
    assert autodl.overrides["DURABLE_DIR"].startswith(home.path)
    assert home.survives["release"] is True  # the copy that outlives 释放
    assert autodl.overrides["PY"] == autodl.launch.env_contract.python
