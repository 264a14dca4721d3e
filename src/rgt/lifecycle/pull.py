"""`rgt pull`: manifest on the box, resumable transfer, re-hash and load here.

The evidence it leaves (`PULL_VERIFIED.json` beside the pulled files, and a row in the store)
is what `rgt down` demands before it will stop the meter. A file that arrived but does not
hash as the box said it should is a failure, not a warning. Checkpoints are checked by format
(`rgt.ckpt.formats`); one that is damaged on the box itself is named as a warning, since
keeping the box would not save it.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

from rgt.ckpt import formats
from rgt.errors import UserError
from rgt.lifecycle.boxes import transport_for
from rgt.lifecycle.launch import Layout
from rgt.lifecycle.onbox import run_json
from rgt.lifecycle.watch import refresh
from rgt.onbox.manifest import sha256_file
from rgt.store import LIVE, Run, Store
from rgt.transport import TransferStats


def layout_of(run: Run) -> Layout:
    durable = run.spec["durable_run_dir"]
    # runs launched before checkpoint homes kept theirs inside the durable run dir
    return Layout(run.remote_dir, durable, run.spec.get("ckpt_home") or f"{durable}/ckpt")


def default_dest(box: str, run_id: str) -> Path:
    return Path.cwd() / "rgt-results" / box / run_id


def output_patterns(run: Run) -> list[str]:
    """What the manifest must list, relative to the durable run dir (the job's checkpoint
    home is listed on its own: `home_to_fetch`)."""
    cells = (run.spec.get("platform_run") or {}).get("cells") or 0
    if cells:  # a sweep: each cell's declared outputs by name, so a missing cell shows
        ckpt = ["ckpt"] if run.spec.get("checkpoint_dir") else []
        return [f"cells/{i}/{p}" for i in range(cells)
                for p in [f"out/{o}" for o in run.spec.get("outputs", [])] + ckpt]
    return ["out"] if run.spec.get("outputs") else []


def home_to_fetch(run: Run, layout: Layout) -> str | None:
    """The job's checkpoint home, when the run declared one and it lies outside the durable
    run dir (a sweep's cells keep theirs inside it)."""
    if not run.spec.get("checkpoint_dir") or (run.spec.get("platform_run") or {}).get("cells"):
        return None
    if layout.ckpt == f"{layout.durable_run_dir}/ckpt":
        return None
    return layout.ckpt


def manifest_of(transport, root: str, path: str, patterns: list[str]) -> dict[str, Any]:
    # exit 2 = written, with declared outputs missing: verify_pulled reports those
    run_json(transport, "manifest", root, path, *patterns, ok_codes=(0, 2))
    return json.loads(transport.run(f"cat {shlex.quote(path)}", timeout=60).stdout)


def pull(store: Store, box_name: str, run_id: str | None, dest: Path | None = None,
         progress=None, *, from_scratch: bool = False) -> dict[str, Any]:
    """Fetch a run's results and verify them here.

    `from_scratch` is the way out of a sync-failed run: the outputs never reached the
    durable tier but are still in the run's workdir, so they are hard-linked into a pull
    directory beside it (no extra space on a full box) and fetched from there.
    """
    box = store.box(box_name)
    run = store.run(box.name, run_id)
    layout = layout_of(run)
    local = dest or default_dest(box.name, run.id)
    if local.exists() and not local.is_dir():
        raise UserError(f"--dest {local} is a file; give a directory to pull into")
    transport = transport_for(box)
    try:
        state = refresh(store, box, run, transport)
        if state["status"] == "sync-failed" and not from_scratch:
            raise UserError(
                f"run {run.id} finished but its outputs did not reach the durable tier "
                f"({state.get('sync', {}).get('error', 'copy failed')}); free space or inodes "
                "there (AD4/U7) and pull again, or fetch them from the run's workdir with "
                "`rgt pull --from-scratch` — nothing on the box was deleted")
        if from_scratch and state["status"] in LIVE:
            raise UserError(f"run {run.id} is still {state['status']}; --from-scratch copies "
                            "a finished run's outputs")
        local.mkdir(parents=True, exist_ok=True)
        if from_scratch:
            source, manifest = _stage_from_workdir(transport, run, layout)
        else:
            source = layout.durable_run_dir
            transport.run(f"mkdir -p {shlex.quote(source)}", timeout=60)
            manifest = manifest_of(transport, source, f"{layout.run_dir}/PULL_MANIFEST.json",
                                 output_patterns(run))
        home = None if from_scratch else home_to_fetch(run, layout)
        if home is not None:
            # the job's checkpoint home, shared by the chain of attempts: fetched as ckpt/
            listed = manifest_of(transport, home, f"{layout.run_dir}/CKPT_MANIFEST.json", ["."])
            manifest["files"] += [{**e, "path": f"ckpt/{e['path']}"} for e in listed["files"]]
            manifest["missing"] += ["ckpt"] if listed["missing"] else []
        stats = transport.get(source, local, progress=progress)
        if home is not None:
            more = transport.get(home, local / "ckpt", progress=progress)
            stats = TransferStats(stats.bytes_sent + more.bytes_sent,
                                  stats.bytes_received + more.bytes_received,
                                  stats.files + more.files, stats.seconds + more.seconds,
                                  stats.attempts + more.attempts)
        logs = fetch_logs(store, transport, box.name, run, local / "logs")
    finally:
        transport.close()
    report = verify_pulled(local, manifest, run_status=state["status"],
                           outputs=run.spec.get("outputs"))
    report["logs"] = logs
    report.update({"run": run.id, "box": box.name, "run_status": state["status"],
                   "run_ended": state.get("ended"), "source": "workdir" if from_scratch
                   else "durable", "transfer": {
                       "bytes_received": stats.bytes_received, "seconds": stats.seconds,
                       "attempts": stats.attempts}})
    _write_atomic(local / "PULL_VERIFIED.json", json.dumps(report, indent=2).encode())
    store.add_evidence("pull-verified", box.name, report["ok"], report, run=run.id)
    store.record("pull", {"ok": report["ok"], "files": len(report["files"]),
                          "dest": str(local), "source": report["source"]},
                 box=box.name, run=run.id)
    return report


LOG_TAIL_BYTES = 64 << 20  # a log is evidence to read, not a result: its last 64 MiB


def fetch_logs(store: Store, transport, box: str, run: Run, dest: Path) -> list[str]:
    """Each attempt's log on this box, the run's and those of the attempts it continues, as
    logs/<run-id>.log (its tail). Not verified: the box writes logs, and they only inform."""
    fetched = []
    for attempt in store.chain(run):
        if attempt.box != box or attempt.created > run.created:
            continue
        log = shlex.quote(f"{attempt.remote_dir}/log")
        result = transport.run(f"tail -c {LOG_TAIL_BYTES} {log}", check=False, timeout=300)
        if result.ok:
            dest.mkdir(parents=True, exist_ok=True)
            _write_atomic(dest / f"{attempt.id}.log", result.stdout.encode())
            fetched.append(attempt.id)
    return fetched


def _stage_from_workdir(transport, run: Run, layout: Layout) -> tuple[str, dict[str, Any]]:
    """Hard-link the declared outputs from the workdir into RUN_DIR/scratch-pull/out."""
    outputs = run.spec.get("outputs") or []
    if not outputs:
        raise UserError(f"run {run.id} declares no outputs; there is nothing to fetch from "
                        "its workdir")
    staged = f"{layout.run_dir}/scratch-pull"
    manifest_path = f"{layout.run_dir}/SCRATCH_MANIFEST.json"
    run_json(transport, "manifest", layout.code, manifest_path, *outputs, ok_codes=(0, 2))
    manifest = json.loads(transport.run(f"cat {shlex.quote(manifest_path)}", timeout=60).stdout)
    files = [entry["path"] for entry in manifest.get("files", [])]
    link = (f"rm -rf {shlex.quote(staged)} && mkdir -p {shlex.quote(staged + '/out')}")
    if files:
        link += (f" && cd {shlex.quote(layout.code)} && cp -al --parents -- "
                 f"{' '.join(shlex.quote(f) for f in files)} {shlex.quote(staged + '/out')}/")
    transport.run(link, timeout=300)
    for entry in manifest.get("files", []):
        entry["path"] = f"out/{entry['path']}"
    return staged, manifest


# A run that ended without succeeding never wrote (or synced) its declared outputs; its
# checkpoints and log are its results, so missing outputs are said, not held against `down`.
STOPPED = ("failed", "cancelled", "preempted", "stopped", "vanished")


def verify_pulled(local: Path, manifest: dict[str, Any], *, run_status: str | None = None,
                  outputs: list[str] | None = None) -> dict[str, Any]:
    """Re-hash every manifest file here and check every checkpoint by its format
    (`rgt.ckpt.formats`). A problem (the copy is not the box's file, or a declared output of a
    run that succeeded is absent) fails the pull; a checkpoint damaged on the box itself and
    a stopped run's missing outputs are warnings. Each distinct message is said once."""
    files, bad, damaged, notes, verdicts = [], [], [], [], {}
    for entry in manifest.get("files", []):
        path = local / entry["path"]
        record: dict[str, Any] = {"path": entry["path"], "bytes": entry["bytes"]}
        if not path.is_file():
            bad.append((entry["path"], "listed on the box, missing here"))
            files.append({**record, "ok": False})
            continue
        size, digest = sha256_file(str(path))  # the very function that hashed it on the box
        record["sha256_ok"] = digest == entry["sha256"] and size == entry["bytes"]
        if not record["sha256_ok"]:
            bad.append((entry["path"], "hash or size differs from the box's manifest"))
        verdict = _load_check(path, hashed=record["sha256_ok"])
        if verdict is not None and record["sha256_ok"]:
            verdicts[entry["path"]] = verdict
            record.update(loads=verdict.ok, load_detail=verdict.note,
                          checked=list(verdict.checked), kind=verdict.kind)
            if not verdict.ok:
                # the copy equals the box's file, so the damage is on the box too (a save cut
                # short by a kill): keeping the box saves nothing, but the user must know
                damaged.append((entry["path"], f"damaged on the box too: {verdict.note}"))
            elif "not unpickled" in verdict.note:
                notes.append((entry["path"], verdict.note))
        record["ok"] = record["sha256_ok"]
        files.append(record)
    named = f" ({', '.join(outputs)})" if outputs else ""  # `out` holds the spec's outputs
    missing = [f"{m}{named if m == 'out' else ''}: declared but absent on the box"
               for m in manifest.get("missing", [])]
    warnings = formats.said_once(damaged)
    if run_status in STOPPED and missing:
        warnings += [f"{m} — the run ended {run_status}; its checkpoints and log are its "
                     "results" for m in missing]
        missing = []
    checkpoints = _checkpoints(local, verdicts)
    warnings += [f"{c['path']}: {c['note']}" for c in checkpoints
                 if not c["ok"] and c.get("note")]
    problems = formats.said_once(bad) + missing
    return {"ok": not problems, "verified_at": time.time(), "files": files,
            "problems": problems, "warnings": warnings, "notes": formats.said_once(notes),
            "checkpoints": checkpoints, "manifest_created": manifest.get("created")}


def _load_check(path: Path, *, hashed: bool = True) -> formats.Verdict | None:
    """Check what rgt knows how to check (None: a file only its hash vouches for)."""
    kind = formats.kind_of(path)
    if kind is None:
        return None
    return formats.check_file(path, kind, hashed=hashed)


def _checkpoints(local: Path, verdicts: dict[str, formats.Verdict]) -> list[dict[str, Any]]:
    """The pulled checkpoints as units: an HF checkpoint-N or DCP directory is one (built from
    its files' verdicts, nothing checked twice), a .ckpt/.pt/rgt.ckpt file is one."""
    units: list[dict[str, Any]] = []
    dirs: dict[str, dict[str, formats.Verdict]] = {}
    for rel, verdict in verdicts.items():
        parent = str(Path(rel).parent)
        if formats.kind_of(local / parent) in ("hf-checkpoint", "dcp"):
            dirs.setdefault(parent, {})[Path(rel).name] = verdict
        elif verdict.kind in ("rgt.ckpt", "lightning", "torch") and verdict.step is not None:
            units.append({"path": rel, "kind": verdict.kind, "step": verdict.step,
                          "ok": verdict.ok, "checked": list(verdict.checked), "note": ""})
    for parent, parts in dirs.items():
        whole = formats.check_dir(local / parent, hashed=True, parts=parts)
        units.append({"path": parent, "kind": whole.kind, "step": whole.step, "ok": whole.ok,
                      "checked": list(whole.checked), "note": whole.note})
    return sorted(units, key=lambda u: (u["step"] is None, u["step"] or 0, u["path"]))


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
