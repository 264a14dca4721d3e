"""A run is on the record before anything of it starts on the box.

`rgt run` records the run as ``launching`` before the push: a laptop killed at any line of the
launch (SIGKILL, a closed terminal's SIGHUP, a crash) leaves a record, never a live job nobody
knows about — which `down` would have deleted under it, and which a second `rgt run` would have
doubled (two trainers, one checkpoint home).

A ``launching`` run is settled the next time anything asks about it (`watch`, `runs`, `down`,
`run`, `resume` all go through `refresh`):

- while the `rgt run` that recorded it still holds the launch lock, it is still launching;
- once that `rgt run` is gone, the box says what became of it: the runner wrote
  RUN_DIR/state.json, so the job started and the run is adopted (the probe then tells its real
  status); or nothing started, so the partial push is removed and the record with it.

A scheduler's submission cannot be asked about by name: there a run that left no state.json
stays ``launching`` with the advice to look in the queue.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
from typing import Any

from rgt.errors import UserError
from rgt.remote.summary import summarize
from rgt.store import Box, Run, Store, rgt_home

LAUNCHING = "launching"
CLEANUP_TIMEOUT_S = 30


def launch_lock_path(box: str, job: str) -> str:
    """RGT_HOME/locks/run-<box>-<job>-<digest>.lock (the digest keeps odd job names apart)."""
    digest = hashlib.sha256(f"{box}\0{job}".encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{box}-{job}")[:80]
    return str(rgt_home() / "locks" / f"run-{safe}-{digest}.lock")


def launch_in_progress(box: str, job: str) -> bool:
    """Whether another process's `rgt run` of JOB on BOX is starting right now: it holds the
    launch lock (flock, released by the kernel when that process dies, however it dies). This
    process's own hold does not count: a launch asks about the runs it is about to race."""
    import fcntl  # POSIX only; Windows is refused before any verb

    path = launch_lock_path(box, job)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False  # no lock file: no launch ever took it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return holder != str(os.getpid())
    finally:
        os.close(fd)  # closing releases the shared lock, if it was taken
    return False


def what_started(transport, run_dir: str) -> str:
    """``started`` (the runner wrote state.json: the job is the runner's now), ``partial`` (a
    push began, nothing runs) or ``none`` (nothing of the run reached the box)."""
    quoted = shlex.quote(run_dir)
    found = transport.run(f"if [ -e {quoted}/state.json ]; then echo started; "
                          f"elif [ -e {quoted} ]; then echo partial; else echo none; fi",
                          check=False, timeout=CLEANUP_TIMEOUT_S).stdout.strip()
    if found not in ("started", "partial", "none"):
        raise UserError(f"could not tell whether {run_dir} started on the box "
                        f"(it answered {found[:80]!r})")
    return found


def remove_run_dir(transport, run_dir: str) -> bool:
    """Remove RUN_DIR, made by a launch alone (a partial code copy, the secrets file). Twice: a
    transfer's far side that was mid-file when its sender died may still land it."""
    quoted = shlex.quote(run_dir)
    return transport.run(f"rm -rf {quoted}; sleep 1; rm -rf {quoted}; [ ! -e {quoted} ]",
                         check=False, timeout=CLEANUP_TIMEOUT_S).ok


def settle(store: Store, box: Box, run: Run, transport, *, scheduled: bool
           ) -> dict[str, Any] | None:
    """Settle a run recorded as ``launching``. Returns the summary to report when the launch
    is not (or no longer) a run the platform can be asked about; None once the run was adopted
    as started (the caller then asks the platform as for any run)."""
    if launch_in_progress(box.name, run.job):
        return _summary(LAUNCHING, f"`rgt run` is starting {run.id} right now (it holds the "
                                   "launch lock); ask again in a moment")
    found = what_started(transport, run.remote_dir)
    if found == "started":
        spec = {**run.spec, "detach": "unknown (rgt run ended during the start)"}
        store.update_run(run.id, status="starting", spec=spec)
        store.record("launch-adopted", {"why": "state.json found after rgt run ended"},
                     box=box.name, run=run.id)
        run.status, run.spec = "starting", spec
        return None
    if found == "partial" and scheduled:
        return _summary(LAUNCHING, f"`rgt run` ended while submitting {run.id}: the scheduler "
                                   "may have it. Look for it in the queue (squeue --me); cancel "
                                   f"it there if it is, then remove {run.remote_dir}")
    if found == "partial" and not remove_run_dir(transport, run.remote_dir):
        return _summary(LAUNCHING, f"`rgt run` ended before {run.id} started, and removing its "
                                   f"partial push {run.remote_dir} failed: remove it by hand")
    forget(store, run, f"rgt run ended before the job started ({found} on the box)")
    summary = _summary("unstarted", f"{run.id} never started: `rgt run` ended before the job "
                                    "started, and nothing of it runs; its record is removed")
    summary["never_started"] = True
    return summary


def forget(store: Store, run: Run, why: str) -> None:
    """Drop the record of a run that never started (nothing of it runs or holds results);
    an event keeps the history."""
    with contextlib.suppress(UserError):
        store.record("launch-abandoned", {"why": why, "remote_dir": run.remote_dir},
                     box=run.box, run=run.id)
    store.forget_run(run.id)


def _summary(status: str, cause: str) -> dict[str, Any]:
    summary = summarize({})
    summary.update(status=status, exit_code=None, causes=[cause])
    return summary
