"""The meter stopped without the user: `rgt run BOX JOB --down` and `rgt autostop BOX N`.

Both arm one watcher per box: a process on this laptop, detached from the terminal (its own
session, stdout to RGT_HOME/autodown/BOX.log), that polls the box as `rgt watch --until-done`
does and then takes the same roads a person would: `rgt pull` (rgt.lifecycle.pull, every run
`down` would refuse over, rgt.lifecycle.every_run) and `rgt down` (rgt.lifecycle.down: its
Iron Law judges, its journal executes). Nothing is released unless that Iron Law passes; the
flag the user typed is the confirmation `down` otherwise asks for, recorded with the run.

- `--down`: once the run ends. A run that did not succeed, a pull that did not verify, or
  any other run still live or unpulled keeps the box up, and the reason is recorded.
- `autostop N`: once no run has been live for N minutes, and only while nothing is unpulled
  (the watcher pulls nothing itself here: it waits, and says why, until the user has).

What the watcher is told and what it did are store events (`autodown`: armed, off, down,
kept-up; `autodown-step`: each pull, each wait), so `rgt ls` shows them and a watcher that
was killed is seen as such: it holds an flock on RGT_HOME/autodown/BOX.lock for its whole
life (POSIX, macOS too), so "armed and no lock held" reads "not running", and `start` (any
`rgt watch BOX`, `rgt autostop BOX`) starts it again from the store.

Only the laptop side exists. An on-box guard (for a laptop that is off) would need a meter
stop that keeps the checkpoint tier and can be run from the box itself; the profiles' only such
actions are console or API steps needing the user's key on the box, which nothing here tests.
This module imports only the store at module level: `rgt ls` reads it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.store import Box, Store, rgt_home

EVENT = "autodown"  # the box's arming and how it ended (box events, no run)
STEP = "autodown-step"  # what the watcher did on the way: a pull, a wait and why
BY_RUN = "--down watcher"
BY_IDLE = "autostop watcher"
_IN_WATCHER = False  # set by `main`: only the watcher's own log gets a line per record


def poll_s() -> float:
    """How often the watcher asks the box (RGT_AUTODOWN_POLL_S; tests shorten it)."""
    return float(os.environ.get("RGT_AUTODOWN_POLL_S") or 10)


def minute_s() -> float:
    """What `autostop N` counts as a minute (RGT_AUTOSTOP_MINUTE_S: tests count seconds)."""
    return float(os.environ.get("RGT_AUTOSTOP_MINUTE_S") or 60)


def _dir() -> Path:
    path = rgt_home() / "autodown"
    path.mkdir(parents=True, exist_ok=True)
    return path


def log_path(box: str) -> Path:
    return _dir() / f"{box}.log"


def _lock_path(box: str) -> Path:
    return _dir() / f"{box}.lock"


# -------------------------------------------------------------------------- the record


def current(store: Store, box: str) -> dict[str, Any] | None:
    """The box's latest `autodown` event: its detail with `at`, or None if never armed."""
    event = store.latest_event(EVENT, box, None)
    if event is None or not isinstance(event["detail"], dict):
        return None
    return {**event["detail"], "at": event["at"]}


def armed(store: Store, box: str) -> dict[str, Any] | None:
    found = current(store, box)
    return found if found and found.get("state") == "armed" else None


def _say(store: Store, box: str, state: str, **detail: Any) -> None:
    if "reason" in detail:  # `down`'s refusal is a table: one line for `rgt ls`
        detail["reason"] = " · ".join(str(detail["reason"]).split("\n"))
    store.record(EVENT, {"state": state, **detail}, box=box)
    _log(box, f"{state} {detail}")


def _step(store: Store, box: str, what: str, run: str | None = None) -> None:
    store.record(STEP, {"what": what}, box=box, run=run)
    _log(box, what)


def _log(box: str, text: str) -> None:
    if _IN_WATCHER:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {box}: {text}", flush=True)


def check_stoppable(box: Box) -> None:
    """Refuse to arm where rgt cannot stop the meter itself (a box registered by hand, whose
    console only the user can click): a watcher would only ever keep it up."""
    from rgt.platforms import platform_for
    from rgt.profiles import load_profile

    if box.state != "up":
        raise UserError(f"box {box.name} is already down")
    if not platform_for(box.profile).stops_meter(box):
        stop = load_profile(box.profile).meter_stop
        raise UserError(f"rgt cannot stop {box.name}'s meter itself (only you can: "
                        f"{stop.how or stop.name}): drop --down / autostop, and `rgt down "
                        f"{box.name}` when done")


def arm(store: Store, box: Box, *, after_run: str | None = None,
        idle_minutes: float | None = None, by: str) -> int | None:
    """Record what the watcher is to do (kept with what was armed before: `--down` on a run
    and an idle autostop live side by side) and start it (its pid). `by` names the typed
    consent."""
    check_stoppable(box)
    before = armed(store, box.name) or {}
    detail = {"after_run": after_run or before.get("after_run"),
              "idle_minutes": idle_minutes if idle_minutes is not None
              else before.get("idle_minutes"),
              "cwd": os.getcwd(), "consent": by}
    _say(store, box.name, "armed", **detail)
    if after_run:  # recorded with the run too: its history says it was to take the box down
        store.record("down-consent", {"consent": by}, box=box.name, run=after_run)
    return start(store, box.name)


def disarm(store: Store, box: str) -> bool:
    """`rgt autostop BOX --off`: the watcher reads it on its next poll and exits."""
    if armed(store, box) is None:
        return False
    _say(store, box, "off", by="rgt autostop --off")
    return True


# ------------------------------------------------------------------- the watcher process


def watcher_pid(box: str) -> int | None:
    """The running watcher's pid, or None when no process holds the box's lock (never
    started, finished, or killed: the kernel drops a dead process's flock)."""
    path = _lock_path(box)
    if not path.exists():
        return None
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            text = handle.read().strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


def start(store: Store, box: str) -> int | None:
    """Start the box's watcher if it is armed and none runs; returns its pid (None: nothing
    to do). Its own session, no terminal, output to the log: it outlives this one."""
    arming = armed(store, box)
    if arming is None:
        return None
    running = watcher_pid(box)
    if running is not None:
        return running
    cwd = arming.get("cwd") if os.path.isdir(str(arming.get("cwd"))) else os.getcwd()
    with open(log_path(box), "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "rgt.lifecycle.autodown", box], cwd=cwd,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 5  # until it holds the lock: `rgt ls` then reads it running
    while (watcher_pid(box) or 0) <= 0 and child.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return child.pid


def restart_note(store: Store, box: str) -> str | None:
    """For `rgt watch BOX`: start the box's watcher again if it is armed and was killed (the
    laptop slept, rebooted, someone ended it), and the line that says so."""
    if armed(store, box) is None or watcher_pid(box) is not None:
        return None
    pid = start(store, box)
    return (f"the auto-down watcher of {box} was not running (killed, or this machine "
            f"restarted); started it again: pid {pid}, log {log_path(box)}")


@contextlib.contextmanager
def _holding_lock(box: str, wait_s: float = 5.0):
    """The box's watcher lock, or None if another watcher holds it past `wait_s` (a check by
    `watcher_pid` holds it only for an instant)."""
    handle = open(_lock_path(box), "a+")  # noqa: SIM115 (held for the process's life)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline:
                handle.close()
                yield False
                return
            time.sleep(0.1)
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    try:
        yield True
    finally:
        handle.close()


class _Disarmed(Exception):
    """The arming changed under the wait (`--off`, the box went down by hand)."""


class _Rearmed(Exception):
    """A later `run --down` armed the box for its own run: the watcher waits for that one."""


def main(box: str) -> int:
    """The watcher: `python -m rgt.lifecycle.autodown BOX`."""
    global _IN_WATCHER
    _IN_WATCHER = True
    with _holding_lock(box) as mine:
        if not mine:
            _log(box, "another watcher holds the lock; this one exits")
            return 0
        _log(box, f"watcher {os.getpid()} started")
        store = Store()
        try:
            _watch(store, box)
        except _Disarmed as why:
            _log(box, str(why))
        except UserError as err:  # said in the store: `rgt ls` shows it
            if (arming := armed(store, box)) is not None:
                _say(store, box, "kept-up", reason=str(err),
                     by=BY_RUN if arming.get("after_run") else BY_IDLE)
            return 1
    return 0


def _watch(store: Store, name: str) -> None:
    """Poll until the arming is settled: down, kept up, or switched off."""
    last_live = 0.0  # none seen yet: the clock runs from the arming or the last run's end
    while True:
        arming, box = _still_armed(store, name)
        if arming.get("after_run"):
            _until_run_ends(store, box, arming)
            continue  # settled: down, kept up, or on with the idle autostop
        live = _live_now(store, box)
        now = time.time()
        if live:
            last_live = now
        minutes = float(arming["idle_minutes"])
        ended = [] if live else [run.updated for run in store.runs(name)]  # last status change
        idle_since = max([arming["at"], last_live, *ended])
        if not live and now - idle_since >= minutes * minute_s() \
                and _down_if_lawful(store, box, BY_IDLE, f"no live run for {minutes:g} min"):
            return
        time.sleep(poll_s())


def _still_armed(store: Store, name: str) -> tuple[dict[str, Any], Box]:
    arming = current(store, name)
    if arming is None or arming.get("state") != "armed":
        raise _Disarmed(f"{(arming or {}).get('state') or 'never armed'}: the watcher exits")
    box = store.box(name)
    if box.state != "up":
        _say(store, name, "ended", reason="the box went down another way", by="you")
        raise _Disarmed("the box is down")
    return arming, box


def _live_now(store: Store, box: Box) -> bool:
    from rgt.lifecycle import every_run

    try:
        return bool(every_run.live_runs(store, box.name))
    except UserError as err:  # unanswered: not idle as far as anyone knows
        _step(store, box.name, f"the box did not answer ({err}); asking again")
        return True


def _until_run_ends(store: Store, box: Box, arming: dict[str, Any]) -> None:
    """`--down`: wait for the run as `watch --until-done` does (the box may go quiet for a
    while: it is asked again, with backoff, without giving up), then pull and go down. A later
    `run --down` on the box takes over: its run is the one waited for (and this one, if still
    live then, keeps the box up)."""
    from rgt.lifecycle import watch as watch_mod

    run = store.run(box.name, arming["after_run"])

    def still_wanted(_summary: dict[str, Any]) -> None:
        now, _ = _still_armed(store, box.name)
        if now.get("after_run") != run.id:
            raise _Rearmed()

    try:
        summary = watch_mod.wait_until_done(
            store, box, run, poll_s=poll_s(), give_up_s=None, on_update=still_wanted,
            say=lambda text: _step(store, box.name, text, run.id))
    except _Rearmed:
        return
    status = summary["status"]
    if status != "succeeded":
        code = summary.get("exit_code")
        _keep_up(store, box, arming, f"run {run.id} ended {status}"
                 + (f" (exit {code})" if code is not None else "")
                 + f": the box stays up for you to look (`rgt logs {box.name} {run.id}`), "
                   f"then `rgt down {box.name}`")
        return
    if not _pull_all(store, box, arming):
        return
    _down_if_lawful(store, box, BY_RUN, f"run {run.id} succeeded", arming=arming)


def _pull_all(store: Store, box: Box, arming: dict[str, Any]) -> bool:
    """`rgt pull BOX --all`'s runs, each pulled as `rgt pull` does (into ./rgt-results/ of
    the directory `rgt run --down` was typed in); False (and kept up) if one did not verify."""
    from rgt.lifecycle import every_run
    from rgt.lifecycle import pull as pull_mod

    found = every_run.runs_to_pull(store, box.name)
    for run in found.runs:
        report = pull_mod.pull(store, box.name, run.id)
        if not report["ok"]:
            problems = "; ".join(str(p) for p in report["problems"][:3])
            _keep_up(store, box, arming, f"the pull of {run.id} did not verify ({problems}): "
                                         f"`rgt pull {box.name} {run.id}` again, then `rgt "
                                         f"down {box.name}`")
            return False
        _step(store, box.name, f"pulled and verified {report['counts']['files']} files into "
                               f"{report['dest']}", run.id)
    consented = [run for run in found.live
                 if store.latest_event("down-consent", box.name, run.id) is not None]
    if consented:  # another `run --down` still runs: the box goes down after that one
        kept = {k: v for k, v in arming.items() if k not in ("state", "at", "after_run")}
        _say(store, box.name, "armed", after_run=consented[0].id, **kept)
        return False
    if found.live:
        names = ", ".join(run.id for run in found.live)
        _keep_up(store, box, arming, f"{names} still running on the box: it stays up; `rgt "
                                     f"pull {box.name} --all` and `rgt down {box.name}` once "
                                     "they end")
        return False
    return True


def _keep_up(store: Store, box: Box, arming: dict[str, Any], reason: str) -> None:
    """The box stays up, and why; an idle autostop armed beside `--down` goes on."""
    _say(store, box.name, "kept-up", reason=reason, by=BY_RUN, run=arming.get("after_run"))
    if arming.get("idle_minutes") is not None:
        _say(store, box.name, "armed", after_run=None, idle_minutes=arming["idle_minutes"],
             cwd=arming.get("cwd"), consent=arming.get("consent"))
    else:
        raise _Disarmed(reason)


def _down_if_lawful(store: Store, box: Box, by: str, why: str,
                    arming: dict[str, Any] | None = None) -> bool:
    """`rgt down`'s own plan and execution, with the consent typed at arming in place of the
    box name typed at a prompt. Refused by the Iron Law: kept up (`--down`) or waited on
    (autostop: said once per reason, asked again each poll). True once it is down."""
    from rgt.lifecycle import down as down_mod

    plan = down_mod.plan_down(store, box.name)
    if plan.resumed is None and (not plan.safe or down_mod.needs_your_word(plan)):
        reason = (" · ".join(str(down_mod.refusal(plan)).split("\n")) if not plan.safe
                  else "only the console can stop this box's meter")
        if arming is not None:
            _keep_up(store, box, arming, reason)
            return False
        last = store.latest_event(STEP, box.name, None)
        if last is None or last["detail"].get("what") != f"waiting: {reason}":
            _step(store, box.name, f"waiting: {reason}")
        return False
    outcome = down_mod.execute_down(store, plan, discarded=False)
    _say(store, box.name, "down", by=by, why=why, outcome=outcome)
    return True


# ---------------------------------------------------------------------- what ls shows


def shown(store: Store, box: Box) -> str | None:
    """One line for `rgt ls`: what the watcher is armed for, and whether it runs; or who
    stopped the box and when; or why it kept it up. None when there is nothing to say."""
    found = current(store, box.name)
    if found is None:
        return None
    when = time.strftime("%H:%M", time.localtime(found["at"]))
    state = found.get("state")
    if state == "down" and box.state == "down":
        return f"down by {found.get('by')} at {when} ({found.get('why')})"
    if box.state != "up":
        return None
    if state == "kept-up":
        return f"{found.get('by')} kept it up at {when}: {found.get('reason')}"
    if state != "armed":
        return None
    what = " and ".join(w for w in (
        found.get("after_run") and f"down after run {found['after_run']} (pull, verify)",
        found.get("idle_minutes") is not None
        and f"autostop after {found['idle_minutes']:g} min with no live run") if w)
    pid = watcher_pid(box.name)
    if pid is None:
        return (f"armed: {what}, but its watcher is NOT running (killed, or the laptop "
                f"restarted): `rgt autostop {box.name}` or `rgt watch {box.name}` restarts it")
    step = store.latest_event(STEP, box.name, None)
    waiting = step["detail"].get("what") if step and step["at"] > found["at"] else None
    return f"armed: {what}; watcher pid {pid}" + (f"; {waiting}" if waiting else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
