"""`rgt run`: push the workdir, hand over secrets on stdin, start the job its platform's way.

The platform's `launch` starts it: on an SSH box the on-box runner (`rgt.onbox.runner`), which
owns `state.json`, the log, signal forwarding and the verified copy of outputs to the durable
tier; on Slurm an sbatch job. Each run gets its own directory (`rgt.remote.layout`), so a new
launch never rewrites a script a live run is reading (principle 6).

Checkpoints belong to the job, not to one run: every run of a job sees the same
`$RGT_CKPT_DIR` (its checkpoint home on the durable tier), so launching it again — after a
crash, a preemption, on another box — resumes from the newest checkpoint there. A run that
picks up an earlier attempt's checkpoints records that attempt (`resumes`): attempts chain.
"""

from __future__ import annotations

import os
import secrets
import shlex
import time
from dataclasses import dataclass

from rgt.errors import UserError
from rgt.hostos import exclusive_lock
from rgt.lifecycle import census, fit, intent, interrupt
from rgt.lifecycle.pushlist import push_excludes
from rgt.lifecycle.ship import ship_library
from rgt.lifecycle.watch import refresh
from rgt.platforms import Platform, platform_for
from rgt.platforms.base import Ability, refuse_foreign_sections
from rgt.profiles import Profile, load_profile
from rgt.remote import group, group_meet
from rgt.remote.calls import write_file
from rgt.remote.layout import Layout
from rgt.spec import JobSpec, drop_torch_installs
from rgt.store import LIVE, Box, Run, Store
from rgt.transport import Transport


def new_run_id(job: str) -> str:
    return f"{job}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def secret_values(spec: JobSpec) -> bytes:
    """NAME=VALUE lines for the secrets the spec names, read from this machine's environment,
    byte for byte."""
    missing = [name for name in spec.secrets if not os.environ.get(name)]
    if missing:
        raise UserError(f"the job needs secrets that are not set here: {', '.join(missing)}; "
                        "export them in this shell (their values travel to the box on stdin)")
    lines = []
    for name in spec.secrets:
        # fsencode: the value's own bytes (undecodable ones included), which the runner reads
        # back unchanged as NAME=everything-after-the-first-= up to the newline
        value = os.fsencode(os.environ[name])
        if b"\n" in value:
            raise UserError(f"secret {name} contains a newline; store it as a single line")
        lines.append(name.encode() + b"=" + value)
    return b"\n".join(lines) + b"\n" if lines else b""


def refuse_second_launch(store: Store, box: Box, spec: JobSpec, transport: Transport) -> None:
    # The store's status is what the last watch saw; ask the box before calling a run live.
    claimed = [r for r in store.runs(box.name) if r.job == spec.name and r.status in LIVE]
    live = [r for r in claimed if refresh(store, box, r, transport)["status"] in LIVE]
    if live:
        raise UserError(f"job {spec.name!r} already has a live run on {box.name} ({live[0].id}); "
                        f"watch it with `rgt watch {box.name} {live[0].id}` — a second launch "
                        "would race it for the same checkpoints")


def refuse_unlaunchable(box: Box, platform: Platform, spec: JobSpec, after: str | None) -> None:
    """What `rgt run` refuses, and its --dry-run with it, before the box is asked anything: a
    box that is down, a spec section for another platform, a sweep or --after where no
    scheduler chains runs."""
    if box.state != "up":
        raise UserError(f"box {box.name!r} is down; register a new one with `rgt up`")
    refuse_foreign_sections(platform, spec)
    fit.refuse_tpu(spec)
    if (spec.grid or after) and Ability.DEPENDENCY_ON not in platform.abilities():
        what = "a sweep (`grid`)" if spec.grid else "--after"
        raise UserError(f"{what} needs a scheduler (the slurm profile's job arrays and "
                        f"dependencies); on a {box.profile} box, run one job per cell")


def job_setup(profile: Profile, spec: JobSpec) -> tuple[str, list[str]]:
    """The setup the box runs, and the torch installs taken out of it where the profile's image
    is the PyTorch environment."""
    if profile.launch.env_contract.pip_install_torch_forbidden:
        return drop_torch_installs(spec.setup)
    return spec.setup, []


def launch(store: Store, box_name: str, spec: JobSpec, *, after: str | None = None,
           progress=None, fresh: bool = False, resumes: Run | None = None,
           code_from: str | None = None, streams: int = 0,
           skip_resource_check: bool = False) -> tuple[Run, list[str]]:
    """Push, hand over secrets, start detached. Returns the run and any notes for the user.

    `after` names an earlier run of the same box: this one starts only once that one
    succeeded (a scheduler dependency; only platforms with a scheduler can chain stages).
    `fresh` moves the job's checkpoint home aside first (never deletes it), so training starts
    over. `resumes` is the attempt this run continues (`rgt resume`); without it, a launch that
    finds checkpoints from an unfinished run of the job on this box continues that run.
    `code_from` is a code snapshot already on the box (the resumed run's), copied instead of
    pushing the workdir. `streams` fixes the push's parallel connections (0: chosen from the
    link). `skip_resource_check` runs without measuring the spec's resources against the box
    (`rgt.lifecycle.fit`); the run's record says so, and a resume of it inherits the choice.
    """
    box = store.box(box_name)
    profile = load_profile(box.profile)
    platform = platform_for(box.profile)
    refuse_unlaunchable(box, platform, spec, after)
    dependency = platform.dependency_on(store.run(box.name, after)) if after else None
    notes: list[str] = []
    setup, dropped = job_setup(profile, spec)
    if dropped:
        notes.append(f"dropped {', '.join(dropped)} from setup: this image's PyTorch is the "
                     "environment (AD9/LAM7)")
    secret_bytes = secret_values(spec)
    # One `rgt run` per (box, job) at a time: the check that no run is live and the record of
    # the new one happen under the lock, so two launches racing cannot both pass the check.
    with exclusive_lock(intent.launch_lock_path(box.name, spec.name),
                        f"another `rgt run` of job {spec.name!r} on {box.name} is starting "
                        "right now; wait for it, then `rgt watch` its run"):
        return _launch_locked(store, box, spec, profile, platform, dependency,
                              notes, setup, secret_bytes, progress=progress, fresh=fresh,
                              resumes=resumes, code_from=code_from, streams=streams,
                              skip_resources=skip_resource_check or skipped_before(resumes))


def skipped_before(resumes: Run | None) -> bool:
    """Whether the attempt being resumed ran with --skip-resource-check."""
    check = (resumes.spec.get("resources_check") if resumes else None) or {}
    return bool(check.get("skipped"))


def _launch_locked(store: Store, box: Box, spec: JobSpec, profile: Profile, platform: Platform,
                   dependency, notes: list[str], setup, secret_bytes: bytes, *,
                   progress, fresh: bool, resumes: Run | None, code_from: str | None,
                   streams: int = 0, skip_resources: bool = False) -> tuple[Run, list[str]]:
    run_id = new_run_id(spec.name)
    layout = Layout.of(box, run_id, spec)
    spec = spec.model_copy(update={"setup": setup})

    def record(detach: str, status: str, extra: dict) -> Run:
        now = time.time()
        chain = {"ckpt_home": layout.ckpt, "resumes": resumes.id if resumes else None,
                 "attempt": (resumes.spec.get("attempt") or 1) + 1 if resumes else 1}
        run = Run(id=run_id, box=box.name, job=spec.name, remote_dir=layout.run_dir,
                  spec={**spec.model_dump(mode="json"), "durable_run_dir": layout.durable_run_dir,
                        "detach": detach, **chain, **checked, **extra},
                  status=status, exit_code=None, created=now, updated=now)
        if store.find_run(run_id) is None:
            store.add_run(run)
        else:
            store.update_run(run_id, spec=run.spec, status=status)
        store.record("run", {"detach": detach, "status": run.status, "notes": notes, **chain},
                     box=box.name, run=run_id)
        return run

    transport = platform.connect(box)
    if streams:
        transport.streams = streams
    ahead = group.connect_ahead(box, spec)  # a group's other nodes: their handshakes, meanwhile
    pushing = False  # from here until the platform has the job, RUN_DIR is only ours
    run = None
    checked: dict = {}
    try:
        refuse_second_launch(store, box, spec, transport)
        census.refuse_strays(store, box, transport, platform, f"rgt run of job {spec.name!r}",
                             ckpt_home=layout.ckpt)
        # the spec's resources against this box, measured before anything is sent
        fitted = fit.check(platform, box, spec, lambda: transport, skip=skip_resources)
        checked = {"resources_check": fitted.record()}
        # every node reaches the head where the ranks will meet, or nothing starts
        group_meet.refuse_unreachable(box, transport, spec, ahead)
        if fitted.unchecked:
            notes.append(f"not checked against {box.name}: {', '.join(fitted.unchecked)} "
                         "(a running machine has what it was rented with)")
        home = prepare_home(transport, layout.ckpt, fresh=fresh, store=store, box=box)
        notes += home.notes
        spread = group.spans(box, spec)  # the run's nodes, head first: [] on one machine
        if spread and fresh:  # every node starts over, not only the head
            group.on_every_node(box, transport, only=spread[1:], step=lambda n, t: prepare_home(
                t, group.node_layout(n, run_id, spec).ckpt, fresh=True))
        if resumes is None and home.files and not spec.grid:
            resumes = unfinished_attempt(store, box, spec.name)
        # On the record before anything starts: a laptop killed from here on leaves a
        # "launching" run that the next verb settles (rgt.lifecycle.intent), never a live job
        # nobody knows about.
        run = record("pending (rgt run is starting it)", intent.LAUNCHING, {})
        pushing = True

        exclude = push_excludes(spec, store) if code_from is None else None

        def deliver(node_transport: Transport, node_layout: Layout, snapshot: str | None, *,
                    head: bool) -> dict | None:
            if snapshot is not None:
                copy_code(node_transport, snapshot, node_layout)
            return push(node_transport, spec, node_layout, secret_bytes, exclude=exclude,
                        progress=progress if head else None)
        if spread:  # every node at once: N nodes start in about the time of one
            resumed = code_from.rstrip("/").split("/")[-2] if code_from else None
            # each node's connection stays open for the start that follows (which closes it)
            pushed = group.on_every_node(
                box, transport, only=spread, keep_open=True, step=lambda n, t: deliver(
                    t, group.node_layout(n, run_id, spec),  # each node's own copy of the code
                    f"{group.run_dir(n, resumed)}/code" if resumed else None,
                    head=n.rank == 0))
        else:
            pushed = [deliver(transport, layout, code_from, head=True)]
        for node, figures in enumerate(pushed):
            if figures is not None:
                store.record("push", {**figures, **({"node": node} if spread else {})},
                             box=box.name, run=run_id)
        if spread and home.files:
            seeded = group.seed_checkpoints(box, transport, spec, run_id)
            notes += [seeded] if seeded else []
        pushing = False
        # the platform's way: the on-box runner (tmux/setsid), sbatch, a pod …; a
        # `platform_run` record tells watch what the platform itself tracks
        launched = platform.launch(transport, box, spec, layout, dependency=dependency)
        detach, status = launched.detach, launched.status
        extra = {"platform_run": launched.platform_run} if launched.platform_run else {}
        notes += launched.notes
    except KeyboardInterrupt:
        # Ctrl-C: a run that started is recorded, a half-made one leaves nothing on the box
        raise interrupt.launch_interrupted(
            platform, box, layout.run_dir, run_id,
            record=lambda: record("unknown (Ctrl-C during the start)", "starting", {}),
            forget=lambda: run and intent.forget(store, run, "Ctrl-C before the job started"),
        ) from None
    except UserError:
        if run is not None and not pushing:
            # refused or failed after the record, before or after the start: the box decides
            settle_failed_launch(store, box, run, platform)
        elif pushing and interrupt.remove_partial(platform, box, layout.run_dir):
            intent.forget(store, run, "the push failed; its partial copy was removed")
        raise
    finally:
        transport.close()
    run = record(detach, status, extra)
    return run, notes


def settle_failed_launch(store: Store, box: Box, run: Run, platform: Platform) -> None:
    """The platform's start failed (or was refused) after the run was recorded: forget the
    run if nothing of it runs on the box, keep it (adopted) if the runner did start."""
    if Ability.DEPENDENCY_ON in platform.abilities():  # a scheduler refused the submission: no job
        intent.forget(store, run, "the scheduler refused the submission")
        return
    transport = None
    try:
        transport = platform.connect(box)
        if intent.what_started(transport, run.remote_dir) == "started":
            return  # the record stays "launching"; the next refresh adopts it
        intent.remove_run_dir(transport, run.remote_dir)
    except UserError:
        return  # the box does not answer: the record stays for the next verb to settle
    finally:
        if transport is not None:
            transport.close()
    intent.forget(store, run, "the start failed before the job ran")


@dataclass
class Home:
    """What a launch found in the job's checkpoint home."""

    files: int
    newest: str
    notes: list[str]


def prepare_home(transport: Transport, home: str, *, fresh: bool, store: Store | None = None,
                 box: Box | None = None) -> Home:
    """Create the checkpoint home and say what is in it; with `fresh`, move its contents
    aside first (a week of checkpoints is never deleted by a flag), and record where on
    the earlier runs of BOX that used it (`record_aside`), so their pulls find them."""
    quoted = shlex.quote(home)
    notes = []
    if fresh:
        aside = f"{home}.before-{time.strftime('%Y%m%d-%H%M%S')}"
        # a name already taken (two --fresh in one second) gets -2, -3 …: mv would move the
        # home into it
        moved = transport.run(
            f'if [ -n "$(ls -A {quoted} 2>/dev/null)" ]; then n=1; to={shlex.quote(aside)}; '
            f'while [ -e "$to" ]; do n=$((n+1)); to={shlex.quote(aside)}-$n; done; '
            f'mv {quoted} "$to" && echo "moved $n"; fi', timeout=60)
        said = moved.stdout.strip().split()
        if len(said) == 2 and said[0] == "moved" and said[1].isdecimal():
            aside += f"-{said[1]}" if said[1] != "1" else ""
            notes.append(f"--fresh: moved the job's old checkpoints aside to {aside}")
            if store is not None and box is not None:
                record_aside(store, box, home, aside)
    # newest first; the count and the name are only shown, never trusted as paths
    listing = transport.run(
        f"mkdir -p {quoted} && find {quoted} -type f | wc -l && ls -t {quoted} | head -n 1",
        timeout=60).stdout.splitlines()
    files = int(listing[0].strip()) if listing and listing[0].strip().isdigit() else 0
    newest = listing[1].strip() if len(listing) > 1 else ""
    if files:
        notes.append(f"resuming: the job's checkpoint home {home} holds {files} file(s), newest "
                     f"{newest!r}; start over with --fresh")
    return Home(files, newest, notes)


def record_aside(store: Store, box: Box, home: str, aside: str) -> None:
    """Each earlier run of BOX whose checkpoints were in HOME (and not moved before) has them
    in ASIDE now: `rgt pull` of it fetches them from there (`ckpt_aside`), not the home a
    later run starts over in."""
    for run in store.runs(box.name):  # (not the run being launched: it is live)
        if run.spec.get("ckpt_home") == home and not run.spec.get("ckpt_aside") \
                and run.status not in LIVE:
            store.update_run(run.id, spec={**run.spec, "ckpt_aside": aside})


def unfinished_attempt(store: Store, box: Box, job: str) -> Run | None:
    """The newest run of `job` on `box` if it ended without succeeding: the one a relaunch
    that finds its checkpoints continues."""
    runs = [r for r in store.runs(box.name) if r.job == job]
    if runs and runs[-1].status not in LIVE and runs[-1].status != "succeeded":
        return runs[-1]
    return None


def copy_code(transport: Transport, source: str, layout: Layout) -> None:
    """The resumed run's code snapshot, copied on the box: the very code that wrote the
    checkpoints, whatever has changed on the laptop since."""
    made = transport.run(f"mkdir -p {shlex.quote(layout.run_dir)} && cp -a "
                         f"{shlex.quote(source)} {shlex.quote(layout.code)}",
                         check=False, timeout=600)
    if not made.ok:
        raise UserError(f"cannot copy the code snapshot {source} on the box "
                        f"({made.stderr.strip() or 'cp failed'})")


def push(transport: Transport, spec: JobSpec, layout: Layout, secret_bytes: bytes, *,
         exclude: list[str] | None, progress=None) -> dict | None:
    """The workdir to RUN_DIR/code (resumable; `exclude` None: no code, it was copied on the
    box), the secrets file (0600, from stdin), and `rgt.ckpt` to RUN_DIR/lib. Returns the
    transfer's figures for the record; touches no store (it runs on every node at once)."""
    figures = None
    if exclude is not None:
        stats = transport.put(spec.workdir, layout.code, exclude=exclude, progress=progress)
        figures = {"bytes_sent": stats.bytes_sent, "files": stats.files,
                   "seconds": stats.seconds, "attempts": stats.attempts,
                   "streams": stats.streams}
    if secret_bytes:
        write_file(transport, f"{layout.run_dir}/secrets.env", secret_bytes)
    ship_library(transport, layout.lib)
    return figures
