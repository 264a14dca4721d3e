"""probe.py: the verdict ladder (pure) and the facts it reads from a real box."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from onbox_helpers import feed

from rgt.onbox import probe, runner

BOOT = "11111111-2222-3333-4444-555555555555"


def running_state(**extra) -> dict:
    state = {
        "run_id": "r1",
        "status": "running",
        "pid": 4242,
        "pid_start": 1,
        "runner_pid": 4241,
        "boot_id": BOOT,
        "started": 1_000_000.0,
        "heartbeat": 1_000_100.0,
        "heartbeat_s": 10,
        "oom_kill_at_start": 0,
        "detach": {"setsid": True, "tmux": False, "sighup_ignored": True},
        "exit_code": None,
        "signal": None,
    }
    state.update(extra)
    return state


def dead_facts(**extra) -> dict:
    facts = {
        "now": 1_000_200.0,
        "job_alive": False,
        "runner_alive": False,
        "boot_id": BOOT,
        "uptime_s": 50_000.0,
        "oom_kill": 0,
        "dmesg_readable": True,
        "dmesg_oom_lines": [],
    }
    facts.update(extra)
    return facts


def test_verdict_trusts_a_live_process_only():
    assert (
        probe.verdict(running_state(), dead_facts(job_alive=True, runner_alive=True))["status"]
        == "running"
    )
    orphan = probe.verdict(running_state(), dead_facts(job_alive=True))
    assert orphan["status"] == "running" and "runner is gone" in orphan["warnings"][0]
    finishing = probe.verdict(running_state(), dead_facts(runner_alive=True))
    assert finishing["status"] == "running" and "recording" in finishing["summary"]
    assert (
        probe.verdict(running_state(status="starting"), dead_facts(runner_alive=True))["status"]
        == "starting"
    )
    assert probe.verdict(None, dead_facts(runner_alive=True))["status"] == "starting"
    assert probe.verdict(None, dead_facts())["status"] == "vanished"


def test_ladder_oom_counter_rise_comes_first():
    v = probe.verdict(running_state(oom_kill_at_start=2), dead_facts(oom_kill=3))
    assert v["status"] == "vanished" and v["cause"] == "oom-kill"
    assert {"U3", "U9", "U41"} <= set(v["gotchas"])
    # a counter that was already 3 at start is someone else's old OOM (U41: delta, not value)
    assert (
        probe.verdict(running_state(oom_kill_at_start=3), dead_facts(oom_kill=3))["cause"]
        != "oom-kill"
    )
    lines = ["[123.4] Out of memory: Killed process 4242 (python)"]
    assert probe.verdict(running_state(), dead_facts(dmesg_oom_lines=lines))["cause"] == "oom-kill"


def test_ladder_reboot_by_boot_id_or_uptime():
    v = probe.verdict(running_state(), dead_facts(boot_id="other-boot"))
    assert v["cause"] == "reboot"
    assert v["ladder"][0]["matched"] is False  # OOM evidence does not survive a reboot
    assert probe.verdict(running_state(), dead_facts(uptime_s=30.0))["cause"] == "reboot"


def test_ladder_hangup_then_unknown():
    attached = running_state(detach={"setsid": False, "tmux": False, "sighup_ignored": False})
    assert probe.verdict(attached, dead_facts())["cause"] == "hang-up"
    v = probe.verdict(running_state(), dead_facts())
    assert v["cause"] == "manual-kill-or-unknown"
    assert "U4" in v["gotchas"] and "pkill" in v["action"]
    unknown = probe.verdict(running_state(), dead_facts(oom_kill=None, dmesg_readable=False))
    assert unknown["ladder"][0]["matched"] is None  # cannot tell, and says so


def test_terminal_triage():
    assert probe.verdict(running_state(status="failed", exit_code=85), {})["cause"] == "preempted"
    killed = running_state(status="failed", exit_code=137, signal="SIGKILL")
    assert probe.verdict(killed, dead_facts(oom_kill=1))["cause"] == "oom-kill"
    assert probe.verdict(killed, dead_facts())["cause"] == "sigkill"
    sync = probe.verdict(running_state(status="sync-failed", error="ENOSPC"), {})
    assert sync["status"] == "sync-failed" and "AD4/U7" in sync["gotchas"]


def test_metrics_and_tail_from_a_real_log(tmp_path):
    log = tmp_path / "log"
    lines = [
        "[rgt] run=r1 starting",
        '{"step": 10, "loss": 1.5}',
        "epoch 1 step=20 loss=0.91 lr=3e-4",
        "progress 10%\rprogress 50%\rprogress 100%",
        "saving checkpoint",
        "[rgt] exit=0 status=succeeded",
    ]
    log.write_text("\n".join(lines) + "\n")
    facts = probe.log_facts(str(log), tail=3)
    assert facts["last_metrics"] == "epoch 1 step=20 loss=0.91 lr=3e-4"
    assert facts["tail"] == ["progress 100%", "saving checkpoint", "[rgt] exit=0 status=succeeded"]
    assert facts["bytes"] == log.stat().st_size
    log.write_text('{"step": 3, "acc": 0.5}\nno numbers here\n')
    assert probe.log_facts(str(log))["last_metrics"] == '{"step": 3, "acc": 0.5}'
    assert not probe.is_metrics_line("[rgt] exit=0 status=succeeded")


def test_process_facts_detect_pid_reuse_and_zombies():
    me = os.getpid()
    start = runner.proc_start_time(me)
    assert probe.process_facts(me, start)["alive"] is True
    assert probe.process_facts(me, start + 1)["alive"] is False  # same pid, other process
    assert probe.process_facts(me, start, same_boot=False)["alive"] is False
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 10
    while probe.process_facts(child.pid)["state"] != "Z" and time.time() < deadline:
        time.sleep(0.02)
    zombie = probe.process_facts(child.pid)
    assert zombie["exists"] and zombie["state"] == "Z" and zombie["alive"] is False
    child.wait()


def test_probe_script_via_stdin_reports_disks_cgroup_and_boot(tmp_path):
    run_dir = tmp_path / "rgt" / "nothing-yet"
    run_dir.mkdir(parents=True)
    out = feed("probe", str(run_dir), "--dirs", str(tmp_path), "/no/such/dir")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    disk, missing = report["disks"]
    st = os.statvfs(tmp_path)
    assert disk["inodes_total"] == st.f_files and disk["bytes_total"] == st.f_blocks * st.f_frsize
    assert 0 <= disk["inodes_pct"] <= 100 and 0 <= disk["bytes_pct"] <= 100
    assert missing["exists"] is False and "error" in missing
    assert report["boot"]["boot_id"] == runner.boot_id()
    assert report["boot"]["uptime_s"] > 0
    assert report["cgroup"]["version"] in (1, 2, None)
    assert report["dmesg"]["readable"] in (True, False)
    assert report["state"] is None and report["verdict"]["status"] == "vanished"
    assert report["nvidia"]["present"] in (True, False)


def test_kernel_log_scan_ignores_ooms_from_before_the_run():
    text = "\n".join(
        [
            "[  100.000000] Out of memory: Killed process 11 (old)",
            "[  500.100000] eth0: link up",
            "[  900.500000] Memory cgroup out of memory: Killed process 4242 (python)",
            "[  901.000000] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus",
        ]
    )
    scan = probe.scan_kernel_log(text, since_boot_s=800.0)
    assert scan["oom_lines"] == [
        "[  900.500000] Memory cgroup out of memory: Killed process 4242 (python)"
    ]
    assert len(scan["xid_lines"]) == 1 and scan["older_matches"] == 1
    assert len(probe.scan_kernel_log(text)["oom_lines"]) == 2
    v = probe.verdict(running_state(), dead_facts(dmesg_xid_lines=scan["xid_lines"]))
    assert any("U22" in w for w in v["warnings"])
