"""`Platform.fetch` leaves out what it is told to (issue 30): `rgt pull` hands each platform
the checkpoints it leaves on the box and the box's own record of its copy as `exclude`, and no
longer wraps the transport to drop them, so every platform's fetch must pass them on. Run
against the platforms whose fetch reads through this machine's transport (an SSH box's own
engine, Colab's Drive folder, Kaggle's staging); Kubernetes' door is tested with its fakes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rgt.platforms import platform_for
from rgt.store import Box, Run
from rgt.transport.local import LocalTransport

FILES = ["out/model.bin", "SYNC_MANIFEST.json", "ckpt/step-1/w.pt", "ckpt/step-2/w.pt",
         "ckpt/last [1].pt"]


@pytest.mark.parametrize("profile", ["local", "colab", "kaggle"])
def test_fetch_leaves_out_what_the_pull_leaves_on_the_box(tmp_path: Path, profile: str):
    remote = tmp_path / "box" / "run"
    for name in FILES:
        (remote / name).parent.mkdir(parents=True, exist_ok=True)
        (remote / name).write_bytes(name.encode())
    box = Box(name="b", profile=profile, connection={}, data_dir=str(tmp_path / "box"),
              durable_dir=str(tmp_path / "box"), rate=None, state="up", created=time.time())
    # a Colab run's Drive folder elsewhere: this is a plain copy, not its outputs' check
    run = Run(id="r1", box="b", job="j", remote_dir=str(remote),
              spec={"durable_run_dir": str(tmp_path / "drive" / "r1")}, status="succeeded",
              exit_code=0, created=time.time(), updated=time.time())
    local = tmp_path / "pull"
    platform_for(profile).fetch(LocalTransport(), box, run, str(remote), local,
                                exclude=["/SYNC_MANIFEST.json", "/ckpt/step-1/",
                                         "/ckpt/step-1/**", r"/ckpt/last \[1\].pt"])
    got = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    assert got == ["ckpt/step-2/w.pt", "out/model.bin"]
    # and with nothing to leave out, everything comes
    platform_for(profile).fetch(LocalTransport(), box, run, str(remote), tmp_path / "all")
    assert len([p for p in (tmp_path / "all").rglob("*") if p.is_file()]) == len(FILES)
