"""`rgt watch` and `rgt logs`: the run's state, reconciled with the real process.

`state.json` is a claim written by the runner; the probe checks it against the process table,
the boot id and the OOM counters, so a run whose processes are gone reads `vanished` with the
likely cause, never `running`.
"""

from __future__ import annotations

import codecs
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rgt.boxread import (
    MAX_LOG_BYTES,
    STALL_S,
    BoxGarbage,
    LogChunk,
    cut_long_lines,
    with_box,
)
from rgt.errors import UserError
from rgt.store import TERMINAL, Box, Run, Store
from rgt.textsafe import LogFilter, log_text

if TYPE_CHECKING:
    from rgt.transport import Transport

# `watch --until-done` / `--follow` exit codes, one per outcome a script branches on (like
# SkyPilot's `logs --status`); 2 stays "bad usage" as on every verb, 6 is BoxUnreachable.
EXIT_SUCCEEDED = 0
EXIT_FAILED = 1  # ended without succeeding: failed, sync-failed, vanished, preempted, stopped
EXIT_STILL_RUNNING = 4  # --timeout passed; the run goes on
EXIT_NOT_FOUND = 5  # no such box, or no such run on it
EXIT_CANCELLED = 7  # ended by `rgt cancel` (or a teardown that gave it up)

# The summary `rgt watch` saw of an ended run, kept in the store: a later watch shows it
# without asking the box, and `top` shows the run's last progress from it (cli/watch_cmd.py)
ENDED_EVENT = "watch-ended"
FAST_FINISH_S = 60  # a training job that ends this fast usually crashed or read no data...
FAST_FINISH_STEPS = 50  # ...unless its log showed this many steps: that loop did run
PROBE_SAMPLE_S = 30  # at most one stored disk/step sample per this many seconds
RESUME_GRACE_S = 180  # how long a paused run may read "resuming" before it is called vanished


def refresh(store: Store, box: Box, run: Run, transport: Transport | None = None
            ) -> dict[str, Any]:
    """Ask the run's platform for its state (`state`: the on-box probe, squeue …), store what
    changed, return the flat summary (`rgt.remote.summary.summarize`'s keys).

    A platform's `gate` speaks first: while its machine cannot run the job (a preempted vast.ai
    instance) the run reads "paused" and nothing is probed. Once the machine is back, a paused
    run whose processes are gone reads "resuming" for RESUME_GRACE_S, the time the platform's
    restart hook (`restart_hook`: vast.ai's onstart) has to relaunch it, and only then
    "vanished"; where the platform has no such hook (RunPod) nothing will relaunch it, so it
    reads "vanished" at once and `rgt resume` is the way on.
    """
    from rgt.lifecycle import intent
    from rgt.platforms.base import Ability
    from rgt.remote.summary import summarize

    if box.state != "up":
        # nothing to ask: the last status rgt saw, in the shape every caller reads
        summary = summarize({})
        summary.update(status=run.status, exit_code=run.exit_code, note="box is down",
                       causes=[f"box {box.name} is down: this is the last status rgt saw"])
        return summary
    platform = platform_for(box.profile)
    gated = platform.gate(store, box, run) if Ability.GATE in platform.abilities() else None
    if gated is not None:
        summary = gated
    else:
        own = transport is None
        transport = transport or platform.connect(box)
        try:
            if run.status == intent.LAUNCHING:  # recorded before the start: did it start?
                settled = intent.settle(store, box, run, transport,
                                        scheduled=Ability.DEPENDENCY_ON in platform.abilities())
                if settled is not None:
                    return settled
            summary = platform.state(store, box, run, transport)
        except BoxGarbage as err:  # the verb that asked names the box
            raise with_box(err, box.name) from None
        finally:
            if own:
                transport.close()
        hook = platform.restart_hook
        if summary["status"] == "vanished" and run.status in ("paused", "resuming") and hook:
            waited = time.time() - run.updated if run.status == "resuming" else 0.0
            if waited < RESUME_GRACE_S:
                summary.update(status="resuming", advice="", causes=[
                    f"the machine is back; waiting {RESUME_GRACE_S:.0f} s at most for its "
                    f"restart hook ({hook}) to relaunch the run from its checkpoint"])
            else:
                summary["causes"].insert(0, f"the machine came back but nothing relaunched "
                                            f"the run within {RESUME_GRACE_S:.0f} s: read "
                                            f"{run.remote_dir}/runner.out and the {hook} log")
    if run.status == "cancelled" and summary["status"] in TERMINAL:
        # `rgt cancel` asked for this end; the box reads it as "stopped" (or "failed" when the
        # trainer outlived the grace and was killed): the user's word is the status
        summary["status"] = "cancelled"
    if summary["status"] != run.status or summary["exit_code"] != run.exit_code:
        store.update_run(run.id, status=summary["status"], exit_code=summary["exit_code"])
        store.record("status", {"from": run.status, "to": summary["status"],
                                "exit_code": summary["exit_code"],
                                "causes": summary.get("causes")}, box=box.name, run=run.id)
        run.status, run.exit_code, run.updated = (summary["status"], summary["exit_code"],
                                                  time.time())
    # Disk samples feed the trend; one every PROBE_SAMPLE_S is plenty, and it keeps a long
    # `watch --until-done` from writing a row every poll. A gated summary measured nothing.
    edges = store.edge_events("probe", box.name, run.id)
    if gated is None and (edges is None or time.time() - edges[1]["at"] >= PROBE_SAMPLE_S):
        store.record("probe", {"disks": summary.get("disks", {}),
                               "step": (summary.get("training") or {}).get("step")},
                     box=box.name, run=run.id)
    summary["resumed"] = bool(run.spec.get("resumes"))  # continued an earlier attempt's work
    return summary


def warnings(summary: dict[str, Any]) -> list[str]:
    notes = list(summary.get("probe_warnings") or [])
    step = (summary.get("training") or {}).get("step")
    trained = isinstance(step, int | float) and step >= FAST_FINISH_STEPS  # a GPU is quick
    if summary["status"] == "succeeded" and (summary["duration"] or 1e9) < FAST_FINISH_S \
            and not summary.get("resumed") and not trained:  # a resumed one had less to do
        notes.append(f"finished in {summary['duration']:.0f} s — suspiciously fast for "
                     "training; check the log for an empty dataset or a skipped loop")
    age = summary.get("heartbeat_age")
    if summary["status"] == "running" and age is not None and age > 60:
        notes.append(f"no heartbeat for {age:.0f} s: the box may be overloaded or frozen")
    for path, disk in (summary["disks"] or {}).items():
        for key, label, ids in (("inodes_pct", "inodes", "AD4/U7"), ("bytes_pct", "bytes", "U6")):
            pct = disk.get(key) if isinstance(disk, dict) else None
            if pct is not None and pct >= 90:
                notes.append(f"{path}: {label} {pct:.0f}% used ({ids})")
    return notes


def step_samples(store: Store, box: str, run: str) -> list[tuple[float, int]]:
    """(time, step) of the first and latest probe that saw a step: a rate where the log
    prints none (Lightning's CSV, plain `step N loss X` lines)."""
    query = ("SELECT at, json_extract(detail, '$.step') FROM events WHERE box=? AND run=? "
             "AND kind='probe' AND json_extract(detail, '$.step') IS NOT NULL "
             "ORDER BY id {} LIMIT 1")
    rows = [store.db.execute(query.format(order), (box, run)).fetchone()
            for order in ("ASC", "DESC")]
    return [(float(at), int(step)) for at, step in filter(None, rows)]


def disk_trend(store: Store, box: str, run: str) -> dict[str, float]:
    """Change in used bytes per mount between the first and latest probe of this run."""
    edges = store.edge_events("probe", box, run)
    if edges is None or edges[0]["id"] == edges[1]["id"]:
        return {}
    first, last = edges
    trend = {}
    for path, disk in last["detail"].get("disks", {}).items():
        before = first["detail"].get("disks", {}).get(path)
        if isinstance(disk, dict) and isinstance(before, dict) and "bytes_used" in disk:
            elapsed = max(last["at"] - first["at"], 1e-6)
            trend[path] = (disk["bytes_used"] - before.get("bytes_used", 0)) / elapsed
    return trend


def platform_for(profile: str) -> Any:
    """The box's platform. Imported here, when a box is asked: the platforms (their specs,
    pydantic) are most of what `rgt watch` of an ended run would otherwise load."""
    from rgt.platforms import platform_for as platform_of

    return platform_of(profile)


UNREACHABLE_GIVE_UP_S = 900.0  # a box silent this long is down or gone: stop waiting, say so
UNREACHABLE_BACKOFF_MAX_S = 60.0


class BoxUnreachable(UserError):
    """The box stopped answering for longer than the caller was willing to wait."""

    exit_code = 6


class Silence:
    """How long a box has not answered, how long to wait before asking again, and when to
    give up: each failed poll doubles the pause (to a minute), an answer resets it."""

    def __init__(self, box: Box, poll_s: float, give_up_s: float | None, say=None) -> None:
        self.box, self.poll_s, self.give_up_s, self.say = box, poll_s, give_up_s, say
        self.since: float | None = None
        self.pause = poll_s

    def answered(self) -> None:
        self.since, self.pause = None, self.poll_s

    def stalled(self) -> float:
        """Record a poll whose log read connected but sent nothing for STALL_S; return the
        pause before the next (the same give-up as a box that does not answer)."""
        now = time.monotonic()
        self.since = self.since or now - STALL_S
        silent = now - self.since
        if self.give_up_s is not None and silent >= self.give_up_s:
            return self.failed(f"no bytes for {silent:.0f} s")
        self.pause = min(UNREACHABLE_BACKOFF_MAX_S, self.pause * 2)
        if self.say is not None:
            self.say(f"no bytes from the box for {silent:.0f} s, waiting (retry in "
                     f"{self.pause:.0f} s)")
        return self.pause

    def failed(self, error: str) -> float:
        """Record a failed poll; return the pause before the next, or raise past the limit."""
        now = time.monotonic()
        self.since = self.since or now
        silent = now - self.since
        if self.give_up_s is not None and silent >= self.give_up_s:
            raise BoxUnreachable(
                f"{self.box.name} has not answered for {silent:.0f} s ({error}); stopped "
                "watching — the run may still be going: check the platform's console, then "
                f"`rgt watch {self.box.name}` again (--give-up-after sets this wait)")
        self.pause = min(UNREACHABLE_BACKOFF_MAX_S, self.pause * 2)
        if self.say is not None:
            limit = f", giving up after {self.give_up_s:.0f} s" if self.give_up_s else ""
            self.say(f"{self.box.name} does not answer ({error}); asking again in "
                     f"{self.pause:.0f} s (silent for {silent:.0f} s{limit})")
        return self.pause


def wait_until_done(store: Store, box: Box, run: Run, *, poll_s: float = 2.0,
                    timeout_s: float | None = None, on_update=None,
                    give_up_s: float | None = UNREACHABLE_GIVE_UP_S, say=None
                    ) -> dict[str, Any]:
    """Poll until the run is terminal; reconnects on every poll, so an SSH drop is harmless.

    A box that does not answer is asked again with backoff, each failure told to `say`, and
    given up on (BoxUnreachable) after `give_up_s` seconds of silence."""
    deadline = _deadline(timeout_s)
    silence = Silence(box, poll_s, give_up_s, say)
    while True:
        pause = poll_s
        try:
            summary = refresh(store, box, run)
            silence.answered()
        except BoxGarbage:
            raise  # an answer, and a wrong one: asking again would get the same
        except UserError as err:
            summary = {"status": "unreachable", "error": str(err)}
            pause = silence.failed(str(err))
        if on_update:
            on_update(summary)
        if summary["status"] in TERMINAL:
            return summary
        if deadline is not None and time.monotonic() > deadline:
            raise _still_going(box, run, summary, timeout_s)
        time.sleep(pause)


def _deadline(timeout_s: float | None) -> float | None:
    """When a wait of `timeout_s` seconds ends (None: never); a negative or NaN is refused."""
    if timeout_s is None:
        return None
    if not timeout_s >= 0:  # NaN too: it would compare false and wait forever
        raise UserError(f"--timeout takes a number of seconds >= 0, not {timeout_s:g}")
    return time.monotonic() + timeout_s


def _still_going(box: Box, run: Run, summary: dict[str, Any], timeout_s: float) -> UserError:
    return UserError(f"run {run.id} still {summary['status']} after {timeout_s:.0f} s; "
                     f"it keeps running — check again with `rgt watch {box.name}`",
                     exit_code=EXIT_STILL_RUNNING)


def follow(store: Store, box: Box, run: Run, write, *, poll_s: float = 1.5,
           timeout_s: float | None = None, give_up_s: float | None = UNREACHABLE_GIVE_UP_S,
           say=None) -> dict[str, Any]:
    """Stream new log text to `write` until the run ends; return its final summary.

    Each poll opens one connection for both the log tail and the probe, so an SSH drop costs
    one missed poll and the stream picks up from the last byte it printed; a box that stays
    silent is handled as in `wait_until_done`.
    """
    from rgt.transport.base import Stalled

    offset = 0  # bytes of the box's log already read (not characters: see LogChunk)
    text = codecs.getincrementaldecoder("utf-8")("replace")  # a character cut between polls
    safe = LogFilter()  # colours and \r kept, other escapes gone, even cut between polls
    platform = platform_for(box.profile)
    deadline = _deadline(timeout_s)
    silence = Silence(box, poll_s, give_up_s, say)
    behind = False  # the last read filled its budget: the log is read on before asking again
    summary: dict[str, Any] = {}
    while True:
        pause = poll_s
        transport = platform.connect(box)
        try:
            # the platform speaks first: a paused instance has no log to read over SSH
            if not behind:
                summary = refresh(store, box, run, transport)
            chunk = "" if summary["status"] == "paused" else platform.logs(
                transport, box, run, since_byte=offset)
            silence.answered()
        except BoxGarbage:
            raise
        except Stalled:  # connected, and the log read sent no byte for STALL_S
            chunk, summary = "", {"status": "unreachable"}
            pause = silence.stalled()
        except UserError as err:
            chunk, summary = "", {"status": "unreachable"}
            pause = silence.failed(str(err))
        finally:
            transport.close()
        behind = isinstance(chunk, LogChunk) and chunk.cut
        if chunk:
            data = chunk.data if isinstance(chunk, LogChunk) else chunk.encode()
            offset += len(data)
            write(safe.feed(text.decode(data)))
        elif summary["status"] in TERMINAL:
            write(safe.feed(text.decode(b"", final=True), final=True))
            return summary
        if deadline is not None and time.monotonic() > deadline:
            if summary["status"] in TERMINAL:  # ended; its log was longer than the wait
                if say is not None:
                    say(f"--timeout {timeout_s:g} s passed while the ended run's log was still "
                        f"streaming (read to byte {offset}); `rgt logs {box.name} {run.id}` "
                        "shows its end")
                return summary
            raise _still_going(box, run, summary, timeout_s)
        if not chunk:
            time.sleep(pause)


def read_log(box: Box, run: Run, lines: int | None = None, cell: int | None = None, *,
             raw: bool = False, node: int | None = None) -> str | bytes:
    """The run's log (`rgt logs`); for a sweep, one cell's log, or every cell's. At most its
    last MAX_LOG_BYTES (the platform reads no more; a note says so), lines longer than
    MAX_LOG_LINE shown by their end, through the log filter (`rgt.textsafe.log_text`).
    RAW: the bytes as the box sent them (within the same budget), nothing filtered.
    NODE: a multi-node run's node (its rank) on a group box; default the head's."""
    from rgt.remote import group

    if node is not None:
        count = group.run_nodes(run)
        members = group.nodes(box)[:count] if count > 1 else []
        if count > 1 and not members:  # one job of a cluster's: its platform reads every node
            raise UserError(f"run {run.id}'s {count} nodes are one job, and `rgt logs` shows "
                            "every node's lines: drop --node")
        picked = group.pick(members, node, whose=f"run {run.id}",
                            alone=f"run {run.id} ran on one machine")
        box = picked.box  # that machine, as a one-machine box: its log is its own
        run = replace(run, remote_dir=group.run_dir(picked, run.id))
    platform = platform_for(box.profile)
    transport = platform.connect(box)
    try:
        chunk = platform.logs(transport, box, run, lines=lines, cell=cell)
    finally:
        transport.close()
    if raw:
        return chunk.data if isinstance(chunk, LogChunk) else chunk.encode()
    text = log_text(cut_long_lines(chunk))
    if isinstance(chunk, LogChunk) and chunk.cut:
        text = (f"[rgt: only the log's last {MAX_LOG_BYTES // 1024 // 1024} MiB are shown; "
                "`rgt pull` brings all of it]\n") + text
    return text
