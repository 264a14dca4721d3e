"""Pulled results never travel back to the box (issue 13 item 8): the default pull destination
and every --dest inside the workdir are left out of the next push, so is what `.rgtignore`
names; `rgt smoke` writes nothing into the workdir; a pull lays outputs out as they were in the
workdir (`out/w.bin`, not `out/out/w.bin`)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from boxkit import write_job

LIST_CODE = ("mkdir -p out && find . \\( -type f -o -type l \\) -not -path './out/*' "
             "| sort > out/pushed.txt && echo weights > out/w.bin")


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


def in_dir(cli, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The real CLI run from CWD (the default pull destination is ./rgt-results)."""
    env = {**os.environ, **cli.env, "COLUMNS": "200", "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-m", "rgt", *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"rgt {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result


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


def test_pulled_results_never_travel_back(cli, tmp_path):
    work = tmp_path / "proj"
    work.mkdir()
    (work / "train.sh").write_text(LIST_CODE + "\n")
    (work / ".rgtignore").write_text("*.bin\n/notes/\n")
    (work / "notes").mkdir()
    (work / "notes" / "draft.md").write_text("mine\n")
    (work / "sub" / "notes").mkdir(parents=True)
    (work / "sub" / "notes" / "kept.md").write_text("pushed: the pattern is anchored\n")
    (work / "weights.bin").write_bytes(b"0" * 1000)
    spec = write_job(work, run="bash train.sh", outputs=["out"])
    cli.ok("up", "box")

    first = in_dir(cli, work, "run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", first, "--until-done", "--timeout", "60")
    in_dir(cli, work, "pull", "box", first)  # the default destination: ./rgt-results/box/RUN
    pulled = work / "rgt-results" / "box" / first
    assert (pulled / "out" / "w.bin").read_text() == "weights\n", "no out/out nesting"
    assert not (pulled / "out" / "out").exists()
    in_dir(cli, work, "pull", "box", first, "--dest", "mine/results")

    second = in_dir(cli, work, "run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", second, "--until-done", "--timeout", "60")
    code = cli.home / "boxes" / "box" / "scratch" / "rgt" / second / "code"
    pushed = (code / "out" / "pushed.txt").read_text().split()  # what the job found there
    assert pushed == ["./.rgtignore", "./job.yaml", "./sub/notes/kept.md", "./train.sh"], pushed
    report = json.loads(cli.ok("pull", "box", second, "--dest", str(tmp_path / "r2"),
                               "--json").stdout)
    assert report["pull"]["ok"] and {f["path"] for f in report["pull"]["files"]} == {
        "out/pushed.txt", "out/w.bin"}  # the box's SYNC_MANIFEST.json is kept as evidence

    (work / ".rgtignore").write_text("!keep.bin\n")
    refused = cli("run", "box", str(spec))
    assert refused.returncode == 2 and ".rgtignore:1" in refused.stderr
    assert "Traceback" not in refused.stderr
