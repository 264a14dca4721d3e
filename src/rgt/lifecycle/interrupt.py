"""Ctrl-C in the middle of a verb: the records stay true, the box keeps no half-made run, and
the user reads what was started and what to do next.

A verb that is cut short raises `Interrupted` (exit 130, the shell's code for SIGINT) with that
message instead of letting Click print "Aborted!". What each verb does about it:

- `run`: until the runner (or the scheduler) has the job, nothing runs, so the run's directory
  on the box — the partial push, the secrets file — is removed and no run is recorded. If the
  job did start before the Ctrl-C landed, the run is recorded (it is live and bills) and the
  message says how to watch or cancel it. A scheduler's submission cannot be asked about by
  name, so there the directory is kept and the message says what to check.
- `pull`: nothing is verified or recorded until the end, so an interrupted pull leaves the
  store as it was (`down` still refuses); the files already here are kept and the next pull
  resumes from them.
- `down`: the box reads "up" until the meter-stop verb has returned; an interrupted one is safe
  to run again.
- `up`: the box is recorded only once it answers; a rented instance is recorded the moment it
  exists, so `rgt ls` shows what bills.

A cleanup runs with SIGINT ignored (`shielded`) and a short timeout: a second Ctrl-C must not
leave it half done.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Callable, Iterator

from rgt.errors import UserError
from rgt.lifecycle import intent
from rgt.store import Box

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C'd command


class Interrupted(UserError):
    """The user pressed Ctrl-C; the message says what was started and what to do."""

    exit_code = EXIT_INTERRUPTED


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """SIGINT ignored for the duration (inherited by the ssh/shell processes started inside,
    so a second Ctrl-C does not kill them either); the old handler restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def explained(message: Callable[[], str]) -> Iterator[None]:
    """Turn a Ctrl-C inside the block into `Interrupted(message())`."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(message()) from None


def launch_interrupted(platform, box: Box, run_dir: str, run_id: str, *,
                       record: Callable[[], object], forget: Callable[[], object],
                       spec_file: str = "JOB.yaml") -> Interrupted:
    """After a Ctrl-C during `rgt run`: ask the box whether the job started (the runner writes
    RUN_DIR/state.json at once). Started: `record()` marks the run started. Not started:
    RUN_DIR, all of it made by this launch, is removed from the box and `forget()` drops the
    record `rgt run` made before the start. Where that cannot be told (no answer, a scheduler's
    submission, a removal that failed) the record stays "launching" for the next verb to
    settle (rgt.lifecycle.intent). Returns the exception to raise."""
    from rgt.platforms.base import Ability  # a launch has the platforms loaded already

    # sbatch and friends: cannot ask by name
    scheduled = Ability.DEPENDENCY_ON in platform.abilities()
    with shielded():
        try:
            transport = platform.connect(box)
            try:
                found = intent.what_started(transport, run_dir)
                if found == "partial" and not scheduled \
                        and not intent.remove_run_dir(transport, run_dir):
                    found = "stuck"
            finally:
                transport.close()
        except UserError as err:
            return Interrupted(
                f"interrupted (Ctrl-C) while starting run {run_id} on {box.name}, and the box "
                f"did not answer afterwards ({err}); the run stays recorded as launching, and "
                f"once the box answers `rgt watch {box.name} {run_id}` settles it (adopts "
                "it if it started, else removes the partial push and the record)")
        if found == "started":
            record()
        elif found == "none" or (found == "partial" and not scheduled):
            forget()
    again = f"`rgt run {box.name} {spec_file}` starts it again"
    if found == "started":
        return Interrupted(
            f"interrupted (Ctrl-C), but run {run_id} had already started on {box.name}: it "
            f"goes on and bills. Watch: `rgt watch {box.name} {run_id} --follow` · cancel: "
            f"`rgt cancel {box.name} {run_id}`")
    if found == "partial" and scheduled:
        return Interrupted(
            f"interrupted (Ctrl-C) while submitting run {run_id} on {box.name}: the scheduler "
            f"may have it; look for it in its queue (squeue --me), cancel it if it is there, "
            f"then remove {run_dir}; it stays recorded as launching until then. {again}")
    if found == "stuck":
        return Interrupted(
            f"interrupted (Ctrl-C) before run {run_id} started on {box.name}; nothing runs, "
            f"but removing the partial push {run_dir} failed: remove it by hand (the run "
            f"stays recorded as launching until then). {again}")
    done = f"the partial push {run_dir} was removed" if found == "partial" else \
        "nothing had reached it yet"
    return Interrupted(f"interrupted (Ctrl-C) before run {run_id} started on {box.name}: "
                       f"nothing runs and nothing was recorded; {done}. {again}")


def up_interrupted(store, name: str, since: float) -> str:
    """What a Ctrl-C during `rgt up NAME` left: a registered box, a rented instance the
    platform recorded the moment it existed (it bills), or nothing."""
    box = store.find_box(name)
    if box is not None and box.state == "up" and box.created >= since:
        return (f"interrupted (Ctrl-C) after box {name} was registered: it is up (and bills "
                f"if rented); `rgt ls` shows it, `rgt down {name}` stops it")
    rented = store.db.execute(
        "SELECT detail FROM events WHERE box=? AND kind='cloud-launch' AND at>=? "
        "ORDER BY id DESC LIMIT 1", (name, since)).fetchone()
    if rented is not None:
        detail = json.loads(rented[0])
        what = f"{detail.get('platform')} instance {detail.get('instance_id')}"
        return (f"interrupted (Ctrl-C) while box {name} was being set up, after rgt rented "
                f"{what}: it bills, and rgt has no box to `down`; terminate it in the "
                "platform's console")
    return (f"interrupted (Ctrl-C): box {name} was not registered and nothing was rented; "
            f"`rgt up {name} …` again when ready")


def remove_partial(platform, box: Box, run_dir: str) -> bool:
    """Best effort, after a push failed before the job started: remove RUN_DIR (made by this
    launch alone: the partial code copy and the secrets file). False when it could not."""
    with shielded():
        try:
            transport = platform.connect(box)
            try:
                return intent.remove_run_dir(transport, run_dir)
            finally:
                transport.close()
        except UserError:
            return False
