#!/usr/bin/env python3
"""rgt on-box stop: end a live run so its trainer checkpoints first, then make sure it is gone.

Usage (standard library only, Python >= 3.8; ship it on stdin or as a file):

    python3 stop.py STATE_JSON GRACE_S
    python3 - STATE_JSON GRACE_S < stop.py

SIGTERM goes to the RUNNER recorded in STATE_JSON (it forwards the signal to the job's process
group and records it, so the run reads "stopped" and ``recover:`` does not restart it); to the
job's group when the runner is gone. After GRACE_S seconds whatever is left of the job's group,
then the runner, gets SIGKILL. Without /proc (a macOS laptop's ``local`` box) pid reuse is not
checked. Prints one JSON report: before, sent, escalated, after, exit_code, stop_signal.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from rgt.onbox._common import pid_alive, read_json


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


def stop(state_path: str, grace: float) -> dict:
    st = read_json(state_path) or {}
    runner = (st.get("runner_pid"), st.get("runner_pid_start"))
    job = (st.get("pid"), st.get("pid_start"))
    report = {"before": st.get("status"), "sent": [], "escalated": False}
    if pid_alive(*runner) and send(runner[0], signal.SIGTERM):
        report["sent"].append(f"SIGTERM to runner {runner[0]}")
    elif pid_alive(*job) and send(job[0], signal.SIGTERM, group=True):
        report["sent"].append(f"SIGTERM to job group {job[0]}")
    wait_gone([runner, job], grace)
    if pid_alive(*job):
        report["escalated"] = send(job[0], signal.SIGKILL, group=True)
        report["sent"].append(f"SIGKILL to job group {job[0]}")
        wait_gone([runner], 5)  # the runner records the kill and exits on its own
    if pid_alive(*runner):
        report["escalated"] = send(runner[0], signal.SIGKILL) or report["escalated"]
        report["sent"].append(f"SIGKILL to runner {runner[0]}")
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
