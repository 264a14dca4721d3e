"""`rgt down` as a journal: the teardown is recorded before its first step, each step is
marked as it completes, and a `down` killed at any point is finished by the next one.

Why: the steps destroy the very things the Iron Law reads. Killed inside a local box's delete,
the run directories are half gone; a fresh `down` would probe them, read the runs as vanished
or "ran again after the last pull", and refuse a teardown the user had already confirmed
against verified evidence. So the record holds what was confirmed (every run's verdict and the
evidence it stood on, what is deleted, how the meter stops), and a repeated `down` continues
that same teardown: no new judgement, no second prompt, never a second teardown. It says that
it is resuming, and when the teardown began.

Steps, in order (each repeatable: a step cut short is run again whole):

- ``stop-live-runs``: only with --discard-results and live runs on a box that answered;
- ``delete:PATH`` for each path of a local box's panel, then ``rmdir-rgt``;
- ``release``: the platform's meter-stop call, where rgt can make it;
- last, in one transaction with the teardown's end: the box reads "down", the
  teardown-confirmed evidence and the event are written.

While a teardown is open the box takes no new run (`Store.add_run` refuses), and one `down`
of a box runs at a time (`one_at_a_time`: a lock the system drops when its holder dies).
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from typing import Any

from rgt.errors import UserError
from rgt.store import Box, Store, TeardownRecord, rgt_home


@contextlib.contextmanager
def one_at_a_time(box_name: str) -> Iterator[None]:
    """Hold RGT_HOME/locks/down-<box>.lock while a teardown's steps run: a second `down` of the
    box started meanwhile is refused, not run beside it. A killed holder's lock goes with it."""
    folder = rgt_home() / "locks"
    folder.mkdir(exist_ok=True)
    with open(folder / f"down-{box_name}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another `rgt down {box_name}` is running now: let it finish "
                            f"(`rgt ls --all` then shows {box_name} down)") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def steps_of(kind: str, deletes: list[str] | None, stop_live: bool) -> list[str]:
    """The teardown's steps for `kind` (local | release | unreachable | console)."""
    steps = ["stop-live-runs"] if stop_live else []
    if kind == "local":
        steps += [f"delete:{path}" for path in deletes or []] + ["rmdir-rgt"]
    elif kind == "release":
        steps.append("release")
    return steps


def record(store: Store, box: Box, *, kind: str, discarded: bool, verdicts: dict[str, str],
           live: list[str], unverified: list[str], superseded: list[str], unreachable: str,
           deletes: list[str] | None, still_billing: list[str], meter_stop: str,
           stop_how: str) -> TeardownRecord:
    """Record the confirmed teardown before anything is done: what each run's verdict was and
    the evidence it stood on, and every step."""
    evidence = {}
    for run_id, verdict in verdicts.items():
        found = store.latest_evidence("pull-verified", box.name, run_id)
        evidence[run_id] = {"verdict": verdict, "pulled_at": found.at if found else None}
    plan: dict[str, Any] = {
        "kind": kind, "discarded": discarded, "runs": evidence, "live": live,
        "unverified": unverified, "superseded": superseded, "unreachable": unreachable,
        "deletes": deletes, "still_billing": still_billing, "meter_stop": meter_stop,
        "stop_how": stop_how}
    stop_live = discarded and bool(live) and not unreachable
    return store.begin_teardown(box, plan, steps_of(kind, deletes, stop_live))


def check_resumable(store: Store, box: Box, teardown: TeardownRecord) -> None:
    """A resumed teardown covers the runs it judged. One recorded since (only a `rgt run`
    racing the first `down` could) was never judged: refuse, naming it."""
    judged = set(teardown.plan.get("runs") or {})
    newer = [run.id for run in store.runs(box.name) if run.id not in judged]
    if newer:
        raise UserError(
            f"rgt down {box.name}: a teardown of it began {began(teardown)} and did not "
            f"finish, and run(s) {', '.join(newer)} were recorded on it since, which that "
            f"teardown never judged: pull or cancel them (`rgt runs {box.name}`), then "
            f"`rgt down {box.name}` finishes the teardown")


def began(teardown: TeardownRecord) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(teardown.begun))


def resuming_line(teardown: TeardownRecord) -> str:
    """What a resumed `down` says first: which teardown, confirmed against what, how far."""
    plan = teardown.plan
    runs = plan.get("runs") or {}
    verified = sum(1 for r in runs.values() if r.get("verdict") == "ok")
    against = (f"{len(runs)} run(s): {verified} pulled and verified" if runs else "no runs")
    if plan.get("discarded"):
        against += ", results given up (--discard-results, typed)"
    done, total = len(teardown.done), len(teardown.steps)
    return (f"resuming the teardown of {teardown.box} that began {began(teardown)} and was "
            f"cut short ({done} of {total} step(s) done); it was confirmed then against "
            f"{against}, so it goes on without asking again")


def outcome(teardown: TeardownRecord, durable_dir: str) -> str:
    """The summary line `down` prints, from the journal (the same on a resumed teardown)."""
    plan = teardown.plan
    kind = plan["kind"]
    if kind == "local":
        removed = ", ".join(plan.get("deletes") or []) or "nothing"
        return f"removed {removed}; kept durable {durable_dir}"
    if kind == "release":
        return teardown.done.get("release", "released")
    how = plan.get("stop_how") or plan.get("meter_stop")
    if kind == "unreachable":
        return (f"by your word, without reaching it ({plan.get('unreachable')}); make sure "
                f"the console shows it gone: {how}")
    return f"by your word: you typed that you did the console step ({how})"
