"""`rgt doctor`: the known gotchas a run ran into, each with the line that shows it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from rgt.cli import app
from rgt.cli.console import console, escape, print_json
from rgt.errors import UserError

_MAX_EVIDENCE = 300  # characters of a log line shown as evidence


@app.command("doctor")
def doctor(
    box: Annotated[str | None, typer.Argument(help="The box, as named at `rgt up`.")] = None,
    run: Annotated[str | None, typer.Argument(help="Run id or prefix (default: newest).")] = None,
    lines: Annotated[int, typer.Option("--lines", "-n", help="How much of the log's tail to read.",
                                       min=1)] = 5000,
    log: Annotated[str | None, typer.Option(
        "--file", help="Read this log (or a saved paste; - for stdin) instead of a run's: no box "
        "needed.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
    = False,
) -> None:
    """Read the run's log and the box's probe and list the gotchas that apply, with evidence."""
    from rgt.lifecycle.doctor import diagnose
    from rgt.store import Store

    if lines < 1:
        raise UserError("--lines must be at least 1")
    if log is not None:
        if box is not None:
            raise UserError("give a box or --file, not both: rgt doctor --file train.log")
        _doctor_file(log, lines, as_json)
        return
    if box is None:
        raise UserError("name the box (rgt doctor BOX [RUN]), or read a log: rgt doctor --file "
                        "train.log")
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


def _doctor_file(path: str, lines: int, as_json: bool) -> None:
    """The gotchas a log file (or a saved paste) shows, by detection rule only (a log is long: a
    guess per line would be noise), each with its first decisive line."""
    from rgt.profiles.block import search_lines
    from rgt.profiles.search import Searcher

    try:
        text = (sys.stdin.read() if path == "-"
                else Path(path).expanduser().read_text(encoding="utf-8", errors="replace"))
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}; give a readable log "
                        "file") from None
    every = text.splitlines()
    first = max(len(every) - lines, 0) + 1  # the file's number of the first line read
    hits = search_lines(Searcher(), every[-lines:], guesses=False)
    found = [{"id": h.gotcha.id, "platform": h.platform, "title": h.gotcha.title,
              "evidence": h.line[:_MAX_EVIDENCE], "where": f"line {h.line_no + first - 1}"}
             for h in hits]
    if as_json:
        print_json("doctor", file=path, findings=found)
        return
    if not found:
        console.print(f"No known gotcha shows in {escape(path)}. `rgt gotcha search '<line>'` "
                      "asks about one line.")
        return
    table = Table(title=f"Gotchas in {escape(path)}", title_justify="left", show_lines=True)
    for column in ("id", "title", "evidence", "where"):
        table.add_column(column, overflow="fold")
    for f in found:
        table.add_row(f["id"], escape(f["title"]), escape(f["evidence"]), f["where"])
    console.print(table)
    console.print("Symptom, cause and fix: [bold]rgt gotcha ID[/]")
