"""`rgt doctor` on a real local box: a real detached job, its real log, the real probe."""

from __future__ import annotations

import json
from pathlib import Path

from boxkit import Rgt, write_job

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
       "total capacity of 79.10 GiB")
JOB = (
    "echo step=1 loss=0.9\n"
    f"echo '{OOM}' >&2\n"
    "echo 'ssh: connect to host 10.0.0.7 port 22: Connection refused'\n"
    "echo 'epoch 1 done'\n"
    "exit 1"
)


def _failed_run(cli: Rgt, tmp_path: Path) -> str:
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run=JOB)
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert watched.returncode == 1, watched.stdout + watched.stderr  # the job failed
    return run_id


def test_doctor_names_the_gotchas_in_the_log_with_their_lines(tmp_path):
    cli = Rgt(tmp_path / "rgt-home")
    run_id = _failed_run(cli, tmp_path)
    report = json.loads(cli.ok("doctor", "box", run_id, "--json").stdout)
    assert report["verb"] == "doctor" and report["run"] == run_id
    assert report["log_source"] == "box" and report["probed"] is True
    found = {f["id"]: f for f in report["findings"]}
    assert found["U10"]["evidence"] == OOM and found["U10"]["where"].startswith("log line ")
    assert "Connection refused" in found["U49"]["evidence"]
    assert not {"U3"} & set(found), "one line, one gotcha: the most specific rule"
    human = cli.ok("doctor", "box")  # the newest run by default
    assert "U10" in human.stdout and "CUDA out of memory" in human.stdout


def test_doctor_reads_the_pulled_log_once_the_box_is_down(tmp_path):
    cli = Rgt(tmp_path / "rgt-home")
    run_id = _failed_run(cli, tmp_path)
    cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "pulled"))
    cli.ok("down", "box", "--yes")
    report = json.loads(cli.ok("doctor", "box", run_id, "--json").stdout)
    assert report["probed"] is False and report["log_source"].startswith("pulled log ")
    assert any("is down" in note for note in report["notes"])
    assert "U10" in {f["id"] for f in report["findings"]}


def test_doctor_without_box_or_log_says_so(tmp_path):
    cli = Rgt(tmp_path / "rgt-home")
    run_id = _failed_run(cli, tmp_path)
    cli("down", "box", input="box\n", env={})  # refused: never pulled; give the results up
    given_up = cli("down", "box", "--discard-results", input="box\n")
    assert given_up.returncode == 0, given_up.stdout + given_up.stderr
    human = cli.ok("doctor", "box", run_id)
    assert "never pulled" in human.stdout and "No known gotcha" in human.stdout
    unknown = cli("doctor", "nobox")
    assert unknown.returncode != 0 and "Traceback" not in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
