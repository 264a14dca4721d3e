"""`rgt pull`: manifest on the box, resumable transfer, re-hash and load here.

The evidence it leaves (`PULL_VERIFIED.json` beside the pulled files, and a row in the store)
is what `rgt down` demands before it will stop the meter. A file that arrived but does not
hash or load as the box said it should is a failure, not a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle.boxes import transport_for
from rgt.lifecycle.launch import Layout
from rgt.lifecycle.onbox import run_json
from rgt.lifecycle.watch import refresh
from rgt.store import Run, Store

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
         progress=None) -> dict[str, Any]:
    box = store.box(box_name)
    run = store.run(box.name, run_id)
    layout = layout_of(run)
    local = dest or default_dest(box.name, run.id)
    if local.exists() and not local.is_dir():
        raise UserError(f"--dest {local} is a file; give a directory to pull into")
    transport = transport_for(box)
    try:
        state = refresh(store, box, run, transport)
        if state["status"] == "sync-failed":
            raise UserError(
                f"run {run.id} finished but its outputs did not reach the durable tier "
                f"({state.get('sync', {}).get('error', 'copy failed')}); free space or inodes "
                "there (AD4/U7), then pull again — nothing on the box was deleted")
        local.mkdir(parents=True, exist_ok=True)
        manifest_path = f"{layout.run_dir}/PULL_MANIFEST.json"
        patterns = output_patterns(run)
        # exit 2 = written, with declared outputs missing: verify_pulled reports those
        run_json(transport, "manifest", layout.durable_run_dir, manifest_path, *patterns,
                 ok_codes=(0, 2))
        manifest = json.loads(transport.run(f"cat '{manifest_path}'", timeout=60).stdout)
        stats = transport.get(layout.durable_run_dir, local, progress=progress)
    finally:
        transport.close()
    report = verify_pulled(local, manifest)
    report.update({"run": run.id, "box": box.name, "run_status": state["status"],
                   "run_ended": state.get("ended"), "transfer": {
                       "bytes_received": stats.bytes_received, "seconds": stats.seconds,
                       "attempts": stats.attempts}})
    _write_atomic(local / "PULL_VERIFIED.json", json.dumps(report, indent=2).encode())
    store.add_evidence("pull-verified", box.name, report["ok"], report, run=run.id)
    store.record("pull", {"ok": report["ok"], "files": len(report["files"]),
                          "dest": str(local)}, box=box.name, run=run.id)
    return report


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
        digest = _sha256(path)
        record["sha256_ok"] = digest == entry["sha256"] and path.stat().st_size == entry["bytes"]
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
