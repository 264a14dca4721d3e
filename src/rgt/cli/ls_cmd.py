"""`rgt ls`: every box, what it has cost and what still costs — readable in an 80-column terminal.

Each box is one line of facts (name, profile, state, up-time, money, live runs) and at most two
lines of notes under it, each cut to the terminal's width: the notes that cost money first
(idle with no run, still billing after teardown), then what a live run waits for (a Colab
notebook not opened yet, a queued Kaggle kernel), what its platform last measured as at risk
(Colab's Drive space, Kaggle's GPU quota), then the platform's first danger clock (`rgt
profile show P` has them whole, `--json` has every note uncut). Names are never cut.
Imports only the store and the money module: `rgt ls` is what people type most.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.text import Text

from rgt.boxfacts import facts
from rgt.cli import app
from rgt.cli.console import console, duration, escape, print_json
from rgt.store import Store

NOTE_LINES = 2  # under the box's own line: three lines per box at most
IDLE_AFTER_MIN = 30  # GEN1: the forgotten box (money.IDLE_WARNING_S, not imported for --help)


@app.command("ls")
def ls_cmd(
    all_boxes: Annotated[bool, typer.Option("--all", "-a", help="Include boxes that are down.")
                         ] = False,
    idle_after: Annotated[float, typer.Option(help="Warn when a box has been idle this many "
                                                   "minutes (gotcha GEN1: a forgotten box "
                                                   "bills 24/7).")] = IDLE_AFTER_MIN,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout "
                                                         "(README: JSON output).")] = False,
) -> None:
    """Every box: state, up-time, money spent, live runs, and the clocks that are running.

    On Slurm the meter is walltime, so `spent` shows the walltime the runs used (as of the
    last watch) instead of dollars. Boxes that are down are left out unless --all, or unless
    something of theirs still bills.
    """
    store = Store()
    lines = []
    if store.boxes():  # money (and the profiles' briefs) only when there is a box to price
        from rgt.lifecycle import money

        lines = money.box_lines(store)
    shown = [ln for ln in lines if all_boxes or ln.box.state != "down" or ln.still_billing]
    auto = _autodown_lines(store, shown)
    if as_json:
        print_json("ls", boxes=[{
            "name": ln.box.name, "profile": ln.box.profile, "state": ln.box.state,
            "nodes": facts(ln.box).machines,
            "stopped_by": facts(ln.box).stopped_by if ln.box.state == "down" else None,
            "waiting_for_you": (facts(ln.box).awaiting_console or {}).get("how")
            if ln.box.state == "up" else None,
            "dismissed_billing": facts(ln.box).dismissed_billing,
            "instance": facts(ln.box).instance_id, "uptime_s": ln.uptime_s,
            "spent_usd": ln.spent, "walltime_s": ln.walltime_s, "live_runs": ln.live_runs,
            "idle_s": ln.idle_s, "clocks": ln.clocks, "still_billing": ln.still_billing,
            "autodown": auto.get(ln.box.name),
            "at_risk": at_risk(ln.box) if ln.box.state == "up" else [],
            "waiting": [{"run": run, "what": what, "waited_s": max(0.0, time.time() - since)}
                        for run, what, since in ln.waiting]}
            for ln in shown])
        return
    hidden = len(lines) - len(shown)
    if not shown:
        console.print("No boxes yet. Try [bold]rgt demo[/], or register one with [bold]rgt up[/]."
                      if not lines else f"No box is up ({hidden} down: [bold]rgt ls --all[/] "
                                        "lists them).")
        return
    _print_table(shown, idle_after, auto)
    if hidden:
        console.print(f"[dim]{hidden} down, not shown: rgt ls --all[/]")


def _autodown_lines(store: Store, shown: list) -> dict[str, str]:
    """What `run --down` / `autostop` armed, did, or why its watcher is not running
    (rgt.lifecycle.autodown: events in the store, and a lock the watcher holds)."""
    if not shown:
        return {}
    from rgt.lifecycle import autodown

    return {ln.box.name: line for ln in shown
            if (line := autodown.shown(store, ln.box)) is not None}


def _print_table(shown: list, idle_after_min: float, auto: dict[str, str]) -> None:
    header = ["BOX", "PROFILE", "STATE", "UP", "SPENT", "RUNS"]
    rows = []
    for ln in shown:
        spent = f"${ln.spent:.2f}" if ln.spent is not None else "-"
        if ln.walltime_s is not None:
            spent = f"{duration(ln.walltime_s)} walltime"
        machines = facts(ln.box).machines  # a group of machines: "generic-ssh ×2"
        profile = ln.box.profile + (f" ×{machines}" if machines > 1 else "")
        rows.append([ln.box.name, profile, state_word(ln.box), duration(ln.uptime_s),
                     spent, str(ln.live_runs)])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    # A box name too long for the row to fit gets a line of its own (and one note line less).
    limit = console.width - sum(widths[1:]) - 2 * len(widths[1:])
    widths[0] = max([3] + [len(row[0]) for row in rows if len(row[0]) <= limit])
    instances = [str(facts(ln.box).instance_id or "-") for ln in shown]
    with_instance = any(i != "-" for i in instances)
    _print_row(header, widths, "INSTANCE" if with_instance else None, style="bold")
    for ln, row, instance in zip(shown, rows, instances, strict=True):
        budget = NOTE_LINES
        if len(row[0]) > widths[0]:
            console.print(Text(row[0]), highlight=False)
            row[0], budget = "", budget - 1
        _print_row(row, widths, instance if with_instance else None)
        for note in _notes(ln, idle_after_min, auto.get(ln.box.name))[:budget]:
            console.print(Text.from_markup("  " + note), no_wrap=True, overflow="ellipsis",
                          crop=True, highlight=False)


def _print_row(cells: list[str], widths: list[int], instance: str | None,
               style: str = "") -> None:
    line = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
    room = console.width - len(line) - 2
    if instance is not None and room >= 3:  # an id, not a name: the one field cut to fit
        line += "  " + (instance if len(instance) <= room else instance[:room - 1] + "…")
    console.print(Text(line.rstrip(), style=style), highlight=False)


def state_word(box) -> str:
    """up; up but waiting for the user's console step (`down --yes` where rgt cannot stop the
    meter); down, stopped by rgt itself or by the user's typed word."""
    if box.state == "up":
        return "up, waiting for you" if facts(box).awaiting_console else "up"
    by = facts(box).stopped_by
    return f"down ({'by rgt' if by == 'rgt' else 'by your word'})" if by else box.state


def _notes(ln, idle_after_min: float, auto: str | None = None) -> list[str]:
    """What the user should know about the box, the ones that cost money first (markup)."""
    notes = []
    if auto:  # who stopped it, or what will, or that the watcher that would is not running
        notes.append(f"[{'bold red' if 'NOT running' in auto else 'cyan'}]{escape(auto)}[/]")
    waiting = facts(ln.box).awaiting_console if ln.box.state == "up" else None
    if waiting:
        how = escape(str(waiting.get("how")))
        notes.append(f"[bold red]still billing: stop it in the console ({how}), then "
                     f"`rgt down {ln.box.name}` and type its name[/]")
    if ln.idle_s is not None and ln.idle_s > idle_after_min * 60:
        notes.append(f"[bold red]idle {duration(ln.idle_s)} with no live run: a forgotten box "
                     "bills 24/7 (GEN1)[/]")
    notes += [f"[yellow]still billing: {escape(b)}[/]" for b in ln.still_billing]
    notes += [f"[yellow]waiting {duration(max(0.0, time.time() - since))}:[/] {escape(what)}"
              for _run, what, since in ln.waiting]
    if ln.box.state == "up":
        notes += [f"[yellow]at risk:[/] {escape(r['what'])} ({duration(r['age_s'])} ago)"
                  for r in at_risk(ln.box)]
    notes += [f"[yellow]⚠[/] {escape(c)}" for c in ln.clocks]
    return notes


def at_risk(box) -> list[dict]:
    """What the box's platform last measured as at risk (Drive space, a GPU quota), with its
    age: `rgt up` and `rgt watch` measure it, ls only reads the store (it asks no platform)."""
    return [{"what": str(r.get("what")), "age_s": max(0.0, time.time() - float(r.get("at") or 0))}
            for r in facts(box).at_risk if r.get("what")]


@app.command("dismiss")
def dismiss_cmd(
    name: Annotated[str, typer.Argument(help="The box, down, whose still-billing lines you "
                                             "dealt with.")],
) -> None:
    """Say you dealt with what still bills for a box that is down: `rgt ls` stops showing it.

    Storage a platform keeps charging for after its meter stopped (a kept disk, a file system)
    is shown under the box in `rgt ls` until you say here that you removed it or chose to keep
    paying; the lines and the time are recorded, and `rgt ls --all --json` keeps them.
    """
    from rgt.errors import UserError

    store = Store()
    box = store.box(name)
    lines = list(facts(box).still_billing or [])
    if box.state != "down":
        raise UserError(f"{name} is up: its meter runs; `rgt down {name}` first (dismiss is for "
                        "what bills after a box is down)")
    if not lines:
        console.print(f"nothing still bills for {name} as far as rgt knows")
        return
    store.update_box(name, extra={**box.extra, "still_billing": [],
                                  "dismissed_billing": {"at": time.time(), "lines": lines}})
    store.record("billing-dismissed", {"lines": lines}, box=name)
    for line in lines:
        console.print(f"[green]✓[/] dismissed: {escape(line)}")
