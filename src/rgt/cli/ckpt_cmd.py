"""`rgt ckpt`: list and verify checkpoints (the same checks `rgt pull`/`verify` reuse)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from rgt.ckpt import CheckpointNotFoundError, list_checkpoints, verify_file
from rgt.cli.console import console, duration

ckpt_app = typer.Typer(
    name="ckpt",
    help="Inspect checkpoints written by rgt.ckpt: list them, verify one.",
    no_args_is_help=True,
)


@ckpt_app.command("ls")
def ls(
    directory: Path = typer.Argument(..., help="Checkpoint directory."),
    quick: bool = typer.Option(
        False, "--quick", help="Check sidecars and sizes only; skip the sha256 of every file."
    ),
) -> None:
    """List checkpoints: step, metric, bytes, age, verified."""
    if not directory.exists():
        raise CheckpointNotFoundError(f"no such checkpoint directory: {directory}")
    if not directory.is_dir():
        raise CheckpointNotFoundError(f"{directory} is not a directory (try `rgt ckpt verify`)")
    infos = list_checkpoints(directory, verify=not quick)
    if not infos:
        console.print(f"no checkpoints in {directory}")
        return
    table = Table(title=str(directory), title_justify="left")
    for col, just in (("step", "right"), ("metric", "right"), ("bytes", "right"),
                      ("age", "right"), ("verified", "left"), ("file", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for i in infos:
        if i.problem is not None:
            ver = f"[red]no[/]: {i.problem}"
        elif i.verified is None:
            ver = "size ok"
        else:
            ver = "[green]yes[/]" if i.verified else "[red]no[/]"
        table.add_row(
            str(i.step),
            "-" if i.metric is None else f"{i.metric:.6g}",
            "?" if i.bytes is None else f"{i.bytes:,}",
            duration(i.age_s),
            ver,
            i.path.name,
        )
    console.print(table)


@ckpt_app.command("verify")
def verify(
    path: Path = typer.Argument(..., help="A checkpoint file (ckpt-*.pt) or its sidecar."),
    no_load: bool = typer.Option(False, "--no-load", help="Check size and sha256 only."),
) -> None:
    """Is the checkpoint whole (size + sha256 vs its sidecar), does it load, what step.

    Exits 0 when it is whole and loads, 1 when it is not.
    """
    r = verify_file(path, load=not no_load)
    loads = {True: "yes", False: "no", None: "not tried"}[r.loads]
    console.print(
        f"{'[green]OK[/]' if r.ok else '[red]DAMAGED[/]'} {r.path}  step={r.step}  "
        f"bytes={r.bytes if r.bytes is not None else '?'}  loads={loads}"
        + ("" if r.ok else f"  reason: {r.reason}"),
        highlight=False,
        soft_wrap=True,
    )
    if not r.ok:
        raise typer.Exit(1)
