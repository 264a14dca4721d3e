"""`rgt verify`: check a pull again, here, against the evidence it left — no box needed.

The lifecycle's `pull → verify → down`: a pull re-hashes and loads what it fetched once, but
the copy then lives on the laptop, where a sync client, a clean-up script or a full disk can
change it long after. `rgt verify BOX [RUN]` re-reads the box's manifests kept with the pull's
evidence (``RGT_HOME/evidence/<box>/<run>/manifests``, which no box can write to), checks they
are the ones the pull recorded (their digests), and re-hashes and re-loads every file the pull
verified — the same check as the pull's (`pull_verify.verify_pulled`), on the same set of files
(`PULL_FILES.jsonl`), with the same expectations from the spec. It writes no evidence: a
failure says to pull again, and `rgt down` goes by the pull's record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle.pull_plan import expected_of
from rgt.lifecycle.pull_verify import verify_pulled
from rgt.lifecycle.untrusted import Entry, Manifest, evidence_dir, read_manifest, sweep_links
from rgt.store import Store, rgt_home

CKPT_MANIFEST = "CKPT_MANIFEST.jsonl"  # the job's checkpoint home, pulled as ckpt/
OUT_MANIFEST = "PULL_MANIFEST.jsonl"  # the run's outputs on the durable tier


class _Pulled:
    """A manifest read for the files the pull verified only: not the box's own records, not
    the older checkpoints it left on the box (as the pull itself read it)."""

    def __init__(self, manifest: Manifest, paths: set[str]) -> None:
        self._manifest, self._paths = manifest, paths

    def __iter__(self) -> Iterator[Entry]:
        return (e for e in self._manifest if e.path in self._paths and e.link is None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manifest, name)


def reverify(store: Store, box_name: str, run_id: str | None) -> dict[str, Any]:
    """Check the last pull of a run again; the report has the pull's shape plus `pulled_at`,
    `dest` and `evidence`. Raises UserError where there is nothing to check."""
    box = store.box(box_name)
    run = store.run(box.name, run_id)
    pull_again = f"`rgt pull {box.name} {run.id}`"
    evidence = evidence_dir(rgt_home(), box.name, run.id)
    try:
        pulled = json.loads((evidence / "PULL_VERIFIED.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"run {run.id} on {box.name} was never pulled: {pull_again} fetches "
                        "and verifies it") from None
    except (OSError, ValueError):
        pulled = None
    if not isinstance(pulled, dict) or not isinstance(pulled.get("dest"), str):
        raise UserError(f"the evidence of run {run.id}'s pull ({evidence}/PULL_VERIFIED.json) "
                        f"is damaged; {pull_again} verifies it anew")
    if pulled.get("source") == "workdir":
        raise UserError(f"run {run.id} was pulled with --from-scratch, from the box's workdir; "
                        f"check it by pulling again ({pull_again} --from-scratch)")
    listing = evidence / "PULL_FILES.jsonl"
    if not listing.is_file():
        raise UserError(f"the evidence of run {run.id}'s pull has no file list ({listing}): "
                        f"an older rgt pulled it; {pull_again} verifies it anew")
    dest = Path(pulled["dest"])
    if not dest.is_dir():
        raise UserError(f"the pull of run {run.id} is gone from {dest}; {pull_again} fetches "
                        "it again while the box is up")
    try:
        with listing.open(encoding="utf-8") as lines:
            paths = {json.loads(line)["path"] for line in lines if line.strip()}
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"the evidence of run {run.id}'s pull has a damaged file list "
                        f"({listing}); {pull_again} verifies it anew") from None
    manifests = [read_manifest(evidence / "manifests" / name, prefix)
                 for name, prefix in ((OUT_MANIFEST, ""), (CKPT_MANIFEST, "ckpt/"))
                 if (evidence / "manifests" / name).is_file()]
    swept = sweep_links(dest)  # as the pull does: nothing below is read through a link out
    home = pulled.get("home") or {}
    report = verify_pulled(
        dest, [_Pulled(m, paths) for m in manifests], run_status=pulled.get("run_status"),
        outputs=run.spec.get("outputs"),
        expected=expected_of(run, home.get("path") is not None and bool(home.get("declared"))))
    changed = set(pulled.get("manifest_digests") or []) - set(report["manifest_digests"])
    if changed or not manifests:
        report["problems"].insert(0, "the box's manifests kept with the pull's evidence are not "
                                  "the ones it verified against (changed or removed since)")
    if report["counts"]["files"] != len(paths):
        report["problems"].append(f"the pull verified {len(paths)} file(s), the manifests "
                                  f"name {report['counts']['files']} of them")
    report["warnings"] = swept + report["warnings"]
    report["ok"] = not report["problems"]
    report.update({"box": box.name, "run": run.id, "dest": str(dest),
                   "evidence": str(evidence / "PULL_VERIFIED.json"),
                   "pulled_at": pulled.get("verified_at"), "pull_ok": bool(pulled.get("ok"))})
    store.record("verify", {"ok": report["ok"], "files": report["counts"]["files"],
                            "dest": str(dest)}, box=box.name, run=run.id)
    return report
