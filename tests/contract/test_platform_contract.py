"""The platform contract, written once and run on every platform's stand (fsspec's abstract test
suites are the model): each case drives the real `rgt` command line against the platform's fake
control plane or real local component (tests/contract/stands.py). A case that does not apply
to a platform is skipped with the reason.

Cases: the verbs in order (provision → launch → state → logs → fetch → release), a create whose
answer was lost and is adopted, `down` of a box registered by hand, and a release that the
control plane confirms only after a few polls.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from boxkit import write_job
from cli import rgt
from stands import STANDS

from rgt.store import Store

JOB = "echo contract-says-hello && mkdir -p out && echo 42 > out/answer.txt"


def on_every_platform(case: str):
    """Parametrize `stand` over every platform; the ones the case does not fit are skipped
    with their reason (may_skip: a skip here is a fact about the platform, not a missing
    install, so CI allows it)."""
    params = []
    for name, stand in STANDS.items():
        reason = stand.why_not.get(case)
        marks = [pytest.mark.may_skip, pytest.mark.skip(reason=f"{name}: {reason}")] \
            if reason else []
        if stand.xdist_group:
            marks.append(pytest.mark.xdist_group(stand.xdist_group))
        params.append(pytest.param(name, id=name, marks=marks))
    return pytest.mark.parametrize("stand", params, indirect=True)


def ok(stand, *args: str, input: str | None = None) -> str:
    """The real `rgt` command line with the stand's environment; it must succeed."""
    result = rgt(*args, input=input, env=stand.env)
    assert result.returncode == 0, f"rgt {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def down(stand, box: str) -> str:
    """`rgt down` confirmed as a user does, by typing the box's name: on a platform whose meter
    rgt cannot stop itself (a hand-rented box) that is the user's word that they did."""
    return ok(stand, "down", box, input=f"{box}\n")


@on_every_platform("verbs_in_order")
def test_verbs_in_order(stand, tmp_path: Path):
    ok(stand, "up", "box", *stand.up_args())                             # provision
    created = stand.live()
    spec = write_job(tmp_path / "job", run=JOB, outputs=["out"])
    run_id = ok(stand, "run", "box", str(spec), "-d").strip().splitlines()[-1]  # launch
    stand.after_launch(run_id)
    watched = ok(stand, "watch", "box", run_id, "--until-done", "--timeout", "90")  # state
    assert "succeeded" in watched
    assert "contract-says-hello" in ok(stand, "logs", "box", run_id)     # logs
    ok(stand, "pull", "box", run_id, "--dest", str(tmp_path / "home"))   # fetch
    assert (tmp_path / "home" / "out" / "answer.txt").read_text() == "42\n"
    down(stand, "box")                                                   # release
    assert stand.live() == [] and Store().box("box").state == "down"
    assert len(stand.destroy_calls()) == len(created)  # one release per thing created


@on_every_platform("lost_create")
def test_lost_create_answer_is_adopted(stand):
    """The create was done but its answer never came: `rgt up` finds the instance it made
    (by its name) instead of renting a second one, and `down` releases it."""
    stand.lose_create_answer()
    ok(stand, "up", "box", *stand.up_args())
    (instance,) = stand.live()  # one instance, not a second rented after the lost answer
    assert str(Store().box("box").extra["instance_id"]) == str(instance)  # and it is the box's
    down(stand, "box")
    assert stand.live() == []


@on_every_platform("hand_registered")
def test_down_of_a_hand_registered_box(stand):
    """A box the user rented by hand and registered with --ssh: `down` forgets it and
    releases nothing on any control plane (rgt never created it)."""
    ok(stand, "up", "hand", *stand.hand_args())
    down(stand, "hand")
    assert stand.destroy_calls() == [] and stand.live() == []
    assert Store().box("hand").state == "down"


@on_every_platform("slow_release")
def test_release_slow_to_confirm(stand):
    """The control plane accepts the release at once but shows the instance for a few more
    polls: `down` waits for it to be gone before it says released."""
    ok(stand, "up", "box", *stand.up_args())
    stand.confirm_slowly()
    down(stand, "box")
    assert stand.live() == [], "down returned before the release was confirmed"
    assert len(stand.destroy_calls()) == 1  # waited, without asking twice
