"""Pulled results never travel back to the box (issue 13 item 8): the default pull destination
and every --dest inside the workdir are left out of the next push, so is what `.rgtignore`
names; `rgt smoke` writes nothing into the workdir; a pull lays outputs out as they were in the
workdir (`out/w.bin`, not `out/out/w.bin`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from boxkit import write_job


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ROOT with what it is: a file's sha256, a link's target, 'dir'."""
    seen = {}
    for current, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(current, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                seen[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                seen[rel] = "dir"
            else:
                seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def test_smoke_writes_nothing_into_the_workdir(cli, tmp_path):
    work = tmp_path / "proj"
    (work / "data").mkdir(parents=True)
    (work / "data" / "train.txt").write_text("local data\n")
    (work / "helper.py").write_text("VALUE = 41\n")
    (work / "inside").symlink_to("helper.py")
    (work / ".rgtignore").write_text("# the box downloads its own data\ndata/\n")
    (work / "rgt-results" / "box" / "r1").mkdir(parents=True)
    smoke = ("python3 -c 'import helper; print(helper.VALUE + 1)' && cat data/train.txt && "
             "mkdir -p out wandb && echo x > out/a && echo y > wandb/run && "
             "echo z > \"$RGT_CKPT_DIR/ckpt-1.pt\" && echo w > \"$RGT_OUT_DIR/m.json\" && "
             "touch made-here && test -L inside && test ! -e rgt-results && echo done")
    spec = write_job(work, run="true", smoke=smoke)
    before = snapshot(work)
    result = cli.ok("smoke", str(spec))
    assert "42" in result.stdout and "local data" in result.stdout and "done" in result.stdout
    assert snapshot(work) == before, "smoke must leave the workdir exactly as it was"
