"""`rgt pull`: manifest on the box, resumable transfer, re-hash and load here.

The evidence it leaves (`PULL_VERIFIED.json` in ``RGT_HOME/evidence/<box>/<run>/``, never in
the pulled tree the box controls, and a row in the store with counts and a digest rather than
the file list) is what `rgt down` demands before it will stop the meter. Everything the box
sends back is read through `rgt.lifecycle.untrusted`. What a complete pull is comes from the
spec and the run's final state, not from the box's manifest: a declared output nothing in the
manifest matches fails a succeeded run's pull. A file that arrived but does not hash as the
box said it should is a failure, not a warning. Checkpoints are checked by format
(`rgt.ckpt.formats`); one that is damaged on the box itself is named as a warning, since
keeping the box would not save it.

The job's checkpoint home belongs to every run of the job, declared in the spec or not (a
trainer may write to `$RGT_CKPT_DIR` unasked): a pull fetches it whenever it holds files. Of
it a pull brings, by default, the newest checkpoint that verifies here (and every file of the
home that is not a checkpoint: configs, tokenizers, a `latest` pointer); older checkpoints stay
on the box unless asked for (`--checkpoints all` or `N`, the newest N). Which checkpoint is
newest, and what one checkpoint is, `rgt.ckpt.newest` says (the last written completely; a
name's number orders only one attempt's saves); one with any damaged file is damaged, and the
pull then brings the next older one too, and says so. One without a step in its name
(`last.ckpt`, nanoGPT's `ckpt.pt`) cannot be ordered and always comes. What stays behind is
recorded with the evidence, and `rgt down` names it among what the teardown destroys. A run
whose home a later `rgt run --fresh` moved aside is pulled from where it went
(`ckpt_aside`, recorded by `rgt.lifecycle.launch.prepare_home`).

Room first (`rgt.lifecycle.room`): before the first byte, what the manifests say the pull
writes is checked against the free space of the destination and of the evidence directory;
declared outputs come first, then the newest checkpoint, then the rest; a pull that gives up
removes the engine's partial files and says what arrived.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import posixpath
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.ckpt import formats, newest
from rgt.errors import UserError
from rgt.lifecycle import interrupt
from rgt.lifecycle.pushlist import RESULTS_DIR, run_workdirs
from rgt.lifecycle.room import BIG_FILE, FIRST_PASS_RULES, Room, check_room, gave_up
from rgt.lifecycle.untrusted import (
    Entry,
    Manifest,
    check_state,
    evidence_dir,
    open_inside,
    read_manifest,
    real_subdir,
    shown,
    sweep_links,
    write_private,
)
from rgt.lifecycle.watch import refresh
from rgt.onbox.runner import SYNC_MANIFEST
from rgt.platforms import platform_for
from rgt.remote import group
from rgt.remote.calls import run_json
from rgt.remote.layout import Layout
from rgt.store import LIVE, Box, Run, Store, rgt_home
from rgt.transport import TransferStats, TransportError


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


RESERVED = ("ckpt", "logs")  # what rgt itself puts at the top of a pull


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


# ----------------------------------------------------------------------------- which checkpoints


def checkpoints_flag(value: str | None) -> int | None:
    """`--checkpoints latest|all|N`: how many of the newest checkpoints to bring (None: all).
    Left out, `latest` (1)."""
    text = (value or "latest").strip().lower()
    if text == "latest":
        return 1
    if text == "all":
        return None
    if text.isdecimal() and int(text) >= 1:
        return int(text)
    raise UserError(f"--checkpoints {value!r}: say latest (the newest checkpoint that "
                    "verifies, the default), all, or a number N of the newest to bring")


def checkpoint_unit(rel: str) -> newest.Unit | None:
    """The checkpoint REL, a path in the checkpoint home, belongs to (`rgt.ckpt.newest`)."""
    return newest.unit_of(rel)


@dataclass
class _Unit:
    step: int
    is_dir: bool
    files: list[str] = field(default_factory=list)  # a file unit's own files (≤ 2)
    count: int = 0
    bytes: int = 0
    mtimes: list[float | None] = field(default_factory=list)  # the box's, of its files

    @property
    def written(self) -> float | None:
        return newest.written(self.mtimes)


@dataclass
class CheckpointPlan:
    """The checkpoints of a home's manifest, newest first, and how many of them to bring."""

    units: dict[str, _Unit]
    keep: int | None  # None: all
    files: int = 0  # every entry of the home's manifest, checkpoint or not

    @classmethod
    def of(cls, manifest: Manifest, keep: int | None) -> CheckpointPlan:
        units: dict[str, _Unit] = {}
        files = 0
        for entry in read_manifest(manifest.source, manifest.prefix):  # a pass of its own
            files += 1
            found = checkpoint_unit(entry.path.removeprefix(manifest.prefix))
            if found is None:
                continue
            key, step, is_dir = found
            unit = units.setdefault(key, _Unit(step, is_dir))
            unit.count += 1
            unit.bytes += entry.bytes
            unit.mtimes.append(entry.mtime)
            if not is_dir:
                unit.files.append(entry.path.removeprefix(manifest.prefix))
        return cls(units, keep, files)

    @property
    def newest_first(self) -> list[str]:
        """The units by `rgt.ckpt.newest`'s definition: the last written first."""
        return newest.newest_first(self.units, key=lambda k: newest.order_key(
            self.units[k].written, self.units[k].step, k))

    @property
    def kept(self) -> list[str]:
        order = self.newest_first
        return order if self.keep is None else order[: self.keep]

    @property
    def left(self) -> list[str]:
        return [] if self.keep is None else self.newest_first[self.keep:]

    def excludes(self, keys: list[str] | None = None) -> list[str]:
        """rsync-style patterns, anchored at the home, for every checkpoint left on the box
        (or for the units KEYS)."""
        out = []
        for key in self.left if keys is None else keys:
            unit = self.units[key]
            names = [key] if unit.is_dir else unit.files
            for name in names:
                literal = anchored(name)
                # a directory, and what lies under it (for transports that list files flat)
                out += [literal + "/", literal + "/**"] if unit.is_dir else [literal]
        return out

    def summary(self) -> dict[str, Any] | None:
        left = self.left
        if not left:
            return None
        steps = [self.units[k].step for k in left]
        return {"count": len(left), "files": sum(self.units[k].count for k in left),
                "bytes": sum(self.units[k].bytes for k in left), "newest": left[0],
                "steps": [min(steps), max(steps)],
                "names": [shown(k) for k in left[:NAMES_KEPT]]}  # box names, made printable


def anchored(name: str) -> str:
    """An exclude pattern matching exactly NAME (a path in the tree fetched) and no other."""
    return "/" + re.sub(r"([*?\[\\])", r"\\\1", name)


NAMES_KEPT = 200  # checkpoints left on the box named in the evidence (`rgt down` lists them)


class _LeftOut(Manifest):
    """A manifest read with the entries LEAVES picks taken out of what this pull verifies: the
    checkpoints left on the box (`_in_units`), or the box's own record of its copy
    (`SYNC_MANIFEST.json`, the runner's list of what it copied to the durable tier: evidence,
    kept with rgt's in ``RGT_HOME/evidence/<box>/<run>/manifests/``, not a result in the
    user's tree). The entries taken out are kept in `held` as the stream passes them;
    problems, digest and the rest are the whole manifest's. Each one reads its file afresh."""

    def __init__(self, manifest: Manifest, leaves: Callable[[Entry], bool]) -> None:
        super().__init__(manifest.source, manifest.prefix)
        self.leaves: Callable[[Entry], bool] = leaves
        self.held: list[Entry] = []

    def __iter__(self) -> Iterator[Entry]:
        for entry in super().__iter__():
            if self.leaves(entry):
                self.held.append(entry)
            else:
                yield entry


def _in_units(prefix: str, units: set[str]) -> Callable[[Entry], bool]:
    """Whether an entry of the checkpoint home's manifest belongs to one of UNITS."""
    def belongs(entry: Entry) -> bool:
        found = checkpoint_unit(entry.path.removeprefix(prefix))
        return found is not None and found[0] in units
    return belongs


def _verdicts_of(plan: CheckpointPlan, checked: list[dict[str, Any]]) -> dict[str, bool]:
    """Unit key → whether it verified here, for the plan's units that were checked (a unit
    with any damaged file is damaged: `_checkpoints` built each from all its files)."""
    return {c["path"].removeprefix("ckpt/"): c["ok"] for c in checked
            if c["path"].removeprefix("ckpt/") in plan.units}


def _newest_failed(plan: CheckpointPlan, checked: list[dict[str, Any]]) -> bool:
    """Whether the kept checkpoints were checked here and none of them verified: then the
    next older one must come (the newest may have been cut short on the box)."""
    verdicts = _verdicts_of(plan, checked)
    kept = [verdicts[k] for k in plan.kept if k in verdicts]
    return bool(kept) and not any(kept)


def fallback_note(plan: CheckpointPlan, checked: list[dict[str, Any]]) -> str | None:
    """Say which checkpoint the pull fell back to when the newest ones were damaged."""
    verdicts = _verdicts_of(plan, checked)
    damaged: list[str] = []
    for key in plan.kept:
        if key not in verdicts:
            continue
        if verdicts[key]:
            if not damaged:
                return None
            return (f"the newest checkpoint {damaged[0]} is damaged on the box (see the "
                    f"warnings){' as are ' + ', '.join(damaged[1:]) if damaged[1:] else ''}; "
                    f"also brought {shown(key)}, the newest intact one (step "
                    f"{plan.units[key].step})")
        damaged.append(shown(key))
    if damaged:
        return (f"no intact checkpoint in the job's checkpoint home: every one brought is "
                f"damaged on the box ({', '.join(damaged[:5])}"
                f"{' …' if len(damaged) > 5 else ''})")
    return None


def pull(store: Store, box_name: str, run_id: str | None, dest: Path | None = None,
         progress=None, *, from_scratch: bool = False, streams: int = 0,
         checkpoints: int | None = 1) -> dict[str, Any]:
    """`_pull`, with a Ctrl-C said in one line: nothing is verified or recorded before the end,
    so the store is as it was and the next pull resumes from the files already here."""
    run = store.run(store.box(box_name).name, run_id)
    with interrupt.explained(lambda: (
            f"interrupted (Ctrl-C) while pulling run {run.id} from {box_name}: nothing was "
            "verified or recorded (`rgt down` still refuses); the files already here are kept "
            f"and `rgt pull {box_name} {run.id}` resumes from them")):
        return _pull(store, box_name, run.id, dest, progress, from_scratch=from_scratch,
                     streams=streams, checkpoints=checkpoints)


def _pull(store: Store, box_name: str, run_id: str | None, dest: Path | None = None,
          progress=None, *, from_scratch: bool = False, streams: int = 0,
          checkpoints: int | None = 1) -> dict[str, Any]:
    """Fetch a run's results and verify them here: plan (`plan_pull`), fetch (`fetch_planned`),
    verify (`verify_planned`), then the evidence `rgt down` reads.

    `from_scratch` is the way out of a sync-failed run: the outputs never reached the
    durable tier but are still in the run's workdir, so they are hard-linked into a pull
    directory beside it (no extra space on a full box) and fetched from there. `streams`
    fixes the transfer's parallel connections (0: chosen from the link). `checkpoints`: how
    many of the home's newest checkpoints to bring (None: all; see the module's doc).
    """
    box = store.box(box_name)
    run = store.run(box.name, run_id)
    local = (dest or default_dest(box.name, run.id)).absolute()  # recorded: pushes skip it
    check_dest(store, local, dest is not None)
    evidence = evidence_dir(rgt_home(), box.name, run.id)
    shutil.rmtree(evidence / "manifests", ignore_errors=True)  # rgt's own: last pull's copies
    platform = platform_for(box.profile)
    transport = platform.connect(box)
    if streams:
        transport.streams = streams
    try:
        plan = plan_pull(store, box, run, transport, local, evidence, from_scratch=from_scratch,
                         checkpoints=checkpoints)
        fetch = _Fetch(platform, transport, box, run, plan.room, progress)
        fetch_planned(fetch, plan, local)
        while True:
            report, swept, records = verify_planned(local, run, plan, evidence)
            if not plan.fall_back(report["checkpoints"]):
                break
            fetch_planned(fetch, plan, local, home_only=True)  # the next older one comes too
        logs = fetch_logs(store, transport, box.name, run, local)
        kept = keep_box_records(transport, plan.source, evidence / "manifests", records)
    finally:
        transport.close()
    stats = fetch.stats
    _say_what_came(report, plan, box.name, run, logs, swept, kept)
    report.update({"run": run.id, "box": box.name, "run_status": plan.state["status"],
                   "run_ended": plan.state.get("ended"), "exit_code": plan.state.get("exit_code"),
                   "source": "workdir" if plan.from_scratch else "durable", "dest": str(local),
                   "evidence": str(evidence / "PULL_VERIFIED.json"), "transfer": {
                       "bytes_received": stats.bytes_received, "seconds": stats.seconds,
                       "attempts": stats.attempts, "streams": stats.streams}})
    _record(store, report, evidence)
    return report


def _record(store: Store, report: dict[str, Any], evidence: Path) -> None:
    """PULL_VERIFIED.json in rgt's evidence directory, and the row `rgt down` reads: the store
    keeps counts and a digest; the list of files stays in the evidence files."""
    write_private(evidence / "PULL_VERIFIED.json", json.dumps(report, indent=1).encode())
    row = {k: v for k, v in report.items() if k != "files"}
    row["problems"], row["warnings"] = report["problems"][:50], report["warnings"][:50]
    store.add_evidence("pull-verified", report["box"], report["ok"], row, run=report["run"])
    store.record("pull", {"ok": report["ok"], "files": report["counts"]["files"],
                          "dest": report["dest"], "source": report["source"]},
                 box=report["box"], run=report["run"])


# ----------------------------------------------------------------------------- 1. plan


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
        if plan is None or not plan.left or not _newest_failed(plan, checked):
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


# ----------------------------------------------------------------------------- 2. fetch


class _Fetch:
    """The platform brings the files, leaving out what it is told to (what arrived is checked
    here, not by it); a pull that gives up leaves no partial behind and says what arrived.
    `stats` sums every transfer of the pull."""

    def __init__(self, platform, transport, box: Box, run: Run, room: Room, progress) -> None:
        self.platform, self.transport, self.box, self.run = platform, transport, box, run
        self.room, self.progress = room, progress
        self.stats = TransferStats(0, 0, 0, 0.0, 0, streams=0)  # nothing yet

    def __call__(self, remote: str, into: Path, exclude: list[str]) -> None:
        try:
            got = self.platform.fetch(self.transport, self.box, self.run, remote, into,
                                      exclude=exclude, progress=self.progress)
        except Exception as exc:  # noqa: BLE001  (Ctrl-C keeps its partials: resumable)
            raise gave_up(self.room, self.run.id, self.box.name, exc) from None
        self.stats = _added(self.stats, got)


def fetch_planned(fetch: _Fetch, plan: PullPlan, local: Path, *,
                  home_only: bool = False) -> None:
    """The results without the box's record of its copy; then the checkpoint home as ckpt/,
    the newest checkpoint first where the plan says so, without the checkpoints left on the
    box. `home_only`: the home again, after the plan let an older checkpoint come."""
    if not home_only:
        fetch(plan.source, local, [f"/{plan.box_record}"] if plan.box_record else [])
        if plan.first is not None:
            fetch(plan.home, local / "ckpt", plan.first)
    if plan.checkpoints is not None:
        fetch(plan.home, local / "ckpt", plan.checkpoints.excludes())


# ----------------------------------------------------------------------------- 3. verify


def verify_planned(local: Path, run: Run, plan: PullPlan, evidence: Path
                   ) -> tuple[dict[str, Any], list[str], list[Entry]]:
    """(report, warnings of the links swept, the box's records held out of the results).

    Whatever the engine did, no symlink leading out of the pull survives it, and this runs
    before rgt writes anything (the logs) into the tree. Each pass reads the manifests afresh
    (a reading keeps what it found)."""
    swept = sweep_links(local)
    results = [_LeftOut(m, plan.is_box_record) for m in plan.sources]
    home = [] if plan.checkpoints is None or plan.home_listed is None else [_LeftOut(
        plan.home_listed, _in_units(plan.home_listed.prefix, set(plan.checkpoints.left)))]
    report = verify_pulled(local, [*results, *home], run_status=plan.state["status"],
                           outputs=run.spec.get("outputs"),
                           expected=None if plan.from_scratch else
                           expected_of(run, plan.home is not None and plan.declared),
                           files_list=evidence / "PULL_FILES.jsonl")
    return report, swept, [e for m in results for e in m.held]


def _say_what_came(report: dict[str, Any], plan: PullPlan, box: str, run: Run,
                   logs: list[str], swept: list[str], kept: dict[str, list[str]]) -> None:
    """The report's notes on the checkpoint home and what stayed on the box, the outputs the
    job never wrote, the links swept, the box's records kept as evidence, and the log (with
    nothing declared, the run's only result)."""
    ckpt = plan.checkpoints
    unmet = [f"declared outputs matched nothing in the run's workdir when it ended: "
             f"{', '.join(plan.unmatched)} (the job exited 0 without writing them; "
             "nothing was lost to a full disk) — check the job and its outputs patterns"
             ] if plan.unmatched else []
    left = ckpt.summary() if ckpt is not None else None
    fell_back = fallback_note(ckpt, report["checkpoints"]) if ckpt is not None else None
    if fell_back:
        report["notes"].append(fell_back)
    if ckpt is not None and not plan.declared:
        report["notes"].append(
            f"the job's checkpoint home {plan.home} holds {plan.home_files} file(s), though "
            "the spec declares no checkpoint_dir (the trainer wrote to $RGT_CKPT_DIR): pulled "
            "them as ckpt/")
    if ckpt is not None and run.spec.get("ckpt_aside"):
        report["notes"].append(
            f"a later `rgt run --fresh` moved this run's checkpoint home aside: pulled "
            f"ckpt/ from {plan.home}")
    report["home"] = {"path": plan.home, "declared": plan.declared, "files": plan.home_files,
                      "newest": shown(ckpt.newest_first[0]) if ckpt and ckpt.units else None}
    if left is not None:
        report["notes"].append(
            f"left {left['count']} older checkpoint(s) on the box ({left['bytes'] / 1e9:.2f} "
            f"GB, steps {left['steps'][0]}-{left['steps'][1]}): `rgt pull {box} "
            f"{run.id} --checkpoints all` brings them; `rgt down` destroys them")
    report["checkpoints_left"] = left
    report["problems"] = unmet + report["problems"]
    report["warnings"] = swept + report["warnings"] + kept["warnings"]
    report["box_records"] = kept["paths"]
    report["ok"] = report["ok"] and not unmet
    if run.id not in logs:
        # with nothing declared, the log is the run's result: a pull without it proves nothing
        says = "the run's log could not be fetched from the box"
        if report["expected"]:
            report["warnings"].append(says)
        else:
            report["problems"].append(f"{says}; it is this run's only result")
            report["ok"] = False
    report["logs"] = logs


def _added(a: TransferStats, b: TransferStats) -> TransferStats:
    return TransferStats(a.bytes_sent + b.bytes_sent, a.bytes_received + b.bytes_received,
                         a.files + b.files, a.seconds + b.seconds, a.attempts + b.attempts,
                         streams=max(a.streams, b.streams))


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


def keep_box_records(transport, source: str, into: Path, entries: list[Entry]
                     ) -> dict[str, list[str]]:
    """Fetch the box's own records the pull left out of the results (`_LeftOut`) into INTO,
    rgt's evidence directory, each checked against the manifest: a copy that differs is said
    as a warning (it is the box's account, not a result: the results were verified apart)."""
    paths: list[str] = []
    warnings: list[str] = []
    for entry in entries:
        kept = into / posixpath.basename(entry.path)
        try:
            transport.get(f"{source}/{entry.path}", into)
            size, digest = _hash_fd(os.open(kept, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)),
                                    bytearray(HASH_BUF))
        except (OSError, TransportError) as err:
            warnings.append(f"{entry.path}: the box's record of its copy could not be kept "
                            f"as evidence ({err})")
            continue
        if size != entry.bytes or digest != entry.sha256:
            warnings.append(f"{entry.path}: the box's record of its copy, kept as evidence, "
                            "differs from the box's manifest")
        paths.append(str(kept))
    return {"paths": paths, "warnings": warnings}


LOG_TAIL_BYTES = 64 << 20  # a log is evidence to read, not a result: its last 64 MiB


def fetch_logs(store: Store, transport, box: str, run: Run, local: Path) -> list[str]:
    """Each attempt's log on this box, the run's and those of the attempts it continues, as
    logs/<run-id>.log (its tail) in the pull directory. Not verified: the box writes logs, and
    they only inform. Written without following anything the box planted under logs/."""
    fetched = []
    for attempt in store.chain(run):
        if attempt.box != box or attempt.created > run.created:
            continue
        log = shlex.quote(f"{attempt.remote_dir}/log")
        result = transport.run(f"tail -c {LOG_TAIL_BYTES} {log}", check=False, timeout=300,
                               limit=LOG_TAIL_BYTES)  # read no more than that (issue 28)
        if result.ok:  # its bytes as they came (stdout would re-encode invalid UTF-8)
            write_private(real_subdir(local, "logs") / f"{attempt.id}.log", result.data)
            fetched.append(attempt.id)
        fetched += _node_logs(store.box(box), transport, attempt, local)
    return fetched


def _node_logs(box: Box, transport, attempt: Run, local: Path) -> list[str]:
    """A multi-node attempt's other nodes' logs, as logs/<run-id>.node<rank>.log, fetched
    from every node at once; a node that does not answer is skipped (its log only informs).
    Where the nodes share the run's directory (a cluster's filesystem), node i's log is
    `log.node-<i>` beside the head's (group.SHARED_NODE_LOG)."""
    count = group.run_nodes(attempt)
    others = group.nodes(box)[1:count]
    if count > 1 and not group.nodes(box):
        names = []
        for rank in range(1, count):
            path = shlex.quote(f"{attempt.remote_dir}/{group.SHARED_NODE_LOG.format(rank=rank)}")
            got = transport.run(f"tail -c {LOG_TAIL_BYTES} {path}", check=False, timeout=300,
                                limit=LOG_TAIL_BYTES)
            if got.ok:
                write_private(real_subdir(local, "logs") / f"{attempt.id}.node{rank}.log",
                              got.data)
                names.append(f"{attempt.id}.node{rank}")
        return names

    def one(node: group.Node, node_transport) -> str | None:
        log = shlex.quote(f"{group.run_dir(node, attempt.id)}/log")
        try:
            result = node_transport.run(f"tail -c {LOG_TAIL_BYTES} {log}", check=False,
                                        timeout=300, limit=LOG_TAIL_BYTES)
        except UserError:
            return None
        if not result.ok:
            return None
        name = f"{attempt.id}.node{node.rank}"
        write_private(real_subdir(local, "logs") / f"{name}.log", result.data)
        return name
    if not others:
        return []
    try:
        return [n for n in group.on_every_node(box, transport, one, only=others) if n]
    except UserError:
        return []


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


# A run that ended without succeeding never wrote (or synced) its declared outputs; its
# checkpoints and log are its results, so missing outputs are said, not held against `down`.
STOPPED = ("failed", "cancelled", "preempted", "stopped", "vanished")

FILES_INLINE = 10_000  # file records kept in PULL_VERIFIED.json itself; all go to files_list
HASH_BUF = 1 << 20


def verify_pulled(local: Path, manifests: Manifest | list[Manifest], *,
                  run_status: str | None = None, outputs: list[str] | None = None,
                  expected: list[tuple[str, str, str]] | None = None,
                  files_list: Path | None = None) -> dict[str, Any]:
    """Re-hash every manifest file here and check every checkpoint by its format
    (`rgt.ckpt.formats`), streaming the manifests. A problem fails the pull: a malformed,
    escaping or duplicate manifest entry, a copy that is not the box's file, a declared output
    (`expected`, from the spec; None where no spec judges, as for a carry of checkpoints: then
    the box's own list of patterns it found nothing for) that nothing matched in a succeeded
    run. A checkpoint damaged on the box itself, a stopped run's missing outputs and a symlink
    on the box are warnings or notes. Each distinct message is said once. Nothing outside
    LOCAL is read: run `untrusted.sweep_links(local)` first."""
    sources = [manifests] if isinstance(manifests, Manifest) else list(manifests)
    judged = expected is not None  # a spec says what a complete pull holds (even nothing)
    expected = list(expected or [])
    met: set[int] = set()
    files, bad, damaged, notes, verdicts = [], [], [], [], {}
    counts = {"files": 0, "bytes": 0, "failed": 0, "links": 0}
    buf = bytearray(HASH_BUF)
    out = files_list.open("w", encoding="utf-8", errors="surrogateescape") if files_list \
        else None
    try:
        for source in sources:
            for entry in source:
                _meet(entry.path, expected, met)
                if entry.link is not None:
                    counts["links"] += 1
                    notes.append((entry.path, "a symlink on the box, not a file: a link "
                                  "that stays inside is copied as a link, any other is not"))
                    continue
                record = _verify_one(local, entry, buf, bad, damaged, notes, verdicts)
                counts["files"] += 1
                counts["bytes"] += entry.bytes
                counts["failed"] += not record["ok"]
                if out is not None:
                    out.write(json.dumps(record) + "\n")
                if len(files) < FILES_INLINE:
                    files.append(record)
    finally:
        if out is not None:
            out.close()
    manifest_problems = [p for s in sources for p in s.problems]
    named = f" ({', '.join(outputs)})" if outputs else ""  # `out` holds the spec's outputs
    box_missing = [m for s in sources for m in s.missing]
    missing = [f"{label}: declared, but nothing in the box's manifest matches it"
               for i, (label, _, _) in enumerate(expected) if i not in met]
    if not judged:  # no spec to judge by (a carry of checkpoints): the box's own list
        missing = [f"{m}{named if m == 'out' else ''}: declared but absent on the box"
                   for m in box_missing]
    warnings = formats.said_once(damaged)
    if run_status in STOPPED and missing:
        warnings += [f"{m} — the run ended {run_status}; its checkpoints and log are its "
                     "results" for m in missing]
        missing = []
    checkpoints = _checkpoints(local, verdicts)
    warnings += [f"{c['path']}: {c['note']}" for c in checkpoints
                 if not c["ok"] and c.get("note")]
    problems = manifest_problems[:100] + formats.said_once(bad) + missing
    return {"ok": not problems, "verified_at": time.time(), "files": files, "counts": counts,
            "files_list": str(files_list) if files_list else None,
            "manifest_digests": [s.digest for s in sources],
            "expected": [label for label, _, _ in expected],
            "problems": problems, "warnings": warnings, "notes": formats.said_once(notes),
            "checkpoints": checkpoints, "manifest_created": sources[0].created if sources
            else None}


def _meet(path: str, expected: list[tuple[str, str, str]], met: set[int]) -> None:
    """Mark the expectations PATH satisfies: it, or a directory above it, matches the glob."""
    for i, (_, under, pattern) in enumerate(expected):
        if i in met or not path.startswith(under):
            continue
        if not under and path.split("/", 1)[0] in RESERVED:
            continue  # outputs at the top of the pull: rgt's ckpt/ and logs/ are not them
        rel = path[len(under):]
        parts = rel.split("/")
        if any(fnmatch.fnmatchcase("/".join(parts[:n]), pattern)
               for n in range(1, len(parts) + 1)):
            met.add(i)


def _verify_one(local: Path, entry: Entry, buf: bytearray, bad, damaged, notes, verdicts
                ) -> dict[str, Any]:
    record: dict[str, Any] = {"path": entry.path, "bytes": entry.bytes}
    try:
        fd = open_inside(local, entry.path)
    except OSError:
        bad.append((entry.path, "listed on the box, missing here (or not a regular file)"))
        return {**record, "ok": False}
    size, digest = _hash_fd(fd, buf)
    record["sha256_ok"] = digest == entry.sha256 and size == entry.bytes
    if not record["sha256_ok"]:
        bad.append((entry.path, "hash or size differs from the box's manifest"))
    kind = formats.kind_of_name(posixpath.basename(entry.path))
    verdict = formats.check_file(local / entry.path, kind, hashed=record["sha256_ok"]) \
        if kind is not None and record["sha256_ok"] else None
    if verdict is not None:
        verdicts[entry.path] = verdict
        record.update(loads=verdict.ok, load_detail=verdict.note,
                      checked=list(verdict.checked), kind=verdict.kind)
        if not verdict.ok:
            # the copy equals the box's file, so the damage is on the box too (a save cut
            # short by a kill): keeping the box saves nothing, but the user must know
            damaged.append((entry.path, f"damaged on the box too: {verdict.note}"))
        elif "not unpickled" in verdict.note:
            notes.append((entry.path, verdict.note))
    record["ok"] = record["sha256_ok"]
    return record


def _hash_fd(fd: int, buf: bytearray) -> tuple[int, str]:
    """(bytes, sha256) of an open file, read with one reused buffer; closes FD."""
    h = hashlib.sha256()
    view = memoryview(buf)
    size = 0
    try:  # readv into the one buffer: no file object, no allocation per file
        while n := os.readv(fd, (buf,)):
            h.update(view[:n])
            size += n
    finally:
        os.close(fd)
    return size, h.hexdigest()


def _checkpoints(local: Path, verdicts: dict[str, formats.Verdict]) -> list[dict[str, Any]]:
    """The pulled checkpoints as units, each built from its files' verdicts (nothing checked
    twice) and damaged when any of them is: in the checkpoint home (ckpt/) the units of
    `rgt.ckpt.newest`, elsewhere an HF checkpoint-N, accelerate or DCP directory, or a
    .ckpt/.pt/rgt.ckpt file that says its step."""
    dirs: dict[str, dict[str, formats.Verdict]] = {}  # a directory unit → its files' verdicts
    files: dict[str, list[tuple[str, formats.Verdict]]] = {}  # a file unit → its files
    steps: dict[str, int] = {}
    for rel, verdict in verdicts.items():
        unit = newest.unit_of(rel.removeprefix("ckpt/")) if rel.startswith("ckpt/") else None
        parent = str(Path(rel).parent)
        if unit is not None and unit.is_dir:
            key = f"ckpt/{unit.key}"
        elif formats.kind_of(local / parent) in formats.DIR_KINDS:
            key, unit = parent, None
        else:
            if unit is not None:
                files.setdefault(f"ckpt/{unit.key}", []).append((rel, verdict))
                steps[f"ckpt/{unit.key}"] = unit.step
            elif verdict.kind in ("rgt.ckpt", "lightning", "torch") and verdict.step is not None:
                files.setdefault(rel, []).append((rel, verdict))
            continue
        dirs.setdefault(key, {})[rel[len(key) + 1:]] = verdict
        if unit is not None:
            steps[key] = unit.step
    units = [_file_unit(parts, steps.get(key)) for key, parts in files.items()]
    units += [_dir_unit(local, key, parts, steps.get(key)) for key, parts in dirs.items()]
    return sorted(units, key=lambda u: (u["step"] is None, u["step"] or 0, u["path"]))


def _file_unit(parts: list[tuple[str, formats.Verdict]], step: int | None) -> dict[str, Any]:
    """A checkpoint file (with an rgt.ckpt save's sidecar, when it has one) as one unit."""
    rel, main = next(((r, v) for r, v in parts if v.kind != "rgt.ckpt-sidecar"), parts[0])
    bad = [v for _, v in parts if not v.ok]
    return {"path": rel, "kind": main.kind, "step": main.step if main.step is not None
            else step, "ok": not bad, "checked": list(main.checked),
            "note": "; ".join(f"{v.path.name}: {v.note}" for v in bad) if main.ok else ""}


def _dir_unit(local: Path, key: str, parts: dict[str, formats.Verdict], step: int | None
              ) -> dict[str, Any]:
    """A checkpoint directory as one unit: its layout checked (`formats.check_dir`) when it
    is one rgt knows, and damaged when any file under it is."""
    nested = [v for name, v in parts.items() if "/" in name]
    if formats.kind_of(local / key) in formats.DIR_KINDS:
        whole = formats.check_dir(local / key, hashed=True, parts={
            name: v for name, v in parts.items() if "/" not in name})
        kind, ok, checked, note = whole.kind, whole.ok, list(whole.checked), whole.note
        step = whole.step if whole.step is not None else step
    else:  # a directory named with a step, of no layout rgt knows: its files speak
        kind, ok, checked = "directory", True, sorted({c for v in parts.values()
                                                      for c in v.checked})
        note = f"{len(parts)} checkpoint files verified"
        nested = list(parts.values())
    bad = [v for v in nested if not v.ok]
    if bad:
        said = "; ".join(formats.said_once((os.path.relpath(v.path, local / key), v.note)
                                           for v in bad))
        note = f"{note}; {said}" if not ok else said
        ok = False
    return {"path": key, "kind": kind, "step": step, "ok": ok, "checked": checked,
            "note": note}
