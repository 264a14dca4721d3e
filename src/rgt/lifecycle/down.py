"""`rgt down`: the teardown Iron Law, as code.

No meter-stopping verb runs until every run on the box has current verified evidence: it
finished, and was pulled, re-hashed and loaded *after* it finished. Then the user is shown
what the profile says the verb destroys and what keeps billing, and must type the box name.
`--discard-results` is the only way past missing evidence, and it cannot be combined with
`--yes`: giving results up is always typed by a person.
"""

from __future__ import annotations

import shlex
import shutil
import time
from dataclasses import dataclass, field

from rgt.errors import UserError
from rgt.lifecycle.boxes import transport_for
from rgt.lifecycle.watch import refresh
from rgt.platforms import platform_for
from rgt.profiles import Profile, load_profile
from rgt.store import LIVE, TERMINAL, Box, Store, rgt_home


class IronLawRefusal(UserError):
    """Teardown refused: results are not safely off the box."""

    exit_code = 3


@dataclass
class DownPlan:
    box: Box
    profile: Profile
    live: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    unreachable: str = ""  # why the box did not answer, if it did not
    superseded: list[str] = field(default_factory=list)  # attempts a later one resumed

    @property
    def safe(self) -> bool:
        return not self.live and not self.unverified

    def _tiers(self, kept: bool) -> list[str]:
        stop = self.profile.meter_stop.name
        return [t.name + (f" ({path})" if (path := self._path(t.path)) else "")
                for t in self.profile.storage.tiers if (t.survives.get(stop) is True) == kept]

    def _path(self, template: str) -> str:
        """The tier's path on this box; empty where the profile leaves a blank to fill in."""
        path = template.replace("{RGT_HOME}", str(rgt_home())).replace("{box}", self.box.name)
        return "" if "{" in path or "<" in path else path

    @property
    def lost_tiers(self) -> list[str]:
        return self._tiers(kept=False)

    @property
    def kept_tiers(self) -> list[str]:
        return self._tiers(kept=True)

    @property
    def still_billing(self) -> list[str]:
        return [" ".join(x for x in (b.what, b.rate and f"— {b.rate},",
                                     b.until and f"until {b.until}") if x).rstrip(",")
                for b in self.profile.meter_stop.keeps_billing]

    @property
    def automated(self) -> bool:
        """Can rgt stop the meter itself, or must the user click the console?"""
        platform = platform_for(self.box.profile)
        if self.box.is_local and self.box.profile != "slurm":
            return True
        # a box registered by hand (`rgt up`) has no instance id for the API to act on
        has_api = platform is not None and hasattr(platform, "stop_meter")
        return has_api and (self.box.profile == "slurm" or "instance_id" in self.box.extra)


def plan_down(store: Store, box_name: str) -> DownPlan:
    box = store.box(box_name)
    if box.state != "up":
        raise UserError(f"box {box_name!r} is already down (since "
                        f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(box.down_at or 0))})")
    plan = DownPlan(box=box, profile=load_profile(box.profile))
    runs = store.runs(box.name)
    transport = transport_for(box)
    try:
        states = [refresh(store, box, run, transport) for run in runs]
    except UserError as err:
        # A box gone or unreachable (e.g. destroyed in the console) must still be markable as
        # down; without a live answer only evidence taken after a run ended counts.
        plan.unreachable = str(err)
        states = [{"status": run.status, "ended": None} for run in runs]
    finally:
        transport.close()
    for run, state in zip(runs, states, strict=True):
        if plan.unreachable and state["status"] in LIVE:
            plan.unverified.append(f"{run.id} was last seen {state['status']} and the box does "
                                   "not answer, so its results cannot be checked")
            continue
        if state["status"] in LIVE:
            plan.live.append(f"{run.id} is still {state['status']}")
            continue
        if (later := store.next_attempt(run.id)) is not None:
            # a superseded attempt: its checkpoints are the job's, carried on by `later`,
            # whose pull fetches them; only the chain's last attempt must be pulled
            plan.superseded.append(f"{run.id} ({state['status']}) was resumed by {later.id}")
            continue
        evidence = store.latest_evidence("pull-verified", box.name, run.id)
        if evidence is None:
            plan.unverified.append(f"{run.id} ({state['status']}) was never pulled: "
                                   f"rgt pull {box.name} {run.id}")
        elif not evidence.ok:
            problems = "; ".join(evidence.detail.get("problems", [])[:3])
            plan.unverified.append(f"{run.id}: the last pull did not verify ({problems}); "
                                   f"pull again: rgt pull {box.name} {run.id}")
        elif plan.unreachable and evidence.detail.get("run_status") in TERMINAL:
            continue  # pulled after it ended; the box cannot say more now
        elif evidence.detail.get("run_ended") != state.get("ended"):
            plan.unverified.append(f"{run.id}: pulled before it finished; pull again: "
                                   f"rgt pull {box.name} {run.id}")
    return plan


def refusal(plan: DownPlan) -> IronLawRefusal:
    reasons = plan.live + plan.unverified
    return IronLawRefusal(
        f"refusing to stop {plan.box.name} ({plan.profile.meter_stop.name} "
        f"{'cannot be undone' if plan.profile.meter_stop.irreversible else 'is reversible'}): "
        + " | ".join(reasons)
        + " — or give the results up with --discard-results")


def execute_down(store: Store, plan: DownPlan, *, discarded: bool) -> str:
    """Stop the meter (local) or record the user's console step (no API). Returns a summary."""
    box = plan.box
    if discarded and plan.live and not plan.unreachable:
        _stop_live_runs(store, box)
    platform = platform_for(box.profile)
    if plan.automated and platform is not None:  # an API or scheduler stops the meter
        outcome = platform.stop_meter(store, box)
        box = store.box(box.name)  # the platform may have recorded what still bills
    elif plan.unreachable and not box.is_local:
        stop = plan.profile.meter_stop
        outcome = (f"marked down without reaching it ({plan.unreachable}); make sure the "
                   f"console shows it gone: {stop.how or stop.name}")
    elif box.is_local:
        shutil.rmtree(box.data_dir, ignore_errors=True)
        outcome = f"removed scratch {box.data_dir}; kept durable {box.durable_dir}"
    else:
        stop = plan.profile.meter_stop
        outcome = f"you confirmed the console step: {stop.how or stop.name}"
    # a platform that looked (e.g. Lambda: no filesystem attached) may honestly say "nothing"
    still_billing = box.extra.get("still_billing", plan.still_billing)
    store.update_box(box.name, state="down", down_at=time.time(),
                     extra={**box.extra, "still_billing": still_billing})
    store.add_evidence("teardown-confirmed", box.name, True,
                       {"verb": plan.profile.meter_stop.name, "discarded_results": discarded,
                        "unverified": plan.unverified, "live": plan.live, "outcome": outcome})
    store.record("down", {"outcome": outcome, "discarded": discarded}, box=box.name)
    return outcome


def _stop_live_runs(store: Store, box: Box) -> None:
    """SIGTERM the given-up runs' process groups where the box answers; mark them cancelled.

    A paused run (e.g. a preempted vast.ai container) has no processes, and a box that stopped
    answering cannot be asked: the meter-stop verb that follows ends them either way.
    """
    runs = [r for r in store.runs(box.name)
            if r.status in LIVE and not r.spec.get("platform_run")]  # those: stop_meter
    transport = transport_for(box) if any(r.status != "paused" for r in runs) else None
    try:
        for run in runs:
            if transport is not None and run.status != "paused":
                state_file = shlex.quote(f"{run.remote_dir}/state.json")
                try:
                    transport.run(
                        f"pid=$({shlex.quote(transport.python)} -c 'import json,sys;"
                        "print(json.load(open(sys.argv[1]))"
                        f".get(\"pid\") or \"\")' {state_file}); "
                        f"[ -n \"$pid\" ] && kill -TERM -- -$pid 2>/dev/null; true",
                        check=False, timeout=30)
                except UserError:
                    transport.close()
                    transport = None  # gone quiet: do not wait on it for every run
            store.update_run(run.id, status="cancelled")
    finally:
        if transport is not None:
            transport.close()
