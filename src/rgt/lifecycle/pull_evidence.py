"""The evidence a pull leaves: the report's notes on what came and what stayed on the box
(`say_what_came`), the box's own records kept beside it (`keep_box_records`), and
`PULL_VERIFIED.json` with the store's row that `rgt down` reads (`record_evidence`).
"""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path
from typing import Any

from rgt.lifecycle.pull_checkpoints import fallback_note
from rgt.lifecycle.pull_plan import PullPlan
from rgt.lifecycle.pull_verify import HASH_BUF, hash_fd
from rgt.lifecycle.untrusted import Entry, shown, write_private
from rgt.store import Run, Store
from rgt.transport import TransportError


def say_what_came(report: dict[str, Any], plan: PullPlan, box: str, run: Run,
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


def keep_box_records(transport, source: str, into: Path, entries: list[Entry]
                     ) -> dict[str, list[str]]:
    """Fetch the box's own records the pull left out of the results (`pull_verify.LeftOut`)
    into INTO, rgt's evidence directory, each checked against the manifest: a copy that differs
    is said as a warning (it is the box's account, not a result: the results were verified
    apart)."""
    paths: list[str] = []
    warnings: list[str] = []
    for entry in entries:
        kept = into / posixpath.basename(entry.path)
        try:
            transport.get(f"{source}/{entry.path}", into)
            size, digest = hash_fd(os.open(kept, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)),
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


def record_evidence(store: Store, report: dict[str, Any], evidence: Path) -> None:
    """PULL_VERIFIED.json in rgt's evidence directory, and the row `rgt down` reads: the store
    keeps counts and a digest; the list of files stays in the evidence files."""
    write_private(evidence / "PULL_VERIFIED.json", json.dumps(report, indent=1).encode())
    row = {k: v for k, v in report.items() if k != "files"}
    row["problems"], row["warnings"] = report["problems"][:50], report["warnings"][:50]
    store.add_evidence("pull-verified", report["box"], report["ok"], row, run=report["run"])
    store.record("pull", {"ok": report["ok"], "files": report["counts"]["files"],
                          "dest": report["dest"], "source": report["source"]},
                 box=report["box"], run=report["run"])
