"""The on-box runner, driven as the lifecycle drives it: detached real processes, real signals."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from onbox_helpers import feed, read_state, shipped, wait_for, wait_log, wait_status

from rgt.onbox import probe, runner

WAIT_GO = """
import os, sys, time
def wait_go():
    deadline = time.time() + 30
    while not os.path.exists("go"):
        if time.time() > deadline:
            sys.exit(99)
        time.sleep(0.02)
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def start_ready_job(make_run, launcher):
    """Launch a job that prints "ready" then waits for code/go: (runner, run_dir, running state)."""
    run_dir = make_run(WAIT_GO + 'print("ready", flush=True)\nwait_go()\n')
    proc = launcher.start(run_dir)
    running = wait_status(run_dir, "running")
    wait_log(run_dir, "ready")
    return proc, run_dir, running


def test_success_writes_state_log_and_verified_durable_copy(make_run, launcher, tmp_path):
    durable = tmp_path / "durable" / "rgt" / "r1"
    job = (
        WAIT_GO
        + """
os.makedirs("out/sub", exist_ok=True)
for i in range(5):
    print(f"line {i}")
open("out/a.txt", "w").write("alpha\\n")
open("out/sub/b.bin", "wb").write(os.urandom(300_000))
open("best.pt", "wb").write(os.urandom(4096))
print("step=5 loss=0.25", flush=True)
print("to stderr", file=sys.stderr)
wait_go()
print("done")
"""
    )
    run_dir = make_run(job, outputs=["out", "*.pt"], durable_dir=durable, heartbeat_s=0.3)
    proc = launcher.start(run_dir)

    running = wait_status(run_dir, "running")
    assert running["runner_pid"] == proc.pid
    assert (run_dir / "runner.pid").read_text().strip() == str(proc.pid)
    assert running["pid"] and running["pid_start"] == runner.proc_start_time(running["pid"])
    assert running["boot_id"] == runner.boot_id()
    assert running["detach"]["setsid"] is True
    wait_log(run_dir, "step=5 loss=0.25")

    live = probe.probe(str(run_dir), use_dmesg=False)
    assert live["job"]["alive"] and live["runner"]["alive"]
    assert live["verdict"]["status"] == "running"
    assert live["log"]["last_metrics"] == "step=5 loss=0.25"

    first_beat = running["heartbeat"]
    wait_for(lambda: (read_state(run_dir) or {}).get("heartbeat", 0) > first_beat, 5, what="beat")

    (run_dir / "code" / "go").touch()
    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert proc.wait(timeout=10) == 0
    assert state["status"] == "succeeded", state
    assert state["exit_code"] == 0 and state["signal"] is None
    assert state["ended"] >= state["started"]

    log = (run_dir / "log").read_text().splitlines()
    job_lines = [ln for ln in log if ln.startswith("line ")]
    assert job_lines == [f"line {i}" for i in range(5)]
    assert log.index("line 4") < log.index("step=5 loss=0.25") < log.index("done")
    assert "to stderr" in log
    assert log[-1] == "[rgt] exit=0 status=succeeded"

    sync = state["sync"]
    assert sync["status"] == "ok" and sync["verified"] is True and sync["files"] == 3
    code = run_dir / "code"
    for rel in ("out/a.txt", "out/sub/b.bin", "best.pt"):
        assert sha256(durable / rel) == sha256(code / rel), rel
    listed = json.loads((durable / runner.SYNC_MANIFEST).read_text())
    assert {f["path"]: f["sha256"] for f in listed["files"]} == {
        rel: sha256(code / rel) for rel in ("out/a.txt", "out/sub/b.bin", "best.pt")
    }
    assert sync["bytes"] == sum(
        (code / r).stat().st_size for r in ("out/a.txt", "out/sub/b.bin", "best.pt")
    )


def test_failure_via_stdin_records_exit_code_and_log_tail(make_run, launcher):
    job = 'import sys\nprint("working")\nprint("Traceback: boom", file=sys.stderr)\nsys.exit(1)\n'
    run_dir = make_run(job, setup="echo setup-ran")
    proc = launcher.start(run_dir, via_stdin=True)  # python3 - RUN_DIR < runner.py

    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert state["status"] == "failed"
    assert state["exit_code"] == 1 and state["signal"] is None
    assert proc.wait(timeout=10) == 1

    report = probe.probe(str(run_dir), use_dmesg=False)
    tail = report["log"]["tail"]
    assert tail.index("setup-ran") < tail.index("working") < tail.index("Traceback: boom")
    assert tail[-1] == "[rgt] exit=1 status=failed"
    assert report["verdict"]["status"] == "failed"
    assert not report["job"]["alive"] and not report["runner"]["alive"]


def test_failed_setup_stops_before_the_command(make_run, launcher):
    run_dir = make_run('print("command-ran")\n', setup="echo preparing && sh -c 'exit 7'")
    launcher.start(run_dir)
    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert state["status"] == "failed" and state["exit_code"] == 7
    log = (run_dir / "log").read_text()
    assert "preparing" in log and "[rgt] setup failed (exit 7)" in log
    assert "command-ran" not in log


def test_sigkilled_job_is_recorded_with_its_signal(make_run, launcher):
    _, run_dir, running = start_ready_job(make_run, launcher)

    os.kill(running["pid"], signal.SIGKILL)
    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert state["status"] == "failed"
    assert state["signal"] == "SIGKILL" and state["exit_code"] == 137
    # the final status line; a leftover-reaping note may come just before or after it
    assert "[rgt] exit=137 signal=SIGKILL status=failed" in (run_dir / "log").read_text()
    # the python child of the killed shell did not outlive the job (U11 orphans)
    assert runner.group_members(running["pgid"]) == []
    assert probe.verdict(state, {})["status"] == "failed"


def test_runner_and_job_sigkilled_is_vanished_not_running(make_run, launcher):
    proc, run_dir, running = start_ready_job(make_run, launcher)

    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    os.killpg(running["pgid"], signal.SIGKILL)
    wait_for(lambda: not runner.pid_alive(running["pid"], running["pid_start"]), 10, what="death")
    assert read_state(run_dir)["status"] == "running"  # the claim left behind

    out = subprocess.run(
        [sys.executable, str(shipped("probe", run_dir.parent)), str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["state"]["status"] == "running"
    assert report["job"]["alive"] is False and report["runner"]["alive"] is False
    verdict = report["verdict"]
    assert verdict["status"] == "vanished"
    checks = [step["check"] for step in verdict["ladder"]]
    assert checks == ["oom-kill", "reboot", "hang-up", "manual-kill-or-unknown"]
    first_matched = next(step for step in verdict["ladder"] if step["matched"])
    assert verdict["cause"] == first_matched["check"]
    assert "U3" in verdict["gotchas"] and verdict["action"]
    # on this box nothing rebooted and the runner was detached (setsid)
    assert verdict["ladder"][1]["matched"] is False
    assert verdict["ladder"][2]["matched"] is False


def test_sigterm_to_runner_reaches_the_job_and_exit_85_is_recorded(make_run, launcher):
    job = (
        WAIT_GO
        + """
import signal
def on_term(signum, frame):
    open("preempted.marker", "w").write(str(signum))
    print("checkpoint saved; exiting 85", flush=True)
    sys.exit(85)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
wait_go()
"""
    )
    run_dir = make_run(job)
    proc = launcher.start(run_dir)
    wait_status(run_dir, "running")
    wait_log(run_dir, "ready")

    os.kill(proc.pid, signal.SIGTERM)
    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert state["status"] == "failed"
    assert state["exit_code"] == 85 and state["signal"] is None
    assert (run_dir / "code" / "preempted.marker").read_text() == str(int(signal.SIGTERM))
    assert [s["signal"] for s in state["signals_received"]] == ["SIGTERM"]
    assert proc.wait(timeout=10) == 85
    assert probe.verdict(state, {})["cause"] == "preempted"


def test_sync_to_an_inode_capped_tier_is_sync_failed_not_success(make_run, launcher, tmpfs):
    durable_mount = tmpfs("size=16m,nr_inodes=16")
    durable = durable_mount / "rgt" / "r1"
    job = """
import os
os.makedirs("out", exist_ok=True)
for i in range(50):
    with open(f"out/sample_{i:03d}.json", "w") as f:
        f.write('{"i": %d}' % i)
print("wrote 50 files")
"""
    run_dir = make_run(job, outputs=["out"], durable_dir=durable)
    proc = launcher.start(run_dir)

    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert proc.wait(timeout=10) == runner.EXIT_SYNC_FAILED
    assert state["status"] == "sync-failed", state
    assert state["exit_code"] == 0
    sync = state["sync"]
    assert sync["status"] == "failed" and sync["verified"] is False
    assert sync["errno"] == "ENOSPC"
    assert "AD4/U7" in sync["error"] and "df -i" in sync["error"]
    assert sync["failed_path"].startswith(str(durable_mount))
    assert 0 <= sync["files"] < 50
    assert "AD4/U7" in state["error"]
    log = (run_dir / "log").read_text()
    assert "SYNC FAILED" in log and "ENOSPC" in log
    assert log.splitlines()[-1] == "[rgt] exit=0 status=sync-failed"
    assert "status=succeeded" not in log and "sha256-verified" not in log
    assert not (durable / runner.SYNC_MANIFEST).exists()
    # no temp file left, and whatever holds a final name is a whole copy
    assert not [p for p in durable_mount.rglob("*") if p.name.endswith(runner.TMP_SUFFIX)]
    for copy in (durable / "out").glob("*") if (durable / "out").exists() else ():
        assert copy.read_bytes() == (run_dir / "code" / "out" / copy.name).read_bytes()
    assert probe.verdict(state, {})["status"] == "sync-failed"


def test_secrets_reach_only_the_job_environment(make_run, launcher):
    secret = "s3cr3t-" + os.urandom(12).hex() + HOSTILE_SECRET
    job = (
        WAIT_GO
        + """
import hashlib
value = os.environ.get("RGT_TEST_TOKEN", "")
print("token-sha256=" + hashlib.sha256(value.encode()).hexdigest(), flush=True)
print("plain=" + os.environ.get("PLAIN_VAR", ""), flush=True)
print("unbuffered=" + os.environ.get("PYTHONUNBUFFERED", ""), flush=True)
wait_go()
"""
    )
    run_dir = make_run(job, secrets={"RGT_TEST_TOKEN": secret}, env={"PLAIN_VAR": "visible"})
    launcher.start(run_dir)
    running = wait_status(run_dir, "running")
    wait_log(run_dir, "unbuffered=")

    needle = secret.encode()
    leaks = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if needle in cmdline:
                leaks.append(name)
    assert leaks == []
    job_env = Path(f"/proc/{running['pid']}/environ").read_bytes().split(b"\0")
    assert b"RGT_TEST_TOKEN=" + needle in job_env  # it is in the job's env, byte for byte …

    (run_dir / "code" / "go").touch()
    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert state["status"] == "succeeded"
    log = (run_dir / "log").read_text()
    assert "token-sha256=" + hashlib.sha256(needle).hexdigest() in log
    assert "plain=visible" in log and "unbuffered=1" in log
    assert secret not in log  # … and nowhere else
    assert secret not in (run_dir / "state.json").read_text()
    assert not (run_dir / "secrets.env").exists()  # removed from the box once the run ended
    assert not (run_dir / "code" / "pwned").exists()


def test_second_launch_of_a_live_run_is_refused(make_run, launcher):
    first, run_dir, running = start_ready_job(make_run, launcher)

    second = subprocess.run(
        [sys.executable, str(run_dir / "runner.py"), str(run_dir)],  # written by the launch
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == runner.EXIT_REFUSED
    assert json.loads(second.stderr.strip().splitlines()[-1])["refused"] is True
    detached = feed("runner", str(run_dir), "--detach", timeout=30)
    assert detached.returncode == runner.EXIT_REFUSED
    assert json.loads(detached.stdout)["refused"] is True

    after = read_state(run_dir)
    assert after["runner_pid"] == first.pid and after["pid"] == running["pid"]
    assert after["status"] == "running" and first.poll() is None

    (run_dir / "code" / "go").touch()
    assert wait_status(run_dir, ("succeeded", "failed"))["status"] == "succeeded"
    assert first.wait(timeout=10) == 0


def test_detach_via_stdin_returns_at_once_and_relaunch_counts(make_run):
    run_dir = make_run('import time\ntime.sleep(0.5)\nprint("finished")\n')
    started = time.monotonic()
    out = feed("runner", str(run_dir), "--detach", timeout=30)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["refused"] is False and report["runner_pid"] > 0
    assert time.monotonic() - started < 10
    state = wait_status(run_dir, ("succeeded", "failed"))
    assert state["status"] == "succeeded" and state["runner_pid"] == report["runner_pid"]
    assert state["launch"] == 1
    # "succeeded" is written just before the runner exits and lets go of its lock
    deadline = time.monotonic() + 10
    while runner.pid_alive(report["runner_pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)

    again = subprocess.run(
        [sys.executable, str(shipped("runner", run_dir)), str(run_dir)],
        timeout=30,
        capture_output=True,
    )
    assert again.returncode == 0
    assert read_state(run_dir)["launch"] == 2
    assert (run_dir / "log").read_text().count("finished") == 2


def test_job_argv_keeps_compound_commands_and_quotes():
    argv = runner.build_job_argv("echo 'a b' && printf '%s\\n' \"$X\" | cat", "export X=1")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    assert out.stdout.splitlines() == ["a b", "1"]
    failing = runner.build_job_argv("false | cat")
    assert subprocess.run(failing, capture_output=True, timeout=10).returncode == 1  # pipefail


HOSTILE_SECRET = " 'q\" $(touch pwned) `id` $HOME a=b ünï\u2028cödé\r\t "


def test_parse_secrets_is_byte_for_byte():
    parsed = runner.parse_secrets(
        f"A=1\nB='two words'\nC=x=y\nH={HOSTILE_SECRET}\n\nnot a line\n9BAD=1\nD=\n"
    )
    assert parsed == {"A": "1", "B": "'two words'", "C": "x=y", "H": HOSTILE_SECRET, "D": ""}
