"""Runs as objects: `rgt runs` lists them with their chains, `rgt resume` starts the next
attempt of one that ended without succeeding."""

from __future__ import annotations

import contextlib
import time
from typing import Annotated

import typer
from rich.text import Text

from rgt.cli import app
from rgt.cli.console import console, duration, escape, print_json
from rgt.errors import UserError
from rgt.store import LIVE, Run, Store
from rgt.textsafe import terminal_text

# `rgt runs` of runs that ended asks no box: the lifecycle (platforms, specs, pydantic) is
# imported by the verbs below that use it, when they run (bench/startup.py)


def run_row(store: Store, run: Run, pulls: dict | None = None,
            next_attempts: dict[str, str] | None = None) -> dict:
    """What `rgt runs` shows of one run (also its --json record). PULLS and NEXT_ATTEMPTS:
    the store's `latest_verdicts("pull-verified")` and `next_attempts()`, read once for a
    whole listing; without them the store is asked for this run alone."""
    if pulls is None:
        evidence = store.latest_evidence("pull-verified", run.box, run.id)
        pulled = None if evidence is None else evidence.ok
    else:
        pulled = pulls.get((run.box, run.id))
    if next_attempts is None:
        later = store.next_attempt(run.id)
        resumed_by = later.id if later else None
    else:
        resumed_by = next_attempts.get(run.id)
    return {
        "id": run.id, "box": run.box, "job": run.job, "status": run.status,
        "exit_code": run.exit_code, "created": run.created, "age_s": time.time() - run.created,
        "attempt": run.spec.get("attempt") or 1, "resumes": run.spec.get("resumes"),
        "resumed_by": resumed_by,
        "pulled": None if pulled is None else ("verified" if pulled else "failed"),
        "ckpt_home": run.spec.get("ckpt_home"),
    }


@app.command("runs")
def runs_cmd(
    box: Annotated[str | None, typer.Argument(help="Only this box's runs.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
    every: Annotated[bool, typer.Option("--all", "-a", help=f"Every run, not only the live "
                                                           f"ones and the newest {SHOWN}.")
                     ] = False,
) -> None:
    """Every run: status (live runs asked afresh), attempt chain, age, whether it was pulled.

    A month of runs is thousands of lines: the table shows every live run and the newest
    others, up to 50 lines' worth, and says how many it left out (--all shows them; --json
    always has every run).
    """
    store = Store()
    boxes = [store.box(box)] if box else store.boxes()
    runs = []
    for b in boxes:
        for run in store.runs(b.name):
            if run.status in LIVE and b.state == "up":
                from rgt.lifecycle.watch import refresh

                with contextlib.suppress(UserError):  # unreachable: show the last seen
                    refresh(store, b, run)
            runs.append(run)
    # read after the refreshes (a live run's refresh may have changed them), once for all
    pulls, later = store.latest_verdicts("pull-verified"), store.next_attempts()
    rows = [run_row(store, run, pulls, later) for run in runs]
    if as_json:
        print_json("runs", runs=rows)
        return
    if not rows:
        console.print("No runs yet. Start one with [bold]rgt run BOX JOB.yaml[/] "
                      "(or try [bold]rgt demo[/]).")
        return
    shown = _newest(rows, SHOWN) if not every else rows
    _print_runs(shown)
    if len(shown) < len(rows):
        left = len(rows) - len(shown)
        console.print(Text(f"… {left:,} older run{'s' * (left != 1)} not shown: rgt runs "
                           f"--all{'' if box else ', or rgt runs BOX'}", style="dim"),
                      highlight=False)


SHOWN = 50  # runs in the table without --all (live ones are always shown, and count)


def _newest(rows: list[dict], count: int) -> list[dict]:
    """Every live run and the newest others, COUNT in all at least, in the listing's order."""
    by_age = sorted(range(len(rows)), key=lambda i: rows[i]["created"], reverse=True)
    keep = {i for i in range(len(rows)) if rows[i]["status"] in LIVE}
    keep.update(by_age[:max(0, count - len(keep))])
    return [row for i, row in enumerate(rows) if i in keep]


def _print_runs(rows: list[dict]) -> None:
    """One line of facts per run, readable at 80 columns: a run id is never cut (it is what the
    other verbs take); an id too long for the row gets a line of its own, and the attempts it
    continues and was continued by go on a line under it (JSON has them as `resumes` and
    `resumed_by`)."""
    header = ["RUN", "BOX", "JOB", "STATUS", "ATTEMPT", "AGE", "PULLED"]
    cells = []
    for row in rows:
        arrows = (" ←" if row["resumes"] else "") + (" →" if row["resumed_by"] else "")
        status = row["status"] + (f" ({row['exit_code']})" if row["exit_code"] else "")
        cells.append([terminal_text(c) for c in (  # a status is the box's word: sanitised
            row["id"], row["box"], row["job"], status, f"{row['attempt']}{arrows}",
            duration(row["age_s"]), row["pulled"] or "-")])
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    room = console.width - sum(widths[1:]) - 2 * len(widths[1:])
    widths[0] = max([3] + [len(c[0]) for c in cells if len(c[0]) <= room])
    table = Text()  # printed in one call: a line each would cost ~0.3 ms apiece in Rich
    _add_line(table, header, widths, style="bold")
    for row, line in zip(rows, cells, strict=True):
        if len(line[0]) > widths[0]:
            table.append(line[0] + "\n")
            line[0] = ""
        _add_line(table, line, widths)
        links = [f"{arrow} {row[key]}" for arrow, key in (("←", "resumes"), ("→", "resumed_by"))
                 if row[key]]
        if links and len("  " + "   ".join(links)) <= console.width:
            links = ["   ".join(links)]
        for link in links:
            table.append("  " + link + "\n", style="dim")
    table.rstrip()
    console.print(table, highlight=False)


def _add_line(table: Text, cells: list[str], widths: list[int], style: str = "") -> None:
    line = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
    table.append(line.rstrip(), style=style)
    table.append("\n")


@app.command()
def resume(
    name: Annotated[str, typer.Argument(help="The box the run was on.")],
    run_id: Annotated[str | None, typer.Argument(help="Run id, a unique start or end "
                                                      "of it, or @last/@-1; default: the "
                                                      "newest run.")] = None,
    on: Annotated[str | None, typer.Option(
        "--on", help="Resume on another box: the newest verified checkpoints travel there.")
                  ] = None,
) -> None:
    """Relaunch a failed, cancelled, preempted or vanished run from its job's checkpoints."""
    from rgt.lifecycle import resume as resume_mod

    run, notes = resume_mod.resume(Store(), name, run_id, on=on)
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(f"[green]✓[/] started attempt {run.spec.get('attempt')} [bold]{run.id}[/] "
                  f"on {escape(run.box)}, resuming {escape(run.spec.get('resumes') or '')}")
    console.print(f"Watch: [bold]rgt watch {run.box} --follow[/]")
    print(run.id)


@app.command()
def cancel(
    name: Annotated[str, typer.Argument(help="The box the run is on.")],
    run_id: Annotated[str | None, typer.Argument(help="Run id, a unique start or end "
                                                      "of it, or @last/@-1; default: the "
                                                      "newest run.")] = None,
    grace: Annotated[float | None, typer.Option(
        "--grace", min=0, help="Seconds between SIGTERM (the trainer checkpoints) and SIGKILL; "
                               "default: the profile's preemption grace, else 30.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    every: Annotated[bool, typer.Option(
        "--all", help="Every run live on the box now (one confirmation for them all).")
                     ] = False,
) -> None:
    """Stop a live run: SIGTERM so the trainer checkpoints, SIGKILL after the grace.

    The run reads `cancelled`; pull it like any other (its log, checkpoints, partial outputs),
    then `rgt down` works as usual.
    """
    from rgt.cli.confirm import typed_name
    from rgt.lifecycle import cancel as cancel_mod

    store = Store()
    box = store.box(name)
    if every:
        _cancel_all(store, box, run_id, grace, yes)
        return
    run = store.run(box.name, run_id)
    grace_s = cancel_mod.grace_for(box, run, grace)  # the one that will really apply
    if run.status not in LIVE:  # before asking: nothing to confirm
        cancel_mod.cancel(store, box, run, grace_s)
    if not yes and not typed_name(
            f"Cancel run {run.id} on {name}? Type the box name ({name}) to confirm", name,
            verb="cancel", unchanged="the run goes on",
            instead=f"`rgt cancel {name} {run.id} --yes`"):
        raise UserError("confirmation did not match; the run goes on", exit_code=1)
    console.print(f"stopping {escape(run.id)}: SIGTERM, SIGKILL after {grace_s:g} s ...")
    report = cancel_mod.cancel(store, box, run, grace_s)
    how = "; ".join(report.get("sent") or []) or "its processes were already gone"
    console.print(f"[green]✓[/] cancelled [bold]{escape(run.id)}[/] ({escape(how)})"
                  + (" — killed after the grace" if report.get("escalated") else ""))
    console.print(f"Next: [bold]rgt pull {escape(name)} {escape(run.id)}[/] (log, checkpoints, "
                  f"partial outputs), then [bold]rgt down {escape(name)}[/]")


def _cancel_all(store: Store, box, run_id: str | None, grace: float | None, yes: bool) -> None:
    """`cancel --all`: the runs live on the box now, confirmed once, stopped one by one (each
    with its own grace, as `cancel RUN` gives it)."""
    from rgt.cli.confirm import typed_name
    from rgt.lifecycle import cancel as cancel_mod
    from rgt.lifecycle.every_run import live_runs

    if run_id is not None:
        raise UserError(f"--all cancels every live run; drop the run id {run_id!r} or --all")
    runs = live_runs(store, box.name)
    if not runs:
        console.print(f"no live run on {escape(box.name)}: nothing to cancel")
        return
    graces = [cancel_mod.grace_for(box, run, grace) for run in runs]
    ids = ", ".join(run.id for run in runs)
    if not yes and not typed_name(
            f"Cancel {len(runs)} live run{'s' * (len(runs) != 1)} on {box.name} ({ids})? "
            f"Type the box name ({box.name}) to confirm", box.name, verb="cancel",
            unchanged="the runs go on", instead=f"`rgt cancel {box.name} --all --yes`"):
        raise UserError("confirmation did not match; the runs go on", exit_code=1)
    failed = 0
    for run, grace_s in zip(runs, graces, strict=True):
        console.print(f"stopping {escape(run.id)}: SIGTERM, SIGKILL after {grace_s:g} s ...")
        try:
            report = cancel_mod.cancel(store, box, run, grace_s)
        except UserError as err:  # this run's (paused, ended meanwhile): the others go on
            failed += 1
            console.print(f"[red]✗[/] {escape(run.id)}: {escape(str(err))}")
            continue
        how = "; ".join(report.get("sent") or []) or "its processes were already gone"
        console.print(f"[green]✓[/] cancelled [bold]{escape(run.id)}[/] ({escape(how)})"
                      + (" — killed after the grace" if report.get("escalated") else ""))
    console.print(f"Next: [bold]rgt pull {escape(box.name)} --all[/] (logs, checkpoints, partial "
                  f"outputs), then [bold]rgt down {escape(box.name)}[/]")
    if failed:
        raise typer.Exit(1)
