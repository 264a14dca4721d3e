"""`rgt cancel`: stop a live run so its trainer checkpoints first, then make sure it is gone.

The stop goes to the run's on-box RUNNER, not straight to the job: the runner forwards SIGTERM
to the job's process group and records the signal, so state.json says "stopped by SIGTERM" and
`recover:` does not restart it. After the grace (the time a trainer gets to write its
checkpoint) whatever is left of the job's group, then the runner, gets SIGKILL. A Slurm run is
the scheduler's: scancel sends TERM to the job's steps and SIGKILL after its KillWait.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle.boxes import transport_for
from rgt.profiles import load_profile
from rgt.store import LIVE, Box, Run, Store
from rgt.transport import Transport

DEFAULT_GRACE_S = 30.0

# Runs on the box under the interpreter `rgt up` found: standard library, Python >= 3.8, and no
# /proc needed (a macOS laptop's `local` box has none; there pid reuse is not checked).
_ONBOX = r'''
import json, os, signal, sys, time
state_path, grace = sys.argv[1], float(sys.argv[2])

def load():
    try:
        with open(state_path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}

def alive(pid, start=None):
    if not pid:
        return False
    try:
        with open("/proc/%d/stat" % int(pid), "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        fields = None
    if fields is not None:
        return fields[0] not in (b"Z", b"X") and (start is None or int(fields[19]) == int(start))
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

def kill(pid, sig, group=False):
    try:
        (os.killpg if group else os.kill)(int(pid), sig)
        return True
    except OSError:
        return False

st = load()
runner, rstart, job, jstart = (st.get("runner_pid"), st.get("runner_pid_start"),
                               st.get("pid"), st.get("pid_start"))
report = {"before": st.get("status"), "sent": [], "escalated": False}
if alive(runner, rstart) and kill(runner, signal.SIGTERM):
    report["sent"].append("SIGTERM to runner %s" % runner)
elif alive(job, jstart) and kill(job, signal.SIGTERM, group=True):
    report["sent"].append("SIGTERM to job group %s" % job)
deadline = time.time() + grace
while time.time() < deadline and (alive(runner, rstart) or alive(job, jstart)):
    time.sleep(0.2)
if alive(job, jstart):
    report["escalated"] = kill(job, signal.SIGKILL, group=True)
    report["sent"].append("SIGKILL to job group %s" % job)
    end = time.time() + 5  # the runner records the kill and exits on its own
    while time.time() < end and alive(runner, rstart):
        time.sleep(0.2)
if alive(runner, rstart):
    report["escalated"] = kill(runner, signal.SIGKILL) or report["escalated"]
    report["sent"].append("SIGKILL to runner %s" % runner)
after = load()
report.update(after=after.get("status"), exit_code=after.get("exit_code"),
              stop_signal=after.get("stop_signal"))
print(json.dumps(report))
'''


def default_grace(box: Box) -> float:
    """The profile's spot/preemption grace when it names one in seconds ('30s (KillWait)'),
    else DEFAULT_GRACE_S: a cancel should give a trainer the time a preemption would."""
    text = load_profile(box.profile).facts.spot_grace
    found = re.match(r"\s*~?(\d+(?:\.\d+)?)\s*s\b", text or "")
    grace = float(found.group(1)) if found else 0.0
    return grace if grace > 0 else DEFAULT_GRACE_S


def cancel(store: Store, box: Box, run: Run, grace_s: float) -> dict[str, Any]:
    """Stop the run (SIGTERM, SIGKILL after grace_s), mark it cancelled, return what was done."""
    if run.status not in LIVE:
        raise UserError(f"run {run.id} already ended ({run.status}); nothing to cancel — "
                        f"`rgt pull {box.name} {run.id}` fetches what it left")
    if box.state != "up":
        raise UserError(f"box {box.name} is {box.state}; its runs ended with it")
    if run.status == "paused":
        raise UserError(f"run {run.id} is paused (its machine is not running): cancel it once "
                        f"`rgt watch {box.name}` says it is back, or give it up with "
                        f"`rgt down {box.name} --discard-results`")
    job_id = (run.spec.get("platform_run") or {}).get("job_id")
    transport = transport_for(box)
    try:
        if job_id:
            # Slurm: TERM to every step and the batch shell, SIGKILL after KillWait.
            transport.run(f"scancel {shlex.quote(str(job_id))}", timeout=60)
            report: dict[str, Any] = {"sent": [f"scancel {job_id}"], "escalated": False}
        else:
            report = _stop_on_box(transport, f"{run.remote_dir}/state.json", grace_s)
    finally:
        transport.close()
    store.update_run(run.id, status="cancelled")
    store.record("cancel", {"grace_s": grace_s, **report}, box=box.name, run=run.id)
    run.status, run.updated = "cancelled", time.time()
    return report


def _stop_on_box(transport: Transport, state_path: str, grace_s: float) -> dict[str, Any]:
    command = (f"{shlex.quote(transport.python)} - {shlex.quote(state_path)} "
               f"{shlex.quote(str(grace_s))}")
    result = transport.run(command, stdin=_ONBOX.encode(), timeout=grace_s + 60, check=False)
    try:
        report = json.loads(result.stdout.strip().splitlines()[-1]) if result.ok else None
    except (ValueError, IndexError):
        report = None
    if not isinstance(report, dict):  # the box's answer is input, not a given
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise UserError(f"could not stop the run on the box (exit {result.rc}): {tail}; "
                        "nothing was marked cancelled, try again")
    return report
