"""`rgt ckpt ls --json` and `rgt ckpt verify --json`: one document in the common frame on stdout,
nothing else there, the exit codes as without it (verify: 1 when the checkpoint is damaged)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rgt.ckpt import Checkpointer


def rgt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rgt", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}, timeout=120)


def test_ls_and_verify_json(tmp_path: Path) -> None:
    home = tmp_path / "c"
    ck = Checkpointer(home, keep_last=3, format="pickle")
    for step, metric in ((10, 0.9), (20, 0.5)):
        ck.save({"step": step, "blob": b"x" * 5000}, step, metric=metric)
    damaged = home / "ckpt-0000000020.pt"
    with open(damaged, "r+b") as f:
        f.seek(100)
        f.write(b"\x00\xff\x00")

    listed = rgt("ckpt", "ls", str(home), "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)  # the whole of stdout is the document
    assert (doc["schema"], doc["verb"], doc["directory"]) == (1, "ckpt ls", str(home))
    rows = {c["path"]: c for c in doc["checkpoints"]}
    assert set(rows) == {"ckpt-0000000010.pt", "ckpt-0000000020.pt"}
    good, bad = rows["ckpt-0000000010.pt"], rows["ckpt-0000000020.pt"]
    assert (good["ok"], good["step"], good["metric"], good["kind"]) == (True, 10, 0.9, "rgt.ckpt")
    assert "hash" in good["checked"] and good["bytes"] > 5000 and good["age_s"] >= 0
    assert bad["ok"] is False and "sha256" in bad["note"]
    quick = json.loads(rgt("ckpt", "ls", str(home), "--json", "--quick").stdout)
    assert {c["path"]: c["verified"] for c in quick["checkpoints"]}["ckpt-0000000010.pt"] is False

    whole = rgt("ckpt", "verify", str(home / "ckpt-0000000010.pt"), "--json")
    assert whole.returncode == 0, whole.stderr
    one = json.loads(whole.stdout)
    assert (one["verb"], one["checkpoint"]["ok"], one["checkpoint"]["step"]) == (
        "ckpt verify", True, 10)
    broken = rgt("ckpt", "verify", str(damaged), "--json")
    assert broken.returncode == 1
    assert json.loads(broken.stdout)["checkpoint"]["ok"] is False

    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = rgt("ckpt", "ls", str(empty), "--json")
    assert nothing.returncode == 0 and json.loads(nothing.stdout)["checkpoints"] == []
    missing = rgt("ckpt", "verify", str(tmp_path / "nope.pt"), "--json")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [f"error: no such checkpoint: {tmp_path}/nope.pt"]
