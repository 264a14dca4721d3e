"""`rgt down`: the teardown Iron Law, as code.

No meter-stopping verb runs until every run on the box has current verified evidence: it
finished, and was pulled, re-hashed and loaded *after* it finished. Then the user is shown
what the verb destroys and what keeps billing (the profile's tiers, or the platform's word for
this box where it knows better: `teardown`), and must type the box name.
`--discard-results` is the only way past missing evidence, and it cannot be combined with
`--yes`: giving results up is always typed by a person.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

from rgt.boxfacts import facts
from rgt.errors import UserError
from rgt.lifecycle import census, down_journal, interrupt
from rgt.lifecycle.boxes import connect
from rgt.lifecycle.watch import refresh
from rgt.platforms import ReleaseRefused, Teardown, platform_for
from rgt.platforms.base import Ability
from rgt.profiles import Profile, load_profile
from rgt.remote import group
from rgt.store import LIVE, TERMINAL, Box, Evidence, Run, Store, TeardownRecord, rgt_home


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
    deletes: list[str] | None = None  # a local box: exactly the paths `down` removes
    # the platform's word on what its release does to this box (None: the profile's tiers)
    teardown: Teardown | None = None
    # older checkpoints a verified pull left on the box (`rgt pull --checkpoints`): destroyed
    left_behind: list[str] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)  # run id -> `iron_law`'s verdict
    # a teardown a killed `down` began (rgt.lifecycle.down_journal): this plan finishes it
    resumed: TeardownRecord | None = None

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
        said = self.teardown and self.teardown.destroys
        return said if said is not None else self._tiers(kept=False)

    @property
    def kept_tiers(self) -> list[str]:
        said = self.teardown and self.teardown.keeps
        return said if said is not None else self._tiers(kept=True)

    @property
    def notes(self) -> list[str]:
        members = group.nodes(self.box)
        machines = [f"a group of {len(members)} machines, each billing until it is stopped: "
                    + ", ".join(group.describe(n) for n in members)] if members else []
        return machines + (self.teardown.notes if self.teardown else [])

    @property
    def still_billing(self) -> list[str]:
        said = self.teardown and self.teardown.still_billing
        if said is not None:
            return said
        return [" ".join(x for x in (b.what, b.rate and f"— {b.rate},",
                                     b.until and f"until {b.until}") if x).rstrip(",")
                for b in self.profile.meter_stop.keeps_billing]

    @property
    def automated(self) -> bool:
        """Can rgt stop the meter itself, or must the user click the console? The platform
        knows (a box registered by hand has no instance id for its API to act on)."""
        return platform_for(self.box.profile).stops_meter(self.box)


def iron_law(run_id: str, status: str, *, reachable: bool, ended: Any = None,
             superseded_by: str | None = None, evidence: Evidence | None = None,
             changed_after_pull: bool = False, pull_hint: str = "",
             never_started: bool = False) -> tuple[str, str]:
    """The Iron Law for one run: may the box go down as far as this run is concerned?

    Returns ``(verdict, reason)``: ``"ok"`` (its results are safely here), ``"superseded"``
    (ok: a later attempt carries its checkpoints on and is judged itself), ``"unstarted"``
    (ok: the platform found nothing of the run but what rgt wrote: no results exist, e.g. a
    Colab notebook never opened), ``"live"`` (refuse:
    still running) or ``"unverified"`` (refuse). Every `down` path decides through this.

    `status` is what the box says now when it answers (`reachable`), else the store's last
    observed status; `ended` the box's end time for the run (reachable only). A pull counts
    only if it *began after the run's end was observed*: the pull probes the run before it
    copies anything and records that status as ``run_status``, so a pull whose ``run_status``
    was not terminal copied a run still writing. `changed_after_pull`: the store recorded a
    status change after the pull (a relaunch, a vanish), so the pull no longer describes it.

    ====  =========  =====================  =====================================  ===========
    row   reachable  status                 evidence (latest pull-verified)        verdict
    ====  =========  =====================  =====================================  ===========
    0     yes        starting, never began  any                                    unstarted
                     (or a "launching" record whose `rgt run` died before the start)
    1     yes        live                   any                                    live
    2     no         live (end never seen)  any                                    unverified
    3     any        terminal               any, a later attempt resumed it        superseded
    4     any        terminal               none                                   unverified
    5     any        terminal               pull did not verify                    unverified
    6     any        terminal               ok, but began while the run was live   unverified
    7     yes        terminal               ok after the end, `ended` differs now  unverified
    8     no         terminal               ok after the end, status changed since unverified
    9     any        terminal               ok, began after the end, current       ok
    ====  =========  =====================  =====================================  ===========

    Anything refused is passed only by ``--discard-results`` with the box name typed.
    """
    pull = pull_hint or f"rgt pull {run_id}"
    if status in ("starting", "unstarted") and reachable and never_started:  # row 0
        return "unstarted", f"{run_id} never started: there are no results to lose"
    if status in LIVE:
        if reachable:
            return "live", f"{run_id} is still {status}"  # row 1
        return "unverified", (f"{run_id} was last seen {status} and the box does not answer, "
                              "so its end was never observed and its results cannot be "
                              "checked")  # row 2
    if superseded_by is not None:  # row 3: its checkpoints are the job's, pulled with `later`
        return "superseded", f"{run_id} ({status}) was resumed by {superseded_by}"
    if evidence is None:  # row 4
        return "unverified", f"{run_id} ({status}) was never pulled: {pull}"
    if not evidence.ok:  # row 5
        problems = "; ".join(str(p) for p in (evidence.detail.get("problems") or [])[:3])
        return "unverified", (f"{run_id}: the last pull did not verify ({problems}); pull "
                              f"again: {pull}")
    if evidence.detail.get("run_status") not in TERMINAL:  # row 6
        return "unverified", (f"{run_id}: pulled while it was "
                              f"{evidence.detail.get('run_status') or 'not yet ended'}, "
                              f"before its end was observed; pull again: {pull}")
    if reachable and evidence.detail.get("run_ended") != ended:  # row 7
        return "unverified", (f"{run_id}: it ran again after the last pull; pull again: "
                              f"{pull}")
    if not reachable and changed_after_pull:  # row 8
        return "unverified", (f"{run_id}: its status changed after the last pull and the box "
                              f"does not answer; its results cannot be checked")
    return "ok", f"{run_id} ({status}) pulled and verified after it ended"  # row 9


def judge_run(store: Store, box: Box, run: Run, state: dict[str, Any], *,
              reachable: bool) -> tuple[str, str]:
    """Gather one run's inputs to `iron_law` from the store."""
    evidence = store.latest_evidence("pull-verified", box.name, run.id)
    changed = False
    if evidence is not None:
        edges = store.edge_events("status", box.name, run.id)
        changed = edges is not None and edges[1]["at"] > evidence.at
    later = store.next_attempt(run.id)
    return iron_law(run.id, state["status"], reachable=reachable, ended=state.get("ended"),
                    superseded_by=later.id if later else None, evidence=evidence,
                    changed_after_pull=changed, pull_hint=f"rgt pull {box.name} {run.id}",
                    never_started=state.get("never_started") is True)


def plan_down(store: Store, box_name: str) -> DownPlan:
    box = store.box(box_name)
    if (teardown := store.open_teardown(box.name)) is not None:
        return resumed_plan(store, box, teardown)  # confirmed and begun: never judged again
    if box.state != "up":
        raise UserError(f"box {box_name!r} is already down (since "
                        f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(box.down_at or 0))})")
    plan = DownPlan(box=box, profile=load_profile(box.profile))
    runs = store.runs(box.name)
    transport = connect(box)
    strays: list[census.Stray] = []
    try:
        states = [refresh(store, box, run, transport) for run in runs]
        strays = _strays(store, box, transport, plan)
    except UserError as err:
        # A box gone or unreachable (e.g. destroyed in the console) must still be markable as
        # down; without a live answer only evidence taken after a run ended counts.
        plan.unreachable = str(err)
        states = [{"status": run.status, "ended": None} for run in runs]
    finally:
        transport.close()
    if strays:  # never deleted under their trainer, not even with --discard-results
        raise UserError(f"rgt down {box.name} refused: "
                        + " | ".join(s.reason(box.name) for s in strays))
    for run, state in zip(runs, states, strict=True):
        verdict, reason = judge_run(store, box, run, state, reachable=not plan.unreachable)
        plan.verdicts[run.id] = verdict
        {"live": plan.live, "unverified": plan.unverified,
         "superseded": plan.superseded}.get(verdict, []).append(reason)
        if verdict == "ok":
            plan.left_behind += left_behind(store, box, run)
    if plan.profile.facts.kind == "local":
        plan.deletes = local_deletes(box, runs)
    platform = platform_for(box.profile)
    if Ability.TEARDOWN in platform.abilities():
        plan.teardown = platform.teardown(store, box)
    return plan


def _strays(store: Store, box: Box, transport, plan: DownPlan) -> list[census.Stray]:
    """Live runs on the box that the record does not name (rgt.lifecycle.census). A box that
    does not answer the census (a paused container) is released whole, which ends whatever
    runs there; a box whose directories `down` deletes must answer it."""
    if not platform_for(box.profile).census:
        return []
    try:
        return census.unrecorded(store, box, transport)
    except UserError:
        if plan.profile.facts.kind == "local":
            raise
        return []


def resumed_plan(store: Store, box: Box, teardown: TeardownRecord) -> DownPlan:
    """The plan a cut-short teardown recorded, to finish it: nothing is probed (its own steps
    may have removed what a probe reads), nothing judged again."""
    down_journal.check_resumable(store, box, teardown)
    recorded = teardown.plan
    plan = DownPlan(box=box, profile=load_profile(box.profile), live=recorded["live"],
                    unverified=recorded["unverified"], unreachable=recorded["unreachable"],
                    superseded=recorded["superseded"], deletes=recorded["deletes"],
                    verdicts={r: v["verdict"] for r, v in recorded["runs"].items()},
                    resumed=teardown)
    plan.teardown = Teardown(still_billing=recorded["still_billing"])
    return plan


def left_behind(store: Store, box: Box, run: Run) -> list[str]:
    """What the run's verified pull chose to leave on the box: older checkpoints of its job
    (`rgt pull` brings the newest that verifies unless asked for more)."""
    evidence = store.latest_evidence("pull-verified", box.name, run.id)
    left = (evidence.detail or {}).get("checkpoints_left") if evidence else None
    if not isinstance(left, dict):
        return []
    try:
        count, size = int(left["count"]), float(left["bytes"])
        first, last = (int(n) for n in left["steps"])
    except (KeyError, TypeError, ValueError):
        return []
    names = [str(n) for n in left.get("names") or [] if isinstance(n, str)][:20]
    named = f": {', '.join(names)}{' …' if count > len(names) else ''}" if names else ""
    return [f"{count} older checkpoint(s) of {run.id} ({size / 1e9:.2f} GB, steps "
            f"{first}-{last}){named}, never pulled: `rgt pull {box.name} {run.id} "
            "--checkpoints all` first to keep them"]


def local_deletes(box: Box, runs: list[Run]) -> list[str]:
    """What `down` of a local box removes: only what rgt created. The scratch dir itself when
    `up` made it (and it holds no durable dir); otherwise, as with a user's own `--data-dir`,
    only the run dirs rgt made in it (<data_dir>/rgt/<run-id>)."""
    data = os.path.normpath(box.data_dir)
    durable = os.path.normpath(box.durable_dir)
    made = facts(box).created_dirs
    inside = durable == data or durable.startswith(data + os.sep)
    if data in made and not inside:
        return [data]
    root = os.path.join(data, "rgt")
    return [d for r in runs
            if (d := os.path.normpath(r.remote_dir)).startswith(root + os.sep)
            and os.path.dirname(d) == root and not durable.startswith(d)]


def refusal(plan: DownPlan) -> IronLawRefusal:
    """The refusal as a short table: a heading, one row per run in the way (its id, and why
    without the per-run `rgt pull` line), then the one command that settles them all."""
    name = plan.box.name
    stop = plan.profile.meter_stop
    rows = [_refused_row(name, reason) for reason in plan.live + plan.unverified]
    count = f"{len(rows)} run{'s' * (len(rows) != 1)}"
    head = (f"refusing to stop {name} ({stop.name} "
            f"{'cannot be undone' if stop.irreversible else 'is reversible'}): {count} "
            f"not pulled and verified after {'their' if len(rows) > 1 else 'its'} end")
    width = max(len(run) for run, _ in rows)
    table = [f"  {run.ljust(width)}  {why}" for run, why in rows]
    if plan.unreachable:  # what the box said instead of an answer (garbage, a timeout)
        table.append(f"the box's answer: {plan.unreachable}")
    if plan.live:
        settle = (f"settle it: `rgt pull {name} --all` once they end (`rgt watch {name} RUN "
                  f"--until-done` waits; `rgt cancel {name} --all` ends them now)")
    else:
        settle = f"settle it: `rgt pull {name} --all`" + (" once the box answers again"
                                                          * bool(plan.unreachable))
    return IronLawRefusal("\n".join([head, *table, settle,
                                      f"or give the results up: `rgt down {name} "
                                      "--discard-results`"]))


def _refused_row(box: str, reason: str) -> tuple[str, str]:
    """(run id, why) of one of `iron_law`'s reasons, which all begin with the run id; the
    `rgt pull BOX RUN` it ends with is left to the settling line."""
    run, _, why = reason.partition(" ")
    run = run.removesuffix(":")
    hint = f"rgt pull {box} {run}"
    for tail in (f"; pull again: {hint}", f": {hint}"):
        why = why.removesuffix(tail)
    return run, why


def execute_down(store: Store, plan: DownPlan, *, discarded: bool) -> str:
    """`_execute_down`, recorded as a journal before its first step (rgt.lifecycle.down_journal)
    and with a Ctrl-C said in one line: the box reads "up" until the last step, and a second
    `rgt down` finishes this same teardown. A plan that resumes a teardown continues it."""
    name = plan.box.name
    with interrupt.explained(lambda: _interrupted(store, name)), \
            down_journal.one_at_a_time(name):
        if plan.resumed is not None:  # read before the lock: as it stands now
            plan.resumed = store.open_teardown(name)
            if plan.resumed is None:
                raise UserError(f"another `rgt down {name}` finished this teardown meanwhile; "
                                "`rgt ls --all` shows the box down")
        teardown = plan.resumed or _begin(store, plan, discarded=discarded)
        return _execute_down(store, plan, teardown)


def _interrupted(store: Store, name: str) -> str:
    """What a Ctrl-C inside `execute_down` left, read back from the store."""
    if store.open_teardown(name) is not None:
        return (f"interrupted (Ctrl-C) while stopping {name}: the stop may have begun (a local "
                "box's directories partly deleted, a platform's stop request sent), so rgt "
                "still reads the box as up and its meter as running; the teardown is recorded, "
                f"and `rgt down {name}` again finishes this same one (safe to repeat, not asked "
                "again), then `rgt ls` shows it down")
    if store.box(name).state == "down":
        return f"interrupted (Ctrl-C) after {name} went down: it is down (`rgt ls --all`)"
    return (f"interrupted (Ctrl-C) before the teardown of {name} began: nothing was done and "
            f"it is up; `rgt down {name}` starts again")


def _begin(store: Store, plan: DownPlan, *, discarded: bool) -> TeardownRecord:
    """Record the confirmed teardown and its steps: from here on it is finished, not redone."""
    stop = plan.profile.meter_stop
    kind = ("local" if plan.deletes is not None else "release" if plan.automated
            else "unreachable" if plan.unreachable else "console")
    return down_journal.record(
        store, plan.box, kind=kind, discarded=discarded, verdicts=plan.verdicts,
        live=plan.live, unverified=plan.unverified, superseded=plan.superseded,
        unreachable=plan.unreachable, deletes=plan.deletes, still_billing=plan.still_billing,
        meter_stop=stop.name, stop_how=stop.how or stop.name)


def needs_your_word(plan: DownPlan) -> bool:
    """Whether only the user can stop this box's meter (no API, no scheduler; not this
    machine): then `down` is true only once they typed that they did it in the console."""
    return plan.deletes is None and not plan.automated


def await_console_stop(store: Store, plan: DownPlan) -> str:
    """`down --yes` where rgt cannot stop the meter: nothing is stopped, so the box stays up
    (and billing), recorded as waiting for the user's console step; returns that step."""
    stop = plan.profile.meter_stop
    how = stop.how or stop.name
    box = store.box(plan.box.name)
    store.update_box(box.name, extra={**box.extra, "awaiting_console": {
        "since": (facts(box).awaiting_console or {}).get("since") or time.time(),
        "how": how}})
    store.record("down-awaiting", {"how": how}, box=box.name)
    return how


def stopped_by(kind: str) -> str:
    """Who stopped the meter, by the journal's kind: rgt itself (an API, a scheduler, this
    machine's directories) or the user's typed word that they did it in the console."""
    return "rgt" if kind in ("local", "release") else "your word"


def _execute_down(store: Store, plan: DownPlan, teardown: TeardownRecord) -> str:
    """Stop the meter (the platform's `release`), remove a local box's dirs, or record the
    user's console step (no API): each recorded step not yet done, marked as it completes; then
    the box reads "down", with its evidence, in the transaction that ends the teardown. Runs
    only what `plan_down` cleared. Returns a summary."""
    for step in teardown.remaining:
        try:
            what = _teardown_step(store, plan, step)
        except ReleaseRefused as err:  # nothing was done: this teardown must not be resumed
            store.void_teardown(teardown, str(err))
            raise
        store.teardown_step_done(teardown, step, what)
    box = store.box(plan.box.name)  # a release may have recorded what still bills
    outcome = down_journal.outcome(teardown, box.durable_dir)
    # a platform that looked (e.g. Lambda: no filesystem attached) may honestly say "nothing"
    still_billing = facts(box).still_billing
    if still_billing is None:  # the platform said nothing: as the plan said
        still_billing = teardown.plan["still_billing"]
    extra = {k: v for k, v in box.extra.items() if k != "awaiting_console"}
    with store.batch():
        store.update_box(box.name, state="down", down_at=time.time(),
                         extra={**extra, "still_billing": still_billing,
                                "stopped_by": stopped_by(teardown.plan["kind"])})
        store.add_evidence("teardown-confirmed", box.name, True,
                           {"verb": plan.profile.meter_stop.name,
                            "discarded_results": teardown.plan["discarded"],
                            "unverified": plan.unverified, "live": plan.live,
                            "outcome": outcome, "teardown": teardown.id,
                            "resumed": plan.resumed is not None})
        store.record("down", {"outcome": outcome, "discarded": teardown.plan["discarded"],
                              "teardown": teardown.id}, box=box.name)
        store.finish_teardown(teardown)
    return outcome


def _teardown_step(store: Store, plan: DownPlan, step: str) -> str:
    """One step of the journal; each can be run again whole after a kill inside it."""
    box = plan.box
    if step == "stop-live-runs":
        _stop_live_runs(store, box)
        return "given-up runs stopped"
    if step.startswith("delete:"):
        # this machine: exactly what the panel listed, what rgt created, never the user's own
        # directory; nothing bills, so there is no meter for the platform to stop
        shutil.rmtree(step.removeprefix("delete:"), ignore_errors=True)
        return "removed"
    if step == "rmdir-rgt":
        with contextlib.suppress(OSError):  # rgt's own container of run dirs, once empty
            os.rmdir(os.path.join(box.data_dir, "rgt"))
        return "removed if empty"
    if step == "release":  # an API or scheduler stops the meter: the platform's `release`
        return platform_for(box.profile).release(store, box).what
    raise UserError(f"the teardown of {box.name} has a step this rgt does not know ({step!r}): "
                    "finish it with the rgt that began it")


def _stop_live_runs(store: Store, box: Box) -> None:
    """SIGTERM the given-up runs' process groups where the box answers; mark them cancelled.

    A paused run (e.g. a preempted vast.ai container) has no processes, and a box that stopped
    answering cannot be asked: the meter-stop verb that follows ends them either way.
    """
    runs = [r for r in store.runs(box.name)
            if r.status in LIVE and (not r.spec.get("platform_run")  # those: release
                                     or group.nodes(box) and group.run_nodes(r) > 1)]
    # (a run on a group of machines is the runners', stopped here on every node)
    transport = connect(box) if any(r.status != "paused" for r in runs) else None
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
                        check=False, timeout=30, limit=4096)  # says nothing; read no more
                except UserError:
                    transport.close()
                    transport = None  # gone quiet: do not wait on it for every run
            others = group.nodes(box)[1:group.run_nodes(run)]
            if others and transport is not None:  # a group's other nodes, all at once
                group.stop_nodes(box, others, run.id, transport, group.stop_runner)
            store.update_run(run.id, status="cancelled")
    finally:
        if transport is not None:
            transport.close()
