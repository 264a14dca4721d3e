"""`rgt watch`: the run's state, reconciled with its process, as one panel (or JSON).

A run that has ended (succeeded, failed, cancelled, stopped) cannot change on the box any
more: once `watch` has seen it ended there, it keeps that summary in the store, and a later
`watch` of the run shows it from there — saying when it was checked — instead of asking the box
again. That is what makes `watch` of a finished run instant (bench/startup.py): no platform,
no connection, none of the lifecycle imported. A run the store holds as anything else, or one
changed since, is asked afresh, as before.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer
from rich.panel import Panel

from rgt.cli import app
from rgt.cli.args import BoxArg, RunArg
from rgt.cli.console import console, duration, err_console, escape, print_json, safe_text
from rgt.errors import UserError
from rgt.lifecycle import progress
from rgt.lifecycle import watch as watch_mod
from rgt.store import LIVE, Box, Run, Store

# Ended for good: the runner wrote its last state and nothing on the box relaunches it. Not
# "vanished"/"preempted" (a restart hook may bring it back) nor "sync-failed" (a later sync).
ENDED = ("succeeded", "failed", "cancelled", "stopped")
ENDED_EVENT = watch_mod.ENDED_EVENT  # the summary `watch` saw of an ended run, kept
# `watch` of these names the run to resume from (rgt.lifecycle.resume.RESUMABLE)
RESUMABLE = ("failed", "cancelled", "vanished", "preempted", "sync-failed", "stopped")


@app.command()
def watch(
    name: BoxArg,
    run_id: RunArg = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream the log.")] = False,
    until_done: Annotated[bool, typer.Option(
        "--until-done", help="Wait for the end; the exit code says how it ended (below).")
                              ] = False,
    timeout: Annotated[float | None, typer.Option(help="Give up waiting after N s.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout "
                                                         "(README: JSON output).")] = False,
    give_up_after: Annotated[float, typer.Option(
        min=0, help="With --follow/--until-done: stop (exit 6) once the box has not answered "
                    "for N s; 0 waits forever.")] = watch_mod.UNREACHABLE_GIVE_UP_S,
) -> None:
    """The run's real state: reconciled with its process, heartbeat, disks, latest metrics.

    Exit codes with --until-done or --follow: 0 succeeded; 1 ended without succeeding (failed,
    sync-failed, vanished, preempted, stopped); 2 bad usage; 4 still running when --timeout
    passed; 5 no such box or run; 6 the box stopped answering; 7 cancelled.
    """
    if as_json and follow:
        raise UserError("--json prints one document at the end; use --until-done with it, "
                        "not --follow")
    store = Store()
    waiting = follow or until_done
    try:
        box = store.box(name)
        run = store.run(box.name, run_id)
    except UserError as err:
        if waiting:  # a script waiting on a run it mistyped must not read "failed"
            err.exit_code = watch_mod.EXIT_NOT_FOUND
        raise
    from rgt.lifecycle.autodown import restart_note  # `run --down`'s watcher, if killed

    if note := restart_note(store, box.name):
        err_console.print(f"[yellow]note:[/] {escape(note)}")
    summary = None if follow else ended_summary(store, box, run)
    if summary is None:
        summary = _ask_the_box(store, box, run, follow, until_done, timeout, give_up_after)
    if as_json:
        print_json("watch", box=box.name, run={"id": run.id, **summary})
    else:
        render_summary(store, box.name, run.id, summary)
    if waiting and summary["status"] != "succeeded":
        raise typer.Exit(watch_mod.EXIT_CANCELLED if summary["status"] == "cancelled"
                         else watch_mod.EXIT_FAILED)


def _ask_the_box(store: Store, box: Box, run: Run, follow: bool, until_done: bool,
                 timeout: float | None, give_up_after: float) -> dict[str, Any]:
    patience = {"give_up_s": give_up_after or None, "say": say_waiting}
    if follow:
        watch_mod.follow(store, box, run, write_through, timeout_s=timeout, **patience)
    elif until_done:
        watch_mod.wait_until_done(store, box, run, timeout_s=timeout, **patience)
    summary = watch_mod.refresh(store, box, run)
    newest = summary.get("last_checkpoint")  # the probe listed the home: no second look
    if summary["status"] in RESUMABLE and newest and run.spec.get("ckpt_home"):
        summary["resume_from"] = f"{run.spec['ckpt_home']}/{newest['name']}"
    if summary["status"] in ENDED and box.state == "up":
        store.record(ENDED_EVENT, summary, box=box.name, run=run.id)
    return summary


def ended_summary(store: Store, box: Box, run: Run) -> dict[str, Any] | None:
    """The summary `watch` kept when it saw this run ended on the box, if the store still
    holds the run as that (nothing changed it since); with `checked_at`, when that was."""
    if run.status not in ENDED or box.state != "up":
        return None
    kept = store.latest_event(ENDED_EVENT, box.name, run.id)
    if kept is None or kept["at"] < run.updated or not isinstance(kept["detail"], dict) \
            or kept["detail"].get("status") != run.status:
        return None
    return {**kept["detail"], "checked_at": kept["at"]}


def say_waiting(message: str) -> None:  # (it quotes the box's errors: sanitised)
    err_console.print(safe_text(message, style="yellow"), highlight=False)


def write_through(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


LABEL_WIDTH = len("heartbeat ")  # the watch panel's labels: one column, the widest's


def _row(label: str, text: str, style: str = "") -> str:
    """One line of the watch panel: LABEL padded to the labels' column, then TEXT (markup)."""
    shown = f"[{style}]{label}[/]" if style else label
    return shown + " " * (LABEL_WIDTH - len(label)) + text


def _as_shown(line: str) -> str:
    """A log line as a terminal leaves it: after its last carriage return that has text
    behind it (a progress bar's latest state), not every update shown as an escaped CR."""
    pieces = [piece for piece in line.split("\r") if piece.strip()]
    return pieces[-1] if pieces else ""


def render_summary(store: Store, box: str, run_id: str, s: dict) -> None:
    color = {"succeeded": "green", "running": "cyan", "starting": "cyan", "paused": "yellow",
             "stopped": "yellow",
             "resuming": "yellow"}.get(s["status"], "red")
    # state.json comes from the box: its fields are text, never markup.
    lines = [_row("status", f"[bold {color}]{escape(str(s['status']))}[/]"
                  + (f"  exit {escape(str(s['exit_code']))}" if s.get("exit_code") is not None
                     else "")
                  + (f"  signal {escape(str(s['signal']))}" if s.get("signal") else ""))]
    if s.get("checked_at") is not None:
        lines.append(_row("checked", f"{duration(time.time() - s['checked_at'])} ago, when it "
                                     "had ended (an ended run is not asked again)"))
    if s.get("duration") is not None:
        lines.append(_row("elapsed", duration(s["duration"])))
    if s.get("heartbeat_age") is not None and s["status"] == "running":
        lines.append(_row("heartbeat", f"{s['heartbeat_age']:.0f}s ago"))
    trained = progress.describe(progress.with_rate(s.get("training") or {},
                                                   watch_mod.step_samples(store, box, run_id)),
                                live=s["status"] in LIVE)
    if trained:
        lines.append(_row("metrics", escape(trained)))
    if s.get("last_checkpoint"):
        ckpt = s["last_checkpoint"]
        lines.append(_row("ckpt", escape(ckpt["name"])
                          + (f" (step {ckpt['step']})" if ckpt.get("step") is not None else "")
                          + f", written {duration(max(0.0, time.time() - ckpt['mtime']))} ago"))
    for node in s.get("nodes") or []:  # a multi-node run: each node's state and last line
        epoch = (node.get("training") or {}).get("epoch")
        lines.append(_row(f"node {node.get('rank')}", escape(
            f"{node.get('address') or node.get('pod')}  "
            f"{node.get('status') or node.get('phase')}"
            + (f" exit {node['exit_code']}" if node.get("exit_code") is not None else "")
            + (f"  epoch {epoch}" if epoch is not None else "")
            + f"  {_as_shown(str(node.get('last_line') or ''))[:90]}", lines=False)))
    for i, r in enumerate(s.get("restarts") or [], 1):
        why = f"exit {r.get('exit_code')}" + (f" {r['signal']}" if r.get("signal") else "")
        lines.append(_row("restart", f"{i}: after {escape(why)} ({escape(str(r.get('cause')))})"))
    if s.get("resume_from"):
        lines.append(_row("resume", f"[bold]rgt resume {box} {run_id}[/] starts from "
                                    f"{escape(s['resume_from'])}"))
    for cause in s.get("causes") or []:
        lines.append(_row("cause", escape(str(cause)), "red"))
    if s.get("advice"):
        lines.append(_row("advice", escape(str(s["advice"])), "yellow"))
    if s.get("sync", {}).get("error"):
        lines.append(_row("sync", escape(s["sync"]["error"]), "red"))
    for path, rate in watch_mod.disk_trend(store, box, run_id).items():
        lines.append(_row("disk", f"{escape(path)} {rate / 1e6:+.2f} MB/s"))
    for warning in watch_mod.warnings(s):
        lines.append(_row("warn", escape(warning), "yellow"))
    if s["status"] in ("failed", "vanished", "sync-failed", "preempted", "stopped") and \
            s.get("log_tail"):
        lines.append("[bold]log tail[/]\n" + escape("\n".join(
            _as_shown(line) for line in s["log_tail"][-10:])))
    console.print(Panel("\n".join(lines), title=f"{box} · {run_id}", expand=False))
