"""Room first (issue 28 item 4), on a real 50 MiB tmpfs as the laptop's disk: a pull counts
what it will write before it writes, refuses in one line what does not fit (naming a
`--checkpoints N` that would), brings a sparse file as holes, fetches declared outputs first,
and when the box's sizes lie and the disk runs out mid-way, removes its partial files and
says what arrived."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from boxkit import write_job

from rgt.errors import UserError
from rgt.lifecycle.room import Room, check_room
from rgt.lifecycle.untrusted import Entry

MiB = 1 << 20

# The box's interpreter runs every on-box script truly, then shrinks the sizes in the
# manifest of the checkpoint home a hundredfold: a box whose sizes lie.
LIAR = """#!/bin/bash
script=$(mktemp); trap 'rm -f "$script"' EXIT
cat > "$script"
{python} "$@" < "$script"; rc=$?
case "$3" in *CKPT_MANIFEST.jsonl) {python} -c '{shrink}' "$3";; esac
exit $rc
"""
SHRINK = ("import json,sys; p=sys.argv[1]; rows=[json.loads(x) for x in open(p)]; "
          "[r.update(bytes=r[\"bytes\"]//100) for r in rows if \"sha256\" in r]; "
          "open(p,\"w\").write(\"\".join(json.dumps(r)+\"\\n\" for r in rows))")


def finished(cli, work: Path, run: str) -> str:
    """A local box `box` and a run of a job writing out/ and a checkpoint home, ended."""
    home = {"checkpoint_dir": "$RGT_CKPT_DIR"} if "RGT_CKPT_DIR" in run else {}
    spec = write_job(work, run=run, outputs=["out"], **home)
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "120")
    return run_id


def used(disk: Path) -> int:
    usage = shutil.disk_usage(disk)
    return usage.total - usage.free


def partials(dest: Path) -> list[Path]:
    return [p for p in dest.rglob("*") if ".rgt-partial" in p.parts]


def one_line(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    said = " ".join(" ".join(lines).split())  # rich wraps one long line
    assert said.startswith("error:"), said
    return said


def test_a_sparse_file_five_times_the_disk_pulls_as_holes_beside_the_real_result(
        cli, tmp_path, tmpfs):
    # the case (5 GB there; 256 MiB here, 5x the disk, to keep the suite fast): a
    # sparse file among the declared outputs, newer than the real result so it would go
    # first, through the runner's durable copy and the pull
    run_id = finished(cli, tmp_path / "job", "mkdir -p out && head -c 30M /dev/urandom > "
                      "out/result.bin && truncate -s 256M out/sparse.bin")
    durable, = (cli.home / "boxes" / "box" / "durable").rglob(f"{run_id}/out/out/sparse.bin")
    assert os.stat(durable).st_blocks * 512 <= MiB, "the runner's copy wrote the holes"
    disk = tmpfs("size=50m")
    dest = disk / "pull"
    cli.ok("pull", "box", run_id, "--dest", str(dest))
    box_result, = (cli.home / "boxes" / "box").rglob(f"{run_id}/code/out/result.bin")
    assert (dest / "out" / "result.bin").read_bytes() == box_result.read_bytes()
    sparse = os.stat(dest / "out" / "sparse.bin")
    assert sparse.st_size == 256 * MiB
    assert sparse.st_blocks * 512 <= 2 * MiB, "the holes were written as zeros"
    assert used(disk) < 34 * MiB and not partials(dest)


def test_what_does_not_fit_is_refused_before_a_byte_naming_what_would(cli, tmp_path, tmpfs):
    run_id = finished(cli, tmp_path / "job", "mkdir -p out && head -c 5M /dev/urandom > "
                      "out/result.bin && for s in 1 2 3; do mkdir -p $RGT_CKPT_DIR/step_$s && "
                      "head -c 20M /dev/urandom > $RGT_CKPT_DIR/step_$s/data.raw; done")
    disk = tmpfs("size=50m")
    dest = disk / "pull"
    said = one_line(cli("pull", "box", run_id, "--dest", str(dest), "--checkpoints", "all"))
    assert "not enough room" in said and str(dest) in said and "65.0 MiB" in said, said
    assert "50.0 MiB free" in said and "--dest" in said, said
    assert "--checkpoints 2 needs 45.0 MiB" in said and "nothing was written" in said, said
    assert used(disk) < MiB and not any(dest.rglob("*")), "a refusal writes nothing"
    assert not list((cli.home / "evidence").glob("*/*/PULL_VERIFIED.json"))

    cli.ok("pull", "box", run_id, "--dest", str(dest), "--checkpoints", "2")
    assert sorted(p.name for p in (dest / "ckpt").iterdir()) == ["step_2", "step_3"]
    assert (dest / "out" / "result.bin").stat().st_size == 5 * MiB and not partials(dest)


def test_a_box_that_lies_about_sizes_runs_out_mid_pull_and_leaves_no_partial(
        cli, tmp_path, tmpfs):
    run_id = finished(cli, tmp_path / "job", "mkdir -p out && head -c 8M /dev/urandom > "
                      "out/result.bin && mkdir -p $RGT_CKPT_DIR/step_1 && head -c 80M "
                      "/dev/urandom > $RGT_CKPT_DIR/step_1/data.raw")
    liar = tmp_path / "liar-python"
    liar.write_text(LIAR.format(python=sys.executable, shrink=SHRINK))
    liar.chmod(0o755)
    with sqlite3.connect(cli.home / "state.db") as db:
        db.execute("UPDATE boxes SET extra = json_set(extra, '$.python', ?) WHERE name = "
                   "'box'", (str(liar),))
    disk = tmpfs("size=50m")
    dest = disk / "pull"
    said = one_line(cli("pull", "box", run_id, "--dest", str(dest)))
    assert "gave up" in said and "disk is full" in said, said
    assert "arrived: outputs 1/1 files" in said and "newest checkpoint 0/1" in said, said
    assert "partial files" in said and f"rgt pull box {run_id}" in said, said
    assert (dest / "out" / "result.bin").stat().st_size == 8 * MiB, "declared outputs came first"
    assert not partials(dest) and used(disk) < 10 * MiB, "the partial was left behind"
    assert not list((cli.home / "evidence").glob("*/*/PULL_VERIFIED.json"))


def test_the_evidence_disk_is_checked_too_and_a_sparse_file_costs_its_blocks(tmp_path, tmpfs):
    # the room check itself, on a real disk for the results and a 1 MiB tmpfs as RGT_HOME's
    local, evidence = tmp_path / "dest", tmpfs("size=1m")
    local.mkdir()
    room = Room(local, evidence)
    room.count("outputs", Entry("sparse.bin", 5 << 30, "0" * 64, disk=0))
    room.count("outputs", Entry("result.bin", 30 * MiB, "0" * 64))
    assert 30 * MiB < room.need < 32 * MiB, room.need
    with pytest.raises(UserError) as refused:
        check_room(room, "r1")
    said = str(refused.value)
    assert f"of evidence into {evidence}" in said, said
    assert f"free space on the disk of {evidence} (RGT_HOME" in said, said
    assert "fits" in said and "\n" not in said, said
