"""`rgt pull`: manifest on the box, resumable transfer, re-hash and load here.

The evidence it leaves (`PULL_VERIFIED.json` beside the pulled files, and a row in the store)
is what `rgt down` demands before it will stop the meter. A file that arrived but does not
hash or load as the box said it should is a failure, not a warning.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle.boxes import transport_for
from rgt.lifecycle.launch import Layout
from rgt.lifecycle.onbox import run_json
from rgt.lifecycle.watch import refresh
from rgt.onbox.manifest import sha256_file
from rgt.store import LIVE, Run, Store

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt")


def layout_of(run: Run) -> Layout:
    return Layout(run.remote_dir, run.spec["durable_run_dir"])


def default_dest(box: str, run_id: str) -> Path:
    return Path.cwd() / "rgt-results" / box / run_id


def output_patterns(run: Run) -> list[str]:
    """What the manifest must list, relative to the durable run dir."""
    ckpt = ["ckpt"] if run.spec.get("checkpoint_dir") else []
    cells = (run.spec.get("platform_run") or {}).get("cells") or 0
    if cells:  # a sweep: each cell's declared outputs by name, so a missing cell shows
        return [f"cells/{i}/{p}" for i in range(cells)
                for p in [f"out/{o}" for o in run.spec.get("outputs", [])] + ckpt]
    return (["out"] if run.spec.get("outputs") else []) + ckpt


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
            manifest_path = f"{layout.run_dir}/PULL_MANIFEST.json"
            # exit 2 = written, with declared outputs missing: verify_pulled reports those
            run_json(transport, "manifest", source, manifest_path, *output_patterns(run),
                     ok_codes=(0, 2))
            manifest = json.loads(transport.run(f"cat '{manifest_path}'", timeout=60).stdout)
        stats = transport.get(source, local, progress=progress)
    finally:
        transport.close()
    report = verify_pulled(local, manifest)
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


def verify_pulled(local: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Re-hash every manifest file here and load every checkpoint; collect every problem."""
    files, problems = [], []
    for entry in manifest.get("files", []):
        path = local / entry["path"]
        record: dict[str, Any] = {"path": entry["path"], "bytes": entry["bytes"]}
        if not path.is_file():
            problems.append(f"{entry['path']}: listed on the box, missing here")
            files.append({**record, "ok": False})
            continue
        size, digest = sha256_file(str(path))  # the very function that hashed it on the box
        record["sha256_ok"] = digest == entry["sha256"] and size == entry["bytes"]
        if not record["sha256_ok"]:
            problems.append(f"{entry['path']}: hash or size differs from the box's manifest")
        loaded = _load_check(path)
        if loaded is not None:
            record["loads"], record["load_detail"] = loaded
            if not loaded[0]:
                problems.append(f"{entry['path']}: does not load ({loaded[1]})")
        record["ok"] = record["sha256_ok"] and record.get("loads", True)
        files.append(record)
    for missing in manifest.get("missing", []):
        problems.append(f"{missing}: declared but absent on the box")
    return {"ok": not problems, "verified_at": time.time(), "files": files,
            "problems": problems, "manifest_created": manifest.get("created")}


def _load_check(path: Path) -> tuple[bool, str] | None:
    """Load what can be loaded: checkpoints through rgt.ckpt, JSON with json."""
    if path.suffix == ".json" and not path.name.startswith("ckpt-"):
        try:
            json.loads(path.read_text(encoding="utf-8"))
            return True, "json"
        except (ValueError, UnicodeDecodeError) as err:
            return False, str(err)
    if path.suffix in CHECKPOINT_SUFFIXES:
        from rgt.ckpt import verify_file

        result = verify_file(path)
        if result.expected_sha256 is None:
            # A plain torch.save file has no sidecar; the manifest hash already vouches for
            # its bytes, so what is left to prove is that it loads.
            return bool(result.loads), "loads" if result.loads else result.reason
        return bool(result.ok), result.reason
    return None


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
