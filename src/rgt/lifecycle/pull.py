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

This module runs the steps, each in its own home: what comes (`rgt.lifecycle.pull_plan`, and
of the checkpoint home `rgt.lifecycle.pull_checkpoints`), the fetch (`rgt.lifecycle.pull_fetch`),
the check of what arrived (`rgt.lifecycle.pull_verify`) and the evidence
(`rgt.lifecycle.pull_evidence`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rgt.lifecycle import interrupt
from rgt.lifecycle.pull_checkpoints import in_units
from rgt.lifecycle.pull_evidence import keep_box_records, record_evidence, say_what_came
from rgt.lifecycle.pull_fetch import Fetch, fetch_logs, fetch_planned
from rgt.lifecycle.pull_plan import PullPlan, check_dest, default_dest, expected_of, plan_pull
from rgt.lifecycle.pull_verify import LeftOut, verify_pulled
from rgt.lifecycle.untrusted import Entry, evidence_dir, sweep_links
from rgt.platforms import platform_for
from rgt.store import Run, Store, rgt_home


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
        fetch = Fetch(platform, transport, box, run, plan.room, progress)
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
    say_what_came(report, plan, box.name, run, logs, swept, kept)
    report.update({"run": run.id, "box": box.name, "run_status": plan.state["status"],
                   "run_ended": plan.state.get("ended"), "exit_code": plan.state.get("exit_code"),
                   "source": "workdir" if plan.from_scratch else "durable", "dest": str(local),
                   "evidence": str(evidence / "PULL_VERIFIED.json"), "transfer": {
                       "bytes_received": stats.bytes_received, "seconds": stats.seconds,
                       "attempts": stats.attempts, "streams": stats.streams}})
    record_evidence(store, report, evidence)
    return report


def verify_planned(local: Path, run: Run, plan: PullPlan, evidence: Path
                   ) -> tuple[dict[str, Any], list[str], list[Entry]]:
    """(report, warnings of the links swept, the box's records held out of the results).

    Whatever the engine did, no symlink leading out of the pull survives it, and this runs
    before rgt writes anything (the logs) into the tree. Each pass reads the manifests afresh
    (a reading keeps what it found)."""
    swept = sweep_links(local)
    results = [LeftOut(m, plan.is_box_record) for m in plan.sources]
    home = [] if plan.checkpoints is None or plan.home_listed is None else [LeftOut(
        plan.home_listed, in_units(plan.home_listed.prefix, set(plan.checkpoints.left)))]
    report = verify_pulled(local, [*results, *home], run_status=plan.state["status"],
                           outputs=run.spec.get("outputs"),
                           expected=None if plan.from_scratch else
                           expected_of(run, plan.home is not None and plan.declared),
                           files_list=evidence / "PULL_FILES.jsonl")
    return report, swept, [e for m in results for e in m.held]
