"""A platform's optional verbs are typed abilities (rgt.platforms.base.Ability), each absent one
with its reason; what rgt keeps about a box is read through one typed record (rgt.boxfacts),
and a store written before it reads the same."""

from __future__ import annotations

import time

import pytest

from rgt.boxfacts import BoxFacts, facts
from rgt.errors import UserError
from rgt.platforms import platform_for
from rgt.platforms.base import Ability
from rgt.spec import JobSpec
from rgt.store import Box, Store

# what each platform can do beyond the required verbs: a verb added or lost is a decision
EXPECTED = {
    "local": set(),
    "generic-ssh": set(),
    "autodl": set(),
    "lambda": {Ability.OFFERS, Ability.CLOUD_STATUS},
    "vastai": {Ability.OFFERS, Ability.CLOUD_STATUS, Ability.GATE},
    "runpod": {Ability.OFFERS, Ability.CLOUD_STATUS, Ability.GATE, Ability.TEARDOWN},
    "slurm": {Ability.DEPENDENCY_ON, Ability.RENDER, Ability.CANCEL},
    "kubernetes": {Ability.DEPENDENCY_ON, Ability.RENDER, Ability.CANCEL, Ability.CANCEL_GRACE,
                   Ability.TEARDOWN},
    "colab": {Ability.RENDER, Ability.TEARDOWN},
    "kaggle": {Ability.RENDER},
}


@pytest.mark.parametrize("profile", sorted(EXPECTED))
def test_each_platform_declares_its_abilities_and_why_it_lacks_the_rest(profile):
    abilities = platform_for(profile).abilities()
    assert set(abilities.has) == EXPECTED[profile]
    for ability in Ability:
        if ability in abilities:
            assert abilities.why_not(ability) == ""
        else:
            assert len(abilities.why_not(ability)) > 20, (profile, ability)


def test_a_platform_that_rents_through_an_api_says_it_rents():
    """`rents` is what the MCP server asks before `up` without ssh/host: a rental spends money
    and needs the user's approval; each platform with a control plane to ask rents there."""
    for profile, abilities in EXPECTED.items():
        assert platform_for(profile).rents == (Ability.CLOUD_STATUS in abilities), profile


def test_an_absent_verb_refuses_with_its_reason_and_render_says_it_as_before():
    platform = platform_for("generic-ssh")
    box = Box("b", "generic-ssh", {}, "/d", "/d", None, "up", time.time())
    with pytest.raises(UserError, match="generic-ssh has no cloud status: rgt does not rent"):
        platform.cloud_status(Store.__new__(Store), box)
    from rgt.lifecycle.render import renderer

    with pytest.raises(UserError) as err:
        renderer("generic-ssh", JobSpec(name="j", run="python t.py"))
    assert str(err.value).startswith(
        "generic-ssh submits nothing to render: its boxes run the job under rgt's on-box "
        "runner, as the spec says; `rgt run BOX JOB.yaml --dry-run` shows")


def test_box_facts_read_an_old_store_unchanged(tmp_path):
    store = Store(tmp_path / "state.db")
    rented = {"uname": "Linux x86_64", "python": "python3", "python_version": "3.10.12",
              "python_executable": "/usr/bin/python3", "created_dirs": ["/workspace/rgt"],
              "platform": "vastai", "instance_id": 4242, "offer_id": 77,
              "still_billing": ["a kept disk"], "at_risk": [{"what": "Drive", "at": 1.0}, "x"]}
    store.add_box(Box("r", "vastai", {"host": "h"}, "/d", "/d", 1.5, "up", time.time(),
                      extra=rented))
    store.add_box(Box("m", "generic-ssh", {"host": "h"}, "/d", "/d", None, "up", time.time()))
    again = Store(tmp_path / "state.db")
    found = facts(again.box("r"))
    assert again.box("r").extra == rented  # the format is what it was
    assert found.instance_id == 4242 and found.rented  # a number stays one (`ls --json`)
    assert (found.python, found.created_dirs, found.still_billing) == (
        "python3", ["/workspace/rgt"], ["a kept disk"])
    assert found.at_risk == [{"what": "Drive", "at": 1.0}]
    assert found.own == {"platform": "vastai", "offer_id": 77}  # the platform's own fields
    mine = facts(again.box("m"))
    assert not mine.rented and mine.still_billing is None and mine.python is None


def test_box_facts_of_the_wrong_shape_read_as_absent():
    found = BoxFacts.parse({"instance_id": True, "python": 3.5, "created_dirs": "/x",
                            "still_billing": "disk", "awaiting_console": [], "at_risk": {}})
    assert found == BoxFacts()
    assert BoxFacts.parse({"still_billing": []}).still_billing == []  # looked: nothing
