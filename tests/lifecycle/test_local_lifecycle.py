"""The lifecycle on the `local` profile: real detached processes, real kills, real tmpfs."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from boxkit import wait_for, write_job

SUCCEED = (
    "for i in 1 2 3; do echo step=$i loss=0.$i; sleep 0.2; done\n"
    "mkdir -p out && echo '{\"acc\": 0.9}' > out/metrics.json && echo weights > out/w.bin"
)


def up_local(cli, name: str = "box") -> Path:
    cli.ok("up", name)
    return cli.home / "boxes" / name / "scratch"


def launch(cli, box: str, spec: Path) -> str:
    return cli.ok("run", box, str(spec)).stdout.strip().splitlines()[-1]


def test_whole_loop_and_the_iron_law(cli, tmp_path):
    scratch = up_local(cli)
    spec = write_job(tmp_path / "job", run=SUCCEED, outputs=["out"])
    run_id = launch(cli, "box", spec)
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "succeeded" in watched.stdout and "step 3 · loss 0.3" in watched.stdout

    refused = cli("down", "box", "--yes")
    assert refused.returncode == 3 and "never pulled" in refused.stderr
    assert scratch.is_dir(), "a refused down must not touch the box"

    dest = tmp_path / "results"
    pulled = cli.ok("pull", "box", run_id, "--dest", str(dest))
    assert "verified" in pulled.stdout
    verified = cli.verified("box", run_id)
    assert verified["ok"] and {f["path"] for f in verified["files"]} >= {"out/metrics.json",
                                                                         "out/w.bin"}
    assert (dest / "out" / "w.bin").read_text() == "weights\n"

    cli.ok("down", "box", "--yes")
    assert not scratch.exists()
    assert (cli.home / "boxes" / "box" / "durable" / "rgt" / run_id).is_dir()
    listing = cli.ok("ls", "--all").stdout
    assert "box" in listing and "down" in listing


def test_down_asks_for_the_box_name(cli, tmp_path):
    up_local(cli)
    wrong = cli("down", "box", input="not-the-name\n")
    assert wrong.returncode == 1 and "did not match" in wrong.stderr
    cli.ok("down", "box", input="box\n")


def test_discard_results_is_typed_never_yes(cli, tmp_path):
    up_local(cli)
    spec = write_job(tmp_path / "job", run=SUCCEED, outputs=["out"])
    run_id = launch(cli, "box", spec)
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    both = cli("down", "box", "--yes", "--discard-results")
    assert both.returncode == 3
    typed = cli("down", "box", "--discard-results", input="box\n")
    assert typed.returncode == 0, typed.stderr
    assert "NOT PULLED" in typed.stdout


def test_failed_job_reports_exit_code_and_log_tail(cli, tmp_path):
    up_local(cli)
    spec = write_job(tmp_path / "job", run="echo about to fail; echo boom >&2; exit 1")
    run_id = launch(cli, "box", spec)
    result = cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert result.returncode == 1
    assert "failed" in result.stdout and "exit 1" in result.stdout and "boom" in result.stdout


def test_killed_job_is_vanished_not_running(cli, tmp_path):
    scratch = up_local(cli)
    spec = write_job(tmp_path / "job", run="echo step=1; sleep 300")
    run_id = launch(cli, "box", spec)
    run_dir = scratch / "rgt" / run_id
    state = wait_for(lambda: (s := cli.state(run_dir)).get("pid") and s, timeout=20)
    os.kill(state["runner_pid"], signal.SIGKILL)
    os.killpg(state["pid"], signal.SIGKILL)
    wait_for(lambda: not _alive(state["pid"]), timeout=10)
    assert cli.state(run_dir)["status"] == "running"  # the claim left behind
    result = cli("watch", "box", run_id)
    assert "vanished" in result.stdout and "running" not in result.stdout.split("status")[1][:30]
    assert "U3" in result.stdout


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[1][0] not in "ZX"
    except OSError:
        return False


def test_second_launch_of_a_live_run_is_refused(cli, tmp_path):
    up_local(cli)
    spec = write_job(tmp_path / "job", run="sleep 30")
    launch(cli, "box", spec)
    again = cli("run", "box", str(spec))
    assert again.returncode == 2 and "already has a live run" in again.stderr
    cli("down", "box", "--discard-results", input="box\n")


def test_secrets_never_in_argv_or_logs(cli, tmp_path):
    scratch = up_local(cli)
    # spaces, quotes, $, backticks, = and unicode arrive byte for byte and never execute
    secret = " 's3cr3t\" $(touch pwned) `touch pwned2` $HOME a=b ünï-4c1d "
    spec = write_job(tmp_path / "job", secrets=["MY_TOKEN"],
                     run='printf %s "$MY_TOKEN" | sha256sum > token.sum; echo token-seen; sleep 2')
    proc = subprocess.Popen([sys.executable, "-m", "rgt", "run", "box", str(spec)],
                            env={**os.environ, **cli.env, "MY_TOKEN": secret},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    while proc.poll() is None:
        seen += [p for p in _cmdlines() if secret in p]
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    run_id = out.strip().splitlines()[-1]
    seen += [p for p in _cmdlines() if secret in p]
    assert not seen, seen
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    run_dir = scratch / "rgt" / run_id
    log = (run_dir / "log").read_text()
    assert "token-seen" in log and secret not in log
    digest = hashlib.sha256(secret.encode()).hexdigest()
    assert (run_dir / "code" / "token.sum").read_text().split()[0] == digest
    assert secret not in (run_dir / "state.json").read_text()
    assert not (run_dir / "secrets.env").exists()  # gone from the box when the run ended
    assert not list((run_dir / "code").glob("pwned*"))
    assert secret not in (cli.home / "state.db").read_bytes().decode(errors="replace")


def _cmdlines() -> list[str]:
    lines = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    lines.append(handle.read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return lines


def test_missing_secret_is_a_clear_error(cli, tmp_path):
    up_local(cli)
    spec = write_job(tmp_path / "job", secrets=["NOT_SET_ANYWHERE"], run="true")
    result = cli("run", "box", str(spec))
    assert result.returncode == 2 and "NOT_SET_ANYWHERE" in result.stderr


@pytest.fixture
def tiny_inode_disk(tmpfs):
    return tmpfs("size=16m,nr_inodes=24")


def test_durable_tier_out_of_inodes_is_sync_failed(cli, tmp_path, tiny_inode_disk):
    cli.ok("up", "box", "--durable-dir", str(tiny_inode_disk))
    spec = write_job(tmp_path / "job", outputs=["out"],
                     run="mkdir -p out && for i in $(seq 1 60); do echo $i > out/f$i.json; done")
    run_id = launch(cli, "box", spec)
    result = cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert result.returncode == 1
    assert "sync-failed" in result.stdout and "AD4" in result.stdout and "U7" in result.stdout
    assert "succeeded" not in result.stdout
    pulled = cli("pull", "box", run_id)
    assert pulled.returncode == 2 and "AD4/U7" in pulled.stderr
    assert "--from-scratch" in pulled.stderr
    assert cli("down", "box", "--yes").returncode == 3
    # the way out: the outputs are still in the workdir on the (roomier) scratch tier
    dest = tmp_path / "pulled"
    # as on a Mac's local box: BSD cp has neither -l nor --parents
    bsd = tmp_path / "bsd-bin"
    bsd.mkdir()
    (bsd / "cp").write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in --parents|-*l*) '
                            'echo "cp: illegal option" >&2; exit 64;; esac; done\n'
                            'exec /bin/cp "$@"\n')
    (bsd / "cp").chmod(0o755)
    rescued = cli("pull", "box", run_id, "--from-scratch", "--dest", str(dest),
                  env={"PATH": f"{bsd}:{os.environ['PATH']}"})
    assert rescued.returncode == 0, rescued.stdout + rescued.stderr
    assert sorted(p.name for p in (dest / "out").iterdir()) == sorted(
        f"f{i}.json" for i in range(1, 61))
    assert (dest / "out" / "f7.json").read_text() == "7\n"
    verified = cli.verified("box", run_id)
    assert verified["ok"] and verified["source"] == "workdir" and len(verified["files"]) == 60
    assert cli("down", "box", "--yes").returncode == 0


def test_smoke_passes_fails_on_traceback_and_exit(cli, tmp_path):
    good = write_job(tmp_path / "good", run="true", smoke="echo fine")
    assert "smoke passed" in cli.ok("smoke", str(good)).stdout
    trace = write_job(tmp_path / "trace", run="true",
                      smoke="echo 'Traceback (most recent call last):' >&2; echo x")
    result = cli("smoke", str(trace))
    assert result.returncode == 1 and "traceback" in result.stderr
    bad = write_job(tmp_path / "bad", run="true", smoke="exit 3")
    result = cli("smoke", str(bad))
    assert result.returncode == 1 and "exited with 3" in result.stderr
    slow = write_job(tmp_path / "slow", run="true", smoke="sleep 5")
    result = cli("smoke", str(slow), "--timeout", "1")
    assert result.returncode == 1 and "did not finish" in result.stderr


def test_bad_job_spec_points_at_the_field(cli, tmp_path):
    up_local(cli)
    spec = write_job(tmp_path / "job", run="true", resources={"gpu": "A100:x"})
    result = cli("run", "box", str(spec))
    assert result.returncode == 2 and "resources.gpu" in result.stderr
    assert "Traceback" not in result.stderr
    missing = write_job(tmp_path / "job2", outputs=["out"])
    result = cli("run", "box", str(missing))
    assert result.returncode == 2 and "`run` is required" in result.stderr
    result = cli("run", "box", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_unknown_box_and_run_are_clear(cli):
    result = cli("watch", "ghost")
    assert result.returncode == 2 and "no box named 'ghost'" in result.stderr
    cli.ok("up", "box")
    result = cli("watch", "box")
    assert result.returncode == 2 and "has no runs yet" in result.stderr


def test_watch_follow_streams_the_log_then_reports(cli, tmp_path):
    up_local(cli)
    spec = write_job(tmp_path / "job", run=SUCCEED, outputs=["out"])
    run_id = launch(cli, "box", spec)
    result = cli("watch", "box", run_id, "--follow", timeout=90)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("step=1") < out.index("step=3") < out.index("status")
    assert "[rgt] exit=0 status=succeeded" in out
    assert "step=2" in cli.ok("logs", "box").stdout


def test_dry_run_shows_the_slurm_batch_script(cli, tmp_path):
    cli.ok("up", "login", "--profile", "slurm", "--data-dir", str(tmp_path / "shared"),
           "--durable-dir", str(tmp_path / "shared-durable"))
    spec = write_job(tmp_path / "job", run="python train.py", resources={"time": "00:30:00"})
    script = cli.ok("run", "login", str(spec), "--dry-run").stdout
    assert "#SBATCH --requeue" in script and "#SBATCH --signal=B:TERM@" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert not (tmp_path / "shared" / "rgt").exists(), "a dry run submits and pushes nothing"
    local = cli("run", "box-that-is-not-there", str(spec), "--dry-run")
    assert local.returncode == 2


def test_relaunch_after_an_unwatched_finish_is_allowed(cli, tmp_path):
    """The store still says `running` when nobody watched the run end: that is a claim, so
    the second-launch guard must ask the box before refusing."""
    scratch = up_local(cli)
    spec = write_job(tmp_path / "job", run="sleep 1; echo done")
    first = launch(cli, "box", spec)
    wait_for(lambda: cli.state(scratch / "rgt" / first).get("status") == "succeeded")
    second = cli("run", "box", str(spec))
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip().splitlines()[-1] != first


def test_pull_into_a_file_and_run_of_a_directory_are_clear(cli, tmp_path):
    up_local(cli)
    job_dir = tmp_path / "job"
    spec = write_job(job_dir, run="mkdir -p out; echo x > out/a", outputs=["out"])
    run_id = launch(cli, "box", spec)
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    result = cli("pull", "box", "--dest", str(a_file))
    assert result.returncode == 2 and "is a file" in result.stderr
    assert a_file.read_text() == "mine"
    result = cli("run", "box", str(job_dir))
    assert result.returncode == 2 and "is a directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_sweeps_and_stages_need_a_scheduler(cli, tmp_path):
    """A grid or --after on a box without a scheduler is refused before anything is pushed."""
    scratch = up_local(cli)
    sweep = write_job(tmp_path / "sweep", run="echo {lr}", grid={"lr": [1, 2]})
    result = cli("run", "box", str(sweep))
    assert result.returncode == 2 and "needs a scheduler" in result.stderr, result.stderr
    plain = write_job(tmp_path / "plain", run="true")
    result = cli("run", "box", str(plain), "--after", "anything")
    assert result.returncode == 2 and "--after needs a scheduler" in result.stderr
    assert not (scratch / "rgt").exists() or not any((scratch / "rgt").iterdir())


def test_box_name_that_would_escape_its_directory_is_refused(cli, tmp_path):
    """A local box's scratch is <RGT_HOME>/boxes/<name>/scratch and `down` deletes it."""
    for bad in ("../../outside", "a/b", ".hidden", "with space", ""):
        result = cli("up", bad)
        assert result.returncode == 2 and "is not allowed" in result.stderr, (bad, result.stderr)
    assert not (cli.home / "boxes").exists() or not any((cli.home / "boxes").iterdir())
    assert not (cli.home.parent / "outside").exists()
    negative = cli("up", "box", "--rate", "-1")
    assert negative.returncode == 2 and "--rate" in negative.stderr
    relative = cli("up", "box", "--data-dir", "rel/data")
    assert relative.returncode == 2 and "must be an absolute path" in relative.stderr
    assert not (Path.cwd() / "rel").exists()
