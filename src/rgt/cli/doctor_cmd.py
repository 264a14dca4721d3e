"""`rgt doctor`: the known gotchas a run ran into, each with the line that shows it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from rgt.cli import app
from rgt.cli.console import console, escape, print_json
from rgt.errors import UserError


@app.command("doctor")
def doctor(
    box: Annotated[str, typer.Argument(help="The box, as named at `rgt up`.")],
    run: Annotated[str | None, typer.Argument(help="Run id or prefix (default: newest).")] = None,
    lines: Annotated[int, typer.Option("--lines", "-n", help="How much of the log's tail to read.",
                                       min=1)] = 5000,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
    = False,
) -> None:
    """Read the run's log and the box's probe and list the gotchas that apply, with evidence."""
    from rgt.lifecycle.doctor import diagnose
    from rgt.store import Store

    if lines < 1:
        raise UserError("--lines must be at least 1")
    found = diagnose(Store(), box, run, lines=lines)
    if as_json:
        print_json("doctor", **found.as_json())
        return
    for note in found.notes:
        console.print(f"[yellow]•[/] {escape(note)}")
    source = "the box" if found.log_source == "box" else found.log_source
    probed = "probed the box" if found.probed else "could not probe the box"
    console.print(f"{escape(found.box)} · run {escape(found.run)} · {escape(found.profile)} · "
                  f"log from {escape(source)} · {probed}")
    if not found.findings:
        console.print("No known gotcha shows in the log or the probe. `rgt gotcha search "
                      "'<line>'` asks about one line.")
        return
    table = Table(title="Gotchas that apply", title_justify="left", show_lines=True)
    for column in ("id", "title", "evidence", "where"):
        table.add_column(column, overflow="fold")
    for f in found.findings:
        where = f.where + (f" (+{f.count - 1} more)" if f.count > 1 else "")
        table.add_row(f.id, escape(f.title), escape(f.evidence), escape(where))
    console.print(table)
    console.print("Symptom, cause and fix: [bold]rgt gotcha ID[/]")
