"""What one `rgt pull` brings, settled before the first byte (`plan_pull` → `PullPlan`).

From the spec and the run's final state: where the run lives on its box (`layout_of`), where
its results land here (`default_dest`, `check_dest`), what a complete pull holds
(`expected_of`), and the manifests the box builds of its results' tree and of the job's
checkpoint home; from them, the room the pull needs here (`room_of`, checked with
`rgt.lifecycle.room`) and the order it fetches in. `--from-scratch` stages a sync-failed
run's outputs from its workdir first. Which checkpoints come: `rgt.lifecycle.pull_checkpoints`.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle.pull_checkpoints import CheckpointPlan, anchored, checkpoint_unit, newest_failed
from rgt.lifecycle.pull_verify import RESERVED
from rgt.lifecycle.pushlist import RESULTS_DIR, run_workdirs
from rgt.lifecycle.room import BIG_FILE, FIRST_PASS_RULES, Room, check_room
from rgt.lifecycle.untrusted import Entry, Manifest, check_state, read_manifest
from rgt.lifecycle.watch import refresh
from rgt.onbox.runner import SYNC_MANIFEST
from rgt.remote.calls import run_json
from rgt.remote.layout import Layout
from rgt.store import LIVE, Box, Run, Store, rgt_home


def layout_of(run: Run) -> Layout:
    """Where the run lives on its box; its checkpoints where they are now: the job's home, or
    where a later `rgt run --fresh` moved that home aside (`ckpt_aside`)."""
    durable = run.spec["durable_run_dir"]
    # runs launched before checkpoint homes kept theirs inside the durable run dir
    return Layout(run.remote_dir, durable, run.spec.get("ckpt_aside")
                  or run.spec.get("ckpt_home") or f"{durable}/ckpt")


def default_dest(box: str, run_id: str) -> Path:
    # never pushed back: every push leaves rgt-results/ out (rgt.lifecycle.pushlist)
    return Path.cwd() / RESULTS_DIR / box / run_id


def check_dest(store: Store, local: Path, given: bool) -> None:
    """Refuse, before the box is asked anything, a destination the pull could not write into
    or one that would send the results back: a workdir of a recorded run, or a directory
    holding one (every `rgt run` pushes its workdir). A directory strictly inside a workdir is
    fine: pushes leave every recorded destination out (`rgt.lifecycle.pushlist`)."""
    named = f"--dest {local}" if given else f"the default destination {local}"
    instead = ("leave --dest out (./rgt-results/<box>/<run>, which no push sends) or give "
               "a directory outside the workdir") if given else \
        "give --dest a directory outside the workdir"
    real = Path(os.path.realpath(local))
    for workdir in run_workdirs(store):
        if real == workdir or real in workdir.parents:
            holds = "is" if real == workdir else "holds"
            raise UserError(f"{named} {holds} the workdir {workdir} of a recorded run: the "
                            f"next `rgt run` would push the results back to the box; {instead}")
    home = Path(os.path.realpath(rgt_home()))
    if real == home or real in home.parents:  # the store and the evidence would mix with results
        holds = "is" if real == home else "holds"
        raise UserError(f"{named} {holds} rgt's own directory {home} (RGT_HOME: the record of "
                        "boxes, runs and evidence); give a directory outside it")
    existing = local  # the nearest part of the path that is there: the pull creates the rest
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "is" if existing == local else f"cannot be created: {existing} is"
        raise UserError(f"{named} {where} a file, not a directory; give a directory to pull "
                        "into")
    try:
        fd, probe = tempfile.mkstemp(prefix=".rgt-write-check-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        what = "is not writable" if existing == local else \
            f"cannot be created: nothing can be written in {existing}"
        raise UserError(f"{named} {what} ({err.strerror or err}); give a directory you can "
                        "write into, or leave --dest out (./rgt-results/<box>/<run>)") from None


def flat_outputs(run: Run) -> bool:
    """Whether the run's outputs land at the top of the pull as they were in its workdir
    (`out/w.bin`, not `out/out/w.bin`): yes, unless one is named like rgt's own `ckpt/` or
    `logs/` (then all of them keep the durable tier's `out/`). A sweep's cells keep theirs."""
    if (run.spec.get("platform_run") or {}).get("cells"):
        return False
    return not any(o.lstrip("/").split("/")[0] in RESERVED
                   for o in run.spec.get("outputs") or [])


def output_patterns(run: Run) -> list[str]:
    """What the manifest must list, relative to the durable run dir (the job's checkpoint
    home is listed on its own: `home_to_fetch`)."""
    cells = (run.spec.get("platform_run") or {}).get("cells") or 0
    if cells:  # a sweep: each cell's declared outputs by name, so a missing cell shows; its
        # checkpoint home, declared or not (one that holds nothing is only listed as missing)
        return [f"cells/{i}/{p}" for i in range(cells)
                for p in [f"out/{o}" for o in run.spec.get("outputs", [])] + ["ckpt"]]
    return ["out"] if run.spec.get("outputs") else []


def home_to_fetch(run: Run, layout: Layout) -> str | None:
    """The job's checkpoint home, fetched on its own as ckpt/ whether the spec declared it or
    not (a sweep's cells keep theirs inside the durable run dir: `output_patterns`)."""
    if (run.spec.get("platform_run") or {}).get("cells"):
        return None
    return layout.ckpt


def manifest_of(transport, root: str, remote: str, patterns: list[str], into: Path,
                prefix: str = "") -> Manifest:
    """Build the manifest of ROOT on the box, fetch it as a file into INTO (rgt's own evidence
    directory) and return it to be read as a stream."""
    # exit 2 = written, with declared outputs missing: verify_pulled decides what that means
    run_json(transport, "manifest", root, remote, *patterns, ok_codes=(0, 2))
    into.mkdir(parents=True, exist_ok=True)
    transport.get(remote, into)
    return read_manifest(into / posixpath.basename(remote), prefix)


def expected_of(run: Run, home_fetched: bool) -> list[tuple[str, str, str]]:
    """What a complete pull of RUN holds, from its spec: (label, directory in the pull, glob
    under it) — each declared output, and the checkpoint home when one was declared (an
    undeclared home is fetched when it holds files, never expected to)."""
    outputs = [f"_abs{o}" if o.startswith("/") else o.rstrip("/")
               for o in run.spec.get("outputs") or []]
    cells = (run.spec.get("platform_run") or {}).get("cells") or 0
    if cells:
        ckpt = [(f"cells/{i}/ckpt", f"cells/{i}/ckpt/", "*") for i in range(cells)
                if run.spec.get("checkpoint_dir")]
        return [(f"cells/{i}/out/{o}", f"cells/{i}/out/", o)
                for i in range(cells) for o in outputs] + ckpt
    expected = [(o, "", o) for o in outputs] if flat_outputs(run) else \
        [(f"out ({o})", "out/", o) for o in outputs]
    if home_fetched and run.spec.get("checkpoint_dir"):
        expected.append(("ckpt", "ckpt/", "*"))
    return expected


@dataclass
class PullPlan:
    """What one pull brings, settled from the manifests before the first byte (`plan_pull`).

    `source` is the results' tree on the box (the durable tier, or the workdir's outputs
    staged by `--from-scratch`), listed by `sources`; `box_record` the runner's record of its
    copy inside it (evidence, left out of the results); `home` the job's checkpoint home,
    fetched as ckpt/, listed by `home_listed`, of which `checkpoints` says which come; `room`
    what all of it takes here, and `first` the excludes of the home's first pass (the newest
    checkpoint before older ones and big strays; None: one pass brings it all in order)."""

    state: dict[str, Any]
    from_scratch: bool
    source: str
    sources: list[Manifest]
    box_record: str | None
    home: str | None
    declared: bool
    home_listed: Manifest | None = None
    checkpoints: CheckpointPlan | None = None
    room: Room | None = None
    first: list[str] | None = None

    def is_box_record(self, entry: Entry) -> bool:
        return entry.path == self.box_record and entry.link is None

    @property
    def home_files(self) -> int:
        """Every file of the checkpoint home's manifest, checkpoint or not."""
        return self.checkpoints.files if self.checkpoints is not None else 0

    @property
    def unmatched(self) -> list[str]:
        """Declared outputs that matched nothing in the workdir when the run ended."""
        sync = self.state["sync"]
        return sync["missing"] if self.state["status"] == "sync-failed" else []

    def fall_back(self, checked: list[dict[str, Any]]) -> bool:
        """When the kept checkpoints were checked here and none verified, let the next older
        one come too (the newest may have been cut short on the box): whether it did."""
        plan = self.checkpoints
        if plan is None or not plan.left or not newest_failed(plan, checked):
            return False
        plan.keep = (plan.keep or 0) + 1
        return True


def plan_pull(store: Store, box: Box, run: Run, transport, local: Path, evidence: Path, *,
              from_scratch: bool, checkpoints: int | None) -> PullPlan:
    """Ask the box for the run's final state and its manifests, and decide what comes: what
    is refused is refused here, before a byte is written; the room is checked last."""
    layout = layout_of(run)
    fetched = evidence / "manifests"
    state = check_state(refresh(store, box, run, transport))
    unmatched = state["status"] == "sync-failed" and state["sync"]["missing"]
    if state["status"] == "sync-failed" and not from_scratch and not unmatched:
        raise UserError(
            f"run {run.id} finished but its outputs did not reach the durable tier "
            f"({state['sync']['error'] or 'copy failed'}); free space or inodes "
            "there (AD4/U7) and pull again, or fetch them from the run's workdir with "
            "`rgt pull --from-scratch` — nothing on the box was deleted")
    if from_scratch and state["status"] in LIVE:
        raise UserError(f"run {run.id} is still {state['status']}; --from-scratch copies "
                        "a finished run's outputs")
    try:
        local.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # checked before the box was asked: changed since
        raise UserError(f"cannot create {local} ({err.strerror or err}); give a directory "
                        "you can write into") from None
    if from_scratch:
        source, listed = _stage_from_workdir(transport, run, layout, fetched)
        box_record = None
    else:
        flat = flat_outputs(run)
        source = layout.out if flat else layout.durable_run_dir
        transport.run(f"mkdir -p {shlex.quote(source)}", timeout=60)
        patterns = ["."] if flat and run.spec.get("outputs") else \
            [] if flat else output_patterns(run)
        listed = manifest_of(transport, source, f"{layout.run_dir}/PULL_MANIFEST.jsonl",
                             patterns, fetched)
        # the runner's record of its copy, at the top of the durable tier's out/: evidence
        box_record = ("" if flat else "out/") + SYNC_MANIFEST
    home = None if from_scratch else home_to_fetch(run, layout)
    plan = PullPlan(state, from_scratch, source, [listed], box_record, home,
                    declared=bool(run.spec.get("checkpoint_dir")))
    if home is not None and _is_dir(transport, home):
        # the job's checkpoint home, shared by the chain of attempts: fetched as ckpt/
        plan.home_listed = manifest_of(transport, home, f"{layout.run_dir}/CKPT_MANIFEST.jsonl",
                                       ["."], fetched, prefix="ckpt/")
        # one pass counts the home's files too
        plan.checkpoints = CheckpointPlan.of(plan.home_listed, checkpoints)
        if not (plan.checkpoints.files or plan.declared):
            plan.checkpoints = None
    # room first: every byte it will write, counted from the manifests before the first
    plan.room, plan.first = room_of(local, evidence, plan.sources, plan.is_box_record,
                                    plan.checkpoints, plan.home_listed)
    check_room(plan.room, run.id)
    return plan


def room_of(local: Path, evidence: Path, sources: list[Manifest],
            is_box_record: Callable[[Entry], bool], plan: CheckpointPlan | None,
            listed: Manifest | None) -> tuple[Room, list[str] | None]:
    """What the pull will write, in the order it fetches it (`rgt.lifecycle.room`), and the
    excludes of the checkpoint home's first pass (None: one pass brings it all in order):
    the declared outputs, the newest checkpoint with the home's small files, then older
    checkpoints and the home's big files that are no checkpoint."""
    room = Room(local, evidence)
    for label in ("outputs", "newest checkpoint", "checkpoint home's other files",
                  "older checkpoints", "big files in the checkpoint home"):
        room.part(label)
    for manifest in sources:
        for entry in read_manifest(manifest.source, manifest.prefix):
            if not is_box_record(entry):
                room.count("outputs", entry)
    if plan is None or listed is None:
        return room, None
    room.kept = plan.kept
    left, later = set(plan.left), plan.kept[1:]
    big: list[str] = []
    for entry in read_manifest(listed.source, listed.prefix):
        rel = entry.path.removeprefix(listed.prefix)
        found = checkpoint_unit(rel)
        if found is not None and found[0] in left:
            continue
        if found is not None:
            newest_one = found[0] == plan.kept[0]
            room.count("newest checkpoint" if newest_one else "older checkpoints", entry,
                       unit=found[0])
        elif entry.link is None and entry.bytes >= BIG_FILE:
            room.count("big files in the checkpoint home", entry)
            big.append(anchored(rel))
        else:
            room.count("checkpoint home's other files", entry)
    if not later and not big:
        return room, None
    first = plan.excludes() + plan.excludes(later) + big
    return room, first if len(first) <= FIRST_PASS_RULES else None


def _is_dir(transport, path: str) -> bool:
    """Whether PATH is a directory on the box (a home no launch made, an aside since gone)."""
    return transport.run(f"test -d {shlex.quote(path)}", check=False, timeout=60).ok


def _stage_from_workdir(transport, run: Run, layout: Layout, into: Path
                        ) -> tuple[str, Manifest]:
    """Hard-link the declared outputs from the workdir into RUN_DIR/scratch-pull/out."""
    outputs = run.spec.get("outputs") or []
    if not outputs:
        raise UserError(f"run {run.id} declares no outputs; there is nothing to fetch from "
                        "its workdir (plain `rgt pull` fetches its log and checkpoints)")
    staged = f"{layout.run_dir}/scratch-pull"
    remote = f"{layout.run_dir}/SCRATCH_MANIFEST.jsonl"
    listed = manifest_of(transport, layout.code, remote, outputs, into, prefix="out/")
    # the names to link come from the checked manifest, never straight from the box
    files = [e.path.removeprefix("out/") for e in listed if e.link is None]
    if listed.problems:
        raise UserError(f"the box's workdir manifest is not usable: {listed.problems[0]}")
    out = shlex.quote(staged + "/out")
    # bash builtins, mkdir, dirname and ln only (GNU `cp -al --parents` is not on a Mac's
    # local box); the names come on stdin, NUL-separated, never through the command line
    link = (f"rm -rf {shlex.quote(staged)} && mkdir -p {out} && cd {shlex.quote(layout.code)}"
            f" && while IFS= read -r -d '' f; do mkdir -p {out}/\"$(dirname -- \"$f\")\" && "
            f"ln -- \"$f\" {out}/\"$f\" || exit 1; done")
    names = b"".join(f.encode("utf-8", "surrogateescape") + b"\0" for f in files)
    transport.run(link, stdin=names, timeout=300)
    if flat_outputs(run):
        return f"{staged}/out", read_manifest(listed.source, "")
    return staged, read_manifest(listed.source, "out/")
