"""Where a pull may write: a destination that cannot be created or written is one line and exit
2 before the box is asked anything, with nothing recorded as pulled; a job's workdir (or a
directory holding one) is refused, since the next run would push the results back, while a
directory strictly inside it stays out of pushes; the box's record of its copy
(SYNC_MANIFEST.json) is kept with the evidence, not in the results; the watch panel's labels
share one column."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from boxkit import write_job

from rgt.store import Store

WRITES = ("mkdir -p out && find . -type f -not -path './out/*' | sort > out/pushed.txt && "
          "echo weights > out/w.bin")


def finished_run(cli, work: Path, **fields) -> tuple[Path, str]:
    """A box `box` and a run of a job in WORK that has ended; (its spec, its run id)."""
    spec = write_job(work, **{"run": WRITES, "outputs": ["out"], **fields})
    if not (cli.home / "boxes" / "box").exists():
        cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    return spec, run_id


def in_dir(cli, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **cli.env, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "rgt", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def pulls_recorded(cli) -> int:
    store = Store(cli.home / "state.db")
    return store.db.execute("SELECT count(*) FROM events WHERE kind='pull'").fetchone()[0] + \
        len(list((cli.home / "evidence").glob("*/*/PULL_VERIFIED.json")))


def refused(result: subprocess.CompletedProcess, *words: str) -> str:
    """The one line a refusal says, checked: exit 2, no traceback, every word in it."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())  # rich wraps long lines
    assert all(w in said for w in words), (words, result.stderr)
    return said


def test_a_destination_that_cannot_be_written_is_one_line(cli, tmp_path, tmpfs):
    _, run_id = finished_run(cli, tmp_path / "job")
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    read_only = tmpfs("ro,size=1m")
    bad = [(a_file, "is a file"), (a_file / "under", f"{a_file} is a file"),
           (read_only, "not writable"), (read_only / "new" / "deeper", "cannot be created")]
    if Path("/proc/self").is_dir():  # Linux: the field test's /proc/x
        bad.append((Path("/proc/rgt-pull-here"), "cannot be created"))
    for dest, why in bad:
        said = refused(cli("pull", "box", run_id, "--dest", str(dest)), str(dest), why)
        assert "directory" in said, said  # what to do: give a directory
    assert a_file.read_text() == "mine" and list(read_only.iterdir()) == []
    assert pulls_recorded(cli) == 0, "a refused pull records nothing"
    cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "fine" / "here"))
    assert pulls_recorded(cli) == 2  # the event and the evidence of the one that ran


def test_the_workdir_is_never_a_destination(cli, tmp_path):
    work = tmp_path / "proj"
    spec, run_id = finished_run(cli, work)
    refused(in_dir(cli, work, "pull", "box", run_id, "--dest", ""), "--dest is empty")
    refused(in_dir(cli, work, "pull", "box", run_id, "--dest", "."), str(work), "is the workdir",
            "rgt-results")
    refused(cli("pull", "box", run_id, "--dest", str(tmp_path)), "holds the workdir", str(work))
    (tmp_path / "link").symlink_to(work)
    refused(cli("pull", "box", run_id, "--dest", str(tmp_path / "link")), "is the workdir")
    refused(cli("pull", "box", run_id, "--dest", str(cli.home)), "is rgt's own directory",
            "RGT_HOME")
    assert sorted(p.name for p in work.iterdir()) == ["job.yaml"], "nothing written into it"
    assert pulls_recorded(cli) == 0

    # strictly inside the workdir is fine, and the next push leaves it out
    pulled = in_dir(cli, work, "pull", "box", run_id, "--dest", "results")
    assert pulled.returncode == 0, pulled.stderr
    assert (work / "results" / "out" / "w.bin").read_text() == "weights\n"
    again = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", again, "--until-done", "--timeout", "60")
    code = cli.home / "boxes" / "box" / "scratch" / "rgt" / again / "code"
    assert (code / "out" / "pushed.txt").read_text().split() == ["./job.yaml"]
    # the default destination from inside the workdir is ./rgt-results, never pushed either
    default = in_dir(cli, work, "pull", "box", again)
    assert default.returncode == 0, default.stderr
    assert (work / "rgt-results" / "box" / again / "out" / "w.bin").is_file()


@pytest.mark.parametrize("outputs,at", [(["out"], "SYNC_MANIFEST.json"),
                                        (["out", "logs/x"], "out/SYNC_MANIFEST.json")])
def test_the_box_record_of_its_copy_is_evidence_not_a_result(cli, tmp_path, outputs, at):
    """The runner's SYNC_MANIFEST.json (top of the pull when outputs land flat, under out/
    when one is named like rgt's logs/) stays out of the results, kept in RGT_HOME."""
    run = WRITES + " && mkdir -p logs && echo l > logs/x"
    _, run_id = finished_run(cli, tmp_path / "job", run=run, outputs=outputs)
    box_copy, = (cli.home / "boxes" / "box").rglob(f"{run_id}/out/SYNC_MANIFEST.json")
    dest = tmp_path / "results"
    report = json.loads(cli.ok("pull", "box", run_id, "--dest", str(dest), "--json").stdout)
    pulled = report["pull"]
    assert pulled["ok"], pulled["problems"]
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert not [f for f in files if f.endswith("SYNC_MANIFEST.json")], files
    assert at not in {f["path"] for f in pulled["files"]}
    assert pulled["counts"]["files"] == len([f for f in files if not f.startswith("logs/")])
    kept = cli.home / "evidence" / "box" / run_id / "manifests" / "SYNC_MANIFEST.json"
    assert pulled["box_records"] == [str(kept)]
    listed = json.loads(kept.read_text())
    assert {f["path"] for f in listed["files"]} >= {"out/w.bin", "out/pushed.txt"}
    assert kept.read_bytes() == box_copy.read_bytes()


def test_watch_panel_labels_share_one_column(cli, tmp_path):
    spec = write_job(tmp_path / "job", run="sleep 60")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    try:
        shown = ""
        for _ in range(40):
            shown = cli.ok("watch", "box", run_id, env={"COLUMNS": "80"}).stdout
            if "heartbeat" in shown and "elapsed" in shown:
                break
        rows = {m.group(1): m.start(2) for m in
                (re.match(r"│ (\w+) +(\S)", line) for line in shown.splitlines()) if m}
        assert {"status", "elapsed", "heartbeat"} <= set(rows), shown
        assert len(set(rows.values())) == 1, (rows, shown)
    finally:
        cli.ok("cancel", "box", run_id, "--yes")
