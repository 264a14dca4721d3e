"""The runner's verified copy to the durable tier (issue 27 item 8): any legal name, many small
files flushed in batches, never a partial file under a final name."""

from __future__ import annotations

import hashlib
import json
import os

from onbox_helpers import wait_status

from rgt.onbox import runner

LONG_NAME = "n" * 251 + ".txt"  # 255 bytes: NAME_MAX, legal; name + ".rgt-partial" is not


def test_a_255_byte_output_name_syncs(make_run, launcher, tmp_path):
    job = f"""
import os
os.makedirs("out", exist_ok=True)
open(os.path.join("out", {LONG_NAME!r}), "w").write("long name")
"""
    durable = tmp_path / "durable"
    run_dir = make_run(job, outputs=["out"], durable_dir=durable)
    launcher.start(run_dir)
    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert state["status"] == "succeeded", state.get("error")
    assert state["sync"]["files"] == 1 and state["sync"]["verified"] is True
    assert (durable / "out" / LONG_NAME).read_text() == "long name"
    manifest = json.loads((durable / runner.SYNC_MANIFEST).read_text())
    assert [e["path"] for e in manifest["files"]] == [f"out/{LONG_NAME}"]


def test_many_small_files_sync_in_batches_and_verify(tmp_path):
    count = runner.BATCH_FILES + 37  # two batches: one full, one partial
    work = tmp_path / "work"
    for i in range(count):
        sub = work / "out" / f"d{i // 500}"
        if i % 500 == 0:
            sub.mkdir(parents=True)
        (sub / f"f{i}.bin").write_bytes(os.urandom(64 + i % 300))
    os.utime(work / "out" / "d0" / "f0.bin", (1_000_000_000, 1_000_000_000))
    durable = tmp_path / "durable"

    sync = runner.sync_outputs(["out"], str(work), str(durable))
    assert sync["status"] == "ok" and sync["verified"] is True, sync["error"]
    assert sync["files"] == count and sync["batches"] == 2
    assert sync["flush"] in ("syncfs", "fsync")
    manifest = json.loads((durable / runner.SYNC_MANIFEST).read_text())
    assert len(manifest["files"]) == count
    for entry in manifest["files"]:
        data = (durable / entry["path"]).read_bytes()
        assert data == (work / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert sync["bytes"] == sum(e["bytes"] for e in manifest["files"])
    assert not [p for p in durable.rglob("*") if p.name.endswith(runner.TMP_SUFFIX)]
    assert os.stat(durable / "out" / "d0" / "f0.bin").st_mtime == 1_000_000_000  # kept
