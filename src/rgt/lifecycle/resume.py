"""`rgt resume`: relaunch an attempt that ended without succeeding, from the job's checkpoints.

On the same box the new attempt gets the old one's code snapshot (copied on the box), its spec
and its checkpoint home, so it continues exactly where the checkpoints left off. On another
box (`--on`, e.g. after a spot instance was outbid) the checkpoints travel first — from the old
box while it answers, else from the laptop's verified pull — re-hashed on the way, and the code
is pushed from the workdir. Either way the new run records the one it resumes: attempts chain.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rgt.errors import UserError
from rgt.lifecycle.boxes import connect
from rgt.lifecycle.launch import launch, prepare_home
from rgt.lifecycle.pull_plan import layout_of, manifest_of
from rgt.lifecycle.pull_verify import verify_pulled
from rgt.lifecycle.untrusted import sweep_links
from rgt.lifecycle.watch import refresh
from rgt.remote.layout import checkpoint_home
from rgt.spec import JobSpec
from rgt.store import LIVE, Box, Run, Store, rgt_home

RESUMABLE = ("failed", "cancelled", "vanished", "preempted", "sync-failed", "stopped")


def spec_of(run: Run) -> JobSpec:
    """The job spec the run was launched with (the record also carries launch facts)."""
    return JobSpec.model_validate({k: v for k, v in run.spec.items()
                                   if k in JobSpec.model_fields})


def resume(store: Store, box_name: str, run_id: str | None, *, on: str | None = None,
           progress=None) -> tuple[Run, list[str]]:
    """Start the next attempt of `run_id` on its box, or on box `on`. Returns (run, notes)."""
    box = store.box(box_name)
    run = store.run(box.name, run_id)
    later = store.next_attempt(run.id)
    if later is not None:
        raise UserError(f"run {run.id} was already resumed by {later.id} (on {later.box}); "
                        f"resume the chain's last attempt: rgt resume {later.box} {later.id}")
    target = store.box(on) if on and on != box.name else box  # --on its own box: stay
    status = _status(store, box, run, moving=target is not box)
    if status in LIVE:
        raise UserError(f"run {run.id} is still {status}; watch it with `rgt watch {box.name} "
                        f"{run.id}` (resume is for a run that ended without succeeding)")
    if status not in RESUMABLE:
        raise UserError(f"run {run.id} ended {status}; there is nothing to resume — "
                        f"`rgt run {target.name} JOB.yaml` starts a new run of the job")
    spec = spec_of(run)
    if target is box:
        return launch(store, box.name, spec, resumes=run, code_from=f"{run.remote_dir}/code",
                      progress=progress)
    if not spec.workdir.is_dir():
        raise UserError(f"the job's workdir {spec.workdir} is gone from this machine; the code "
                        f"must be pushed to {target.name} from it")
    notes = carry_checkpoints(store, box, run, target, spec, progress=progress)
    new_run, more = launch(store, target.name, spec, resumes=run, progress=progress)
    return new_run, notes + more


def _status(store: Store, box: Box, run: Run, *, moving: bool) -> str:
    """The run's status as its box says now; when the attempt moves to another box, a box
    that no longer answers is expected (that is often why it moves)."""
    if box.state != "up":
        return "vanished" if run.status in LIVE else run.status
    try:
        return refresh(store, box, run)["status"]
    except UserError:
        if not moving:
            raise
        return "vanished" if run.status in LIVE else run.status


def carry_checkpoints(store: Store, box: Box, run: Run, target: Box, spec: JobSpec, *,
                      progress=None) -> list[str]:
    """Copy the job's newest verified checkpoints from `run`'s home to its home on `target`."""
    source, local, temporary = _verified_copy(store, box, run)
    home = checkpoint_home(target, spec)
    transport = connect(target)
    try:
        # never mix two histories; earlier runs of the job there keep theirs, aside
        notes = prepare_home(transport, home, fresh=True, store=store, box=target).notes
        transport.put(local, home, progress=progress)
    finally:
        transport.close()
        if temporary:
            shutil.rmtree(local.parent, ignore_errors=True)
    return [*notes, f"carried the job's checkpoints from {source} to {target.name}:{home}"]


def _verified_copy(store: Store, box: Box, run: Run) -> tuple[str, Path, bool]:
    """(where they came from, a local directory holding them, whether it is temporary)."""
    reason = "it is down"
    if box.state == "up":
        carry = rgt_home() / "carry" / run.id
        shutil.rmtree(carry, ignore_errors=True)
        transport = connect(box)
        try:
            home = layout_of(run).ckpt
            manifest = manifest_of(transport, home, f"{run.remote_dir}/CARRY_MANIFEST.jsonl",
                                   ["."], carry / "manifests")
            transport.get(home, carry / "ckpt")
            swept = sweep_links(carry / "ckpt")  # the box's tree: nothing may lead out of it
            report = verify_pulled(carry / "ckpt", manifest)
            if report["ok"] and report["counts"]["files"] and not swept:
                return f"{box.name}:{home}", carry / "ckpt", True
            reason = "; ".join((report["problems"] + swept)[:2]) or "it holds no checkpoint"
        except UserError as err:
            reason = str(err)
        finally:
            transport.close()
        shutil.rmtree(carry, ignore_errors=True)
    for attempt in reversed(store.chain(run)):
        pulled = _pulled_checkpoints(store, attempt)
        if pulled is not None:
            return f"the verified pull in {pulled}", pulled, False
    raise UserError(f"no verified checkpoints to carry: {box.name} cannot give them ({reason}) "
                    f"and no pull of run {run.id} verified; pull it when the box answers "
                    "(rgt pull), or start the job over on the new box with `rgt run --fresh`")


def _pulled_checkpoints(store: Store, run: Run) -> Path | None:
    """The ckpt/ directory of the run's latest pull, if that pull verified."""
    evidence = store.latest_evidence("pull-verified", run.box, run.id)
    edges = store.edge_events("pull", run.box, run.id)
    if evidence is None or not evidence.ok or edges is None:
        return None
    ckpt = Path(edges[1]["detail"].get("dest", "")) / "ckpt"
    return ckpt if ckpt.is_dir() and any(ckpt.iterdir()) else None
