"""pull's verification by format (rgt.lifecycle.pull_verify.verify_pulled) over a manifest built by
the real on-box manifest code."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rgt.lifecycle.pull_verify import verify_pulled
from rgt.lifecycle.untrusted import read_manifest
from rgt.onbox import manifest

torch = pytest.importorskip("torch")


def box_and_copy(tmp_path: Path):
    box = tmp_path / "box"
    (box / "ckpt").mkdir(parents=True)
    torch.save({"global_step": 3, "state_dict": {}}, box / "ckpt" / "epoch=0-step=3.ckpt")
    torch.save({"global_step": 6, "state_dict": {"w": torch.ones(50)}},
               box / "ckpt" / "epoch=0-step=6.ckpt")
    last = box / "ckpt" / "epoch=0-step=6.ckpt"
    os.truncate(last, last.stat().st_size // 2)  # a save cut short by a kill, on the box
    manifest.write(str(box), str(tmp_path / "m.jsonl"), ["out", "ckpt"])
    local = tmp_path / "local"
    shutil.copytree(box, local)
    return box, local, read_manifest(tmp_path / "m.jsonl")


def test_damage_on_the_box_warns_damage_in_transit_fails(tmp_path):
    _, local, listed = box_and_copy(tmp_path)
    report = verify_pulled(local, listed, run_status="stopped", outputs=["final"])
    assert report["ok"], report["problems"]
    assert any("epoch=0-step=6.ckpt: damaged on the box too" in w and "truncated" in w
               for w in report["warnings"])
    assert "out (final): declared but absent on the box — the run ended stopped" in \
        " ".join(report["warnings"])
    assert [c["step"] for c in report["checkpoints"] if c["ok"]] == [3]

    succeeded = verify_pulled(local, listed, run_status="succeeded", outputs=["final"])
    assert not succeeded["ok"] and "out (final): declared but absent on the box" in \
        succeeded["problems"]
    with open(local / "ckpt" / "epoch=0-step=3.ckpt", "r+b") as f:
        f.write(b"XX")
    moved = verify_pulled(local, listed, run_status="stopped")
    assert not moved["ok"] and moved["problems"] == [
        "ckpt/epoch=0-step=3.ckpt: hash or size differs from the box's manifest"]
