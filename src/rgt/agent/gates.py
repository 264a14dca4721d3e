"""The destructive steps an agent may ask for and only the human may give: `down` (and with
--discard-results), `cancel`, `run --fresh`, and renting through a platform's API.

Asked without an approval code, a gate answers what the step would do (what dies, what still
bills, what is unpulled) and the command the human types: `rgt approve CODE`. Asked again with
the code, it checks the approval (rgt.agent.approvals.use: this exact action, unexpired, given
by `rgt approve`, unused) and only then runs the verb, as the human would have typed it.

Each action is pinned by what makes it this step and no other: the box; the run's full id
(not a prefix, not "the newest", which may change); the spec file's sha256 for a fresh start;
every flag of a rent. An approval of `down` without results given up does not give them up.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rgt.agent import approvals
from rgt.errors import UserError


def down_action(box: str, discard_results: bool) -> dict[str, Any]:
    return {"verb": "down --discard-results" if discard_results else "down", "box": box}


def down_preview(box_name: str) -> dict[str, Any]:
    """What `rgt down BOX` would do now, from the same plan `rgt down` shows (it asks the box:
    run it in a worker thread). Raises UserError where `down` itself would refuse outright."""
    from rgt.lifecycle.down import plan_down
    from rgt.store import Store

    plan = plan_down(Store(), box_name)
    stop = plan.profile.meter_stop
    preview: dict[str, Any] = {
        "box": plan.box.name, "profile": plan.box.profile,
        "meter_stop_verb": plan.profile.facts.meter_stop_verb,
        "irreversible": bool(stop.irreversible),
        "rgt_stops_the_meter": plan.automated,  # False: the human clicks the console too
        "destroys": list(plan.deletes) if plan.deletes is not None else list(plan.lost_tiers),
        "keeps": list(plan.kept_tiers) if plan.deletes is None else [
            p for p in dict.fromkeys([plan.box.durable_dir, plan.box.data_dir])
            if p not in plan.deletes],
        "still_billing_after": list(plan.still_billing),
        "unpulled": plan.live + plan.unverified,
        "checkpoints_left_on_box": list(plan.left_behind),
        "notes": list(plan.notes),
    }
    if stop.timer:
        preview["timer"] = f"{stop.timer.after}: {stop.timer.effect}"
    if plan.unreachable:
        preview["box_did_not_answer"] = plan.unreachable
    if plan.resumed is not None:
        preview["finishes_a_teardown_begun_earlier"] = True
    return preview


def down_argv(box: str, discard_results: bool) -> tuple[list[str], str | None]:
    """The command `down` runs once approved, and what it is given on stdin: giving results
    up is typed, never --yes (the human typed the box name at `rgt approve`)."""
    if discard_results:
        return ["down", box, "--discard-results"], f"{box}\n"
    return ["down", box, "--yes"], None


def check_unchanged(request: approvals.Request, preview: dict[str, Any]) -> None:
    """Refuse when the results the human agreed to give up are not the ones at stake now (a
    run started or stopped being pulled since): they approved that list, not this one."""
    approved = sorted(request.preview.get("unpulled") or [])
    if approved != sorted(preview.get("unpulled") or []):
        raise approvals.ApprovalRefused(
            f"the box changed since approval {request.code} was given: unpulled was "
            f"{approved or 'nothing'}, is now {preview.get('unpulled') or 'nothing'}; "
            "nothing was done. Ask again for a fresh code")


def cancel_action(box: str, run_id: str) -> dict[str, Any]:
    return {"verb": "cancel", "box": box, "run": run_id}


def cancel_preview(watch_doc: dict[str, Any], box: str) -> dict[str, Any]:
    """What `rgt cancel` does to the run `rgt watch --json` described."""
    run = watch_doc.get("run") or {}
    return {
        "box": box, "run": run.get("id"), "status_now": run.get("status"),
        "what_happens": "SIGTERM to the run's processes (the trainer can checkpoint), SIGKILL "
                        "after the grace; the run reads `cancelled`",
        "newest_checkpoint": (run.get("last_checkpoint") or {}).get("name"),
        "still_billing_after": f"box {box} keeps billing: cancel stops the run, not the meter",
        "then": f"rgt pull {box} {run.get('id')} (log, checkpoints, partial outputs)",
    }


def fresh_action(box: str, spec: Path, after: str | None) -> dict[str, Any]:
    return {"verb": "run --fresh", "box": box, "spec": str(spec.resolve()),
            "spec_sha256": spec_hash(spec), "after": after}


def fresh_preview(box: str, spec: Path) -> dict[str, Any]:
    return {"box": box, "spec": str(spec.resolve()),
            "what_happens": "the job's checkpoint home on the box is moved aside (kept, never "
                            "deleted) and training starts over from step 0 instead of resuming",
            "spec_sha256": spec_hash(spec)}


def spec_hash(spec: Path) -> str:
    try:
        return hashlib.sha256(spec.read_bytes()).hexdigest()
    except OSError as err:
        raise UserError(f"{spec}: cannot read the job spec ({err.strerror})") from None


def rents(profile: str) -> bool:
    """Whether `up` with this profile and no --ssh/--host rents through the platform's API."""
    from rgt.platforms import platform_for

    return platform_for(profile).rents


def rent_action(box: str, argv: list[str]) -> dict[str, Any]:
    return {"verb": "up (rent)", "box": box, "argv": argv}


def rent_preview(box: str, profile_name: str, argv: list[str]) -> dict[str, Any]:
    from rgt.profiles import load_profile

    profile = load_profile(profile_name)
    stop = profile.meter_stop
    return {"box": box, "profile": profile_name, "command": "rgt " + " ".join(argv),
            "what_happens": "rents an instance through the platform's API: it bills from the "
                            "moment it starts until `rgt down`",
            "danger_clocks": list(profile.surface.danger_clocks),
            "still_billing_after_down": [b.what + (f" ({b.rate})" if b.rate else "")
                                         for b in stop.keeps_billing]}
