#!/usr/bin/env python3
"""rgt on-box stop: end a live run so its trainer checkpoints first, then make sure it is gone.

Usage (standard library only, Python >= 3.8; ship it on stdin or as a file):

    python3 stop.py STATE_JSON GRACE_S
    python3 - STATE_JSON GRACE_S < stop.py

SIGTERM goes to the RUNNER recorded in STATE_JSON (it forwards the signal to the job's process
group and records it, so the run reads "stopped" and ``recover:`` does not restart it); to the
job's group, and to every process whose environment has this run's RGT_RUN_DIR (torchrun's workers
live in sessions of their own), when the runner is gone. After GRACE_S seconds whatever is left
of the job's group, then the runner, then any process of the run, gets SIGKILL. Without /proc (a
macOS laptop's ``local`` box) pid reuse is not checked and only the recorded pids are known.
Prints one JSON report: before, sent, escalated, after, exit_code, stop_signal, left (pids of
the run still alive at the end: none, unless one is unkillable).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from rgt.onbox._common import pid_alive, read_json, run_processes


def send(pid, sig, group=False) -> bool:
    try:
        (os.killpg if group else os.kill)(int(pid), sig)
        return True
    except (OSError, ValueError):
        return False


def wait_gone(pids, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline and any(pid_alive(p, s) for p, s in pids):
        time.sleep(0.2)


def run_pids(run_dir: str) -> list:
    """(pid, start) of every live process whose environment has RGT_RUN_DIR=RUN_DIR."""
    return sorted(run_processes(run_dir).items())


def kill_all(pids, sig) -> list:
    return [f"{sig.name} to pid {pid}" for pid, start in pids
            if pid_alive(pid, start) and send(pid, sig)]


def stop(state_path: str, grace: float) -> dict:
    run_dir = os.path.dirname(os.path.abspath(state_path))
    st = read_json(state_path) or {}
    runner = (st.get("runner_pid"), st.get("runner_pid_start"))
    job = (st.get("pid"), st.get("pid_start"))
    report = {"before": st.get("status"), "sent": [], "escalated": False}
    if pid_alive(*runner) and send(runner[0], signal.SIGTERM):
        report["sent"].append(f"SIGTERM to runner {runner[0]}")
    else:  # no runner to end the tree: the group, and what left it
        if pid_alive(*job) and send(job[0], signal.SIGTERM, group=True):
            report["sent"].append(f"SIGTERM to job group {job[0]}")
        report["sent"] += kill_all(run_pids(run_dir), signal.SIGTERM)
    wait_gone([runner, job] + run_pids(run_dir), grace)
    if pid_alive(*job):
        report["escalated"] = send(job[0], signal.SIGKILL, group=True)
        report["sent"].append(f"SIGKILL to job group {job[0]}")
        wait_gone([runner], 5)  # the runner records the kill and exits on its own
    if pid_alive(*runner):
        report["escalated"] = send(runner[0], signal.SIGKILL) or report["escalated"]
        report["sent"].append(f"SIGKILL to runner {runner[0]}")
    left = run_pids(run_dir)
    if left:  # the runner is gone and these outlived it
        report["sent"] += kill_all(left, signal.SIGKILL)
        report["escalated"] = True
        wait_gone(left, 5)
    report["left"] = sorted(pid for pid, start in left if pid_alive(pid, start))
    after = read_json(state_path) or {}
    report.update(after=after.get("status"), exit_code=after.get("exit_code"),
                  stop_signal=after.get("stop_signal"))
    return report


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        state_path, grace = args[0], float(args[1])
    except (IndexError, ValueError):
        sys.stderr.write("usage: python3 stop.py STATE_JSON GRACE_S\n")
        return 2
    print(json.dumps(stop(state_path, grace)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
