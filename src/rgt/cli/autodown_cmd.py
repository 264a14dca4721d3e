"""`rgt autostop`: take a box down once it has had no live run for N minutes (Iron Law kept).

`rgt run BOX JOB --down` arms the same watcher for one run (rgt.cli.lifecycle_cmd); both are
rgt.lifecycle.autodown's.
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from rgt.cli import app
from rgt.cli.args import BoxArg
from rgt.cli.console import console, escape
from rgt.errors import UserError
from rgt.lifecycle import autodown
from rgt.store import Store


@app.command("autostop")
def autostop(
    name: BoxArg,
    minutes: Annotated[float | None, typer.Argument(
        help="Minutes with no live run before the box goes down; left out: show what is "
             "armed (and restart its watcher if it is not running).")] = None,
    off: Annotated[bool, typer.Option("--off", help="Disarm: no autostop, no --down for this "
                                                    "box; its watcher exits.")] = False,
) -> None:
    """Take a box down once it has had no live run for N minutes (Iron Law kept).

    A watcher on this machine, detached from the terminal, asks the box every few seconds;
    once no run has been live for N minutes it runs `rgt down`'s own checks and teardown.
    It takes nothing down while a run is not pulled and verified: it waits, and `rgt ls`
    says why. If this machine sleeps or the watcher is killed, `rgt ls` says so and `rgt
    autostop BOX` (or `rgt watch BOX`) starts it again.
    """
    store = Store()
    box = store.box(name)
    if off:
        if minutes is not None:
            raise UserError(f"--off disarms; drop the minutes ({minutes:g}) or --off")
        said = "disarmed: nothing will take it down by itself" if autodown.disarm(
            store, box.name) else "nothing was armed"
        console.print(f"[green]✓[/] {escape(name)}: {said}")
        return
    if minutes is None:
        autodown.start(store, box.name)
        line = autodown.shown(store, store.box(box.name))
        if line is None:
            console.print(f"{escape(name)}: no autostop and no --down armed")
            return
        console.print(f"{escape(name)}: {escape(line)}")
        console.print(f"[dim]log: {escape(str(autodown.log_path(box.name)))}[/]")
        return
    if not 0 < minutes < math.inf:
        raise UserError(f"autostop takes a number of minutes above 0, not {minutes:g}")
    pid = autodown.arm(store, box, idle_minutes=minutes, by=f"rgt autostop {name} {minutes:g}")
    console.print(f"[green]✓[/] {escape(name)} goes down after {minutes:g} min with no live "
                  f"run, once every run is pulled and verified; watcher pid {pid}, log "
                  f"{escape(str(autodown.log_path(box.name)))}")
