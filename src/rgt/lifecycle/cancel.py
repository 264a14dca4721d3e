"""`rgt cancel`: stop a live run so its trainer checkpoints first, then make sure it is gone.

The stop goes to the run's on-box RUNNER, not straight to the job: the runner forwards SIGTERM
to the job's process group and records the signal, so state.json says "stopped by SIGTERM" and
`recover:` does not restart it. After the grace (the time a trainer gets to write its
checkpoint) whatever is left of the job's group, then the runner, gets SIGKILL. A run that a
platform's own scheduler holds is stopped by the platform's optional `cancel` (Slurm: requeue
turned off, SIGTERM to the batch script, which forwards it to the trainer, then after the grace
scancel and SIGKILL after KillWait; Kubernetes: delete the Job, SIGTERM to its pods and SIGKILL
after their terminationGracePeriodSeconds).
"""

from __future__ import annotations

import re
import time
from typing import Any

from rgt.errors import UserError
from rgt.platforms import platform_for
from rgt.platforms.base import Ability
from rgt.profiles import load_profile
from rgt.remote import group
from rgt.remote.calls import run_json
from rgt.store import LIVE, Box, Run, Store
from rgt.transport import Transport

DEFAULT_GRACE_S = 30.0

def default_grace(box: Box) -> float:
    """The profile's spot/preemption grace when it names one in seconds ('30s (KillWait)'),
    else DEFAULT_GRACE_S: a cancel should give a trainer the time a preemption would."""
    text = load_profile(box.profile).facts.spot_grace
    found = re.match(r"\s*~?(\d+(?:\.\d+)?)\s*s\b", text or "")
    grace = float(found.group(1)) if found else 0.0
    return grace if grace > 0 else DEFAULT_GRACE_S


def grace_for(box: Box, run: Run, asked: float | None) -> float:
    """The grace `rgt cancel` will really give the run, to say before it acts: the platform's
    own when its scheduler sets one (a Kubernetes Job's pods: terminationGracePeriodSeconds,
    sized at launch from the checkpoint write time), which --grace cannot change; else
    --grace, else the profile's."""
    platform = platform_for(box.profile)
    own = None
    if Ability.CANCEL_GRACE in platform.abilities() and run.status in LIVE and box.state == "up":
        own = platform.cancel_grace(box, run)
    if own is None:
        return default_grace(box) if asked is None else asked
    if asked is not None and asked != own:
        raise UserError(f"--grace {asked:g}: the pods of run {run.id} stop with their own "
                        f"grace, {own:g} s (terminationGracePeriodSeconds, set at launch from "
                        "the checkpoint write time); drop --grace")
    return own


def cancel(store: Store, box: Box, run: Run, grace_s: float) -> dict[str, Any]:
    """Stop the run (SIGTERM, SIGKILL after grace_s), mark it cancelled, return what was done."""
    if run.status not in LIVE:
        raise UserError(f"run {run.id} already ended ({run.status}); nothing to cancel — "
                        f"`rgt pull {box.name} {run.id}` fetches what it left")
    if box.state != "up":
        raise UserError(f"box {box.name} is {box.state}; its runs ended with it")
    if run.status == "paused":
        raise UserError(f"run {run.id} is paused (its machine is not running): cancel it once "
                        f"`rgt watch {box.name}` says it is back, or give it up with "
                        f"`rgt down {box.name} --discard-results`")
    platform = platform_for(box.profile)
    transport = platform.connect(box)
    try:
        # the platform's scheduler first (None: the run is the on-box runner's, stop it there)
        report = platform.cancel(transport, box, run, grace_s) \
            if Ability.CANCEL in platform.abilities() else None
        if report is None:
            report = _stop_on_box(transport, f"{run.remote_dir}/state.json", grace_s)
            # the run's other nodes (a group): all at once, each with the same grace
            others = group.nodes(box)[1:group.run_nodes(run)]
            if others:
                group.on_every_node(box, transport, only=others, step=lambda n, t: _stop_on_box(
                    t, f"{group.run_dir(n, run.id)}/state.json", grace_s))
                report = {**report, "nodes": 1 + len(others)}
    finally:
        transport.close()
    store.update_run(run.id, status="cancelled")
    store.record("cancel", {"grace_s": grace_s, **report}, box=box.name, run=run.id)
    run.status, run.updated = "cancelled", time.time()
    return report


def _stop_on_box(transport: Transport, state_path: str, grace_s: float) -> dict[str, Any]:
    """rgt.onbox.stop on the box; its report is the box's answer, checked before use."""
    report = run_json(transport, "stop", state_path, str(grace_s), timeout=grace_s + 60)
    if not isinstance(report, dict) or not isinstance(report.get("sent"), list):
        raise UserError("could not stop the run on the box (its answer was not a stop "
                        "report); nothing was marked cancelled, try again")
    return report
