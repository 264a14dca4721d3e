"""`rgt verify`: the pull of a run checked again here, against the evidence it left."""

from __future__ import annotations

from typing import Annotated

import typer

from rgt.cli import app
from rgt.cli.console import console, err_console, escape, print_checkpoints, print_json


@app.command("verify")
def verify(
    box: Annotated[str, typer.Argument(help="The box, as named at `rgt up`.")],
    run: Annotated[str | None, typer.Argument(help="Run id or prefix (default: newest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
    = False,
) -> None:
    """Re-hash and re-load a run's pulled files against the box's manifests its pull kept.

    No box needed: it reads the pull's evidence in RGT_HOME and the files where they were
    pulled, and checks every file the pull verified (hash and size, checkpoints by format).
    Exit 1 when anything changed since; `rgt pull` fetches it again.
    """
    from rgt.lifecycle.reverify import reverify
    from rgt.store import Store

    report = reverify(Store(), box, run)
    if as_json:
        print_json("verify", box=report["box"], verify=report)
        raise typer.Exit(0 if report["ok"] else 1)
    print_checkpoints(report)
    for warning in report.get("warnings") or []:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}")
    if report["ok"]:
        console.print(f"[green]✓ verified again[/] {report['counts']['files']} files in "
                      f"{escape(report['dest'])} (hashes match the box's manifests kept with "
                      f"the pull; checkpoints checked by format)")
        return
    for problem in report["problems"]:
        err_console.print(f"[red]✗[/] {escape(problem)}")
    err_console.print(f"`rgt pull {escape(report['box'])} {escape(report['run'])}` fetches "
                      "the run again while the box is up")
    raise typer.Exit(1)
