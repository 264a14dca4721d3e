"""`rgt ckpt`: list and verify checkpoints of any format rgt knows (the checks `rgt pull` uses).

rgt.ckpt files, torch pickles (Hugging Face's optimizer.pt / rng_state.pth, plain torch.save),
Lightning .ckpt, safetensors, HF `checkpoint-N`, accelerate `save_state` and
torch.distributed.checkpoint directories: see `rgt.ckpt.formats`. Each verdict says what was
checked — hash, parse, load. `ls` orders them as `rgt watch` and `rgt pull` do
(`rgt.ckpt.newest`: the last written is the newest) and names the newest intact one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.table import Table

from rgt.ckpt import CheckpointNotFoundError, formats, newest
from rgt.cli import app
from rgt.cli.console import console, duration, escape, print_json

ckpt_app = typer.Typer(
    name="ckpt",
    help="Inspect checkpoints (rgt.ckpt, torch, Lightning, safetensors, HF checkpoint-N, "
         "accelerate save_state, torch.distributed.checkpoint): list them, verify one.",
    no_args_is_help=True,
)
app.add_typer(ckpt_app, name="ckpt")


@ckpt_app.command("ls")
def ls(
    directory: Path = typer.Argument(..., help="Checkpoint directory."),
    quick: bool = typer.Option(
        False, "--quick", help="Parse only: no sha256 of rgt.ckpt files, nothing loaded."
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout "
                                                       "(README: JSON output)."),
) -> None:
    """List checkpoints, oldest to newest written: step, metric, bytes, age, verified (and
    how), kind; then the newest intact one (what a resume or a pull takes)."""
    if not directory.exists():
        raise CheckpointNotFoundError(f"no such checkpoint directory: {directory}")
    if not directory.is_dir():
        raise CheckpointNotFoundError(f"{directory} is not a directory (try `rgt ckpt verify`)")
    found = formats.find(directory)
    if not found and not as_json:
        console.print(f"no checkpoints in {escape(str(directory))}")
        return
    names = {p: str(p.relative_to(directory)) if p != directory else p.name for p in found}
    # oldest first, the newest last, by the one definition watch, pull and resume use
    verdicts = list(reversed(newest.newest_first(
        (formats.check(p, deep=not quick) for p in found),
        key=lambda v: newest.order_key(newest.written_here(v.path), v.step, names[v.path]))))
    intact = next((v for v in reversed(verdicts) if v.ok), None)
    if as_json:
        print_json("ckpt ls", directory=str(directory),
                   checkpoints=[_record(v, names[v.path], quick) for v in verdicts],
                   newest=names[verdicts[-1].path] if verdicts else None,
                   newest_intact=names[intact.path] if intact else None)
        return
    # 80 columns, names whole: the file never wrapped or cut with "…" (a cut checkpoint name
    # is no use), the verdict wrapped at its spaces instead.
    table = Table(title=escape(str(directory)), title_justify="left")
    for col in ("step", "metric", "bytes", "age"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("verified", min_width=10, overflow="fold")
    table.add_column("kind", no_wrap=True)
    table.add_column("file", no_wrap=True, min_width=min(max(map(len, names.values())), 40))
    for v in verdicts:
        if not v.ok:
            ver = f"[red]no[/]: {escape(v.note)}"
        elif quick and v.kind == "rgt.ckpt":
            ver = "size ok"
        else:
            ver = f"[green]yes[/] ({v.how})" + ("; not unpickled" if "not unpickled" in v.note
                                              else "")
        table.add_row(
            "?" if v.step is None else str(v.step),
            "-" if v.metric is None else f"{v.metric:.6g}",
            "?" if v.bytes is None else f"{v.bytes:,}",
            duration(_age(v)),
            ver,
            v.kind,
            escape(names[v.path]),
        )
    console.print(table)
    last = verdicts[-1]
    if intact is None:
        console.print("[red]no intact checkpoint[/]: every one listed is damaged")
    elif intact is last:
        console.print(f"newest: {escape(names[last.path])} (the last written, intact)")
    else:
        console.print(f"newest: {escape(names[last.path])} (the last written) is [red]"
                      f"damaged[/]; the newest intact is {escape(names[intact.path])}")


def _record(v: formats.Verdict, name: str, quick: bool = False) -> dict:
    """A verdict as --json gives it: what `ckpt ls` and `ckpt verify` print, uncut."""
    return {"path": name, "ok": v.ok, "kind": v.kind, "step": v.step, "bytes": v.bytes,
            "metric": v.metric, "age_s": _age(v), "checked": list(v.checked),
            "verified": v.ok and not (quick and v.kind == "rgt.ckpt"), "loaded": v.loaded,
            "note": v.note, "parts": [_record(p, p.path.name) for p in v.parts]}


def _age(v: formats.Verdict) -> float | None:
    if v.created is not None:
        return max(0.0, time.time() - v.created)
    try:
        return max(0.0, time.time() - os.stat(v.path).st_mtime)
    except OSError:
        return None


@ckpt_app.command("verify")
def verify(
    path: Path = typer.Argument(..., help="A checkpoint file, its rgt sidecar, or a checkpoint "
                                          "directory (HF checkpoint-N, DCP)."),
    no_load: bool = typer.Option(False, "--no-load", help="Check hashes and structure only."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout "
                                                       "(README: JSON output); exit codes "
                                                       "the same."),
) -> None:
    """Is the checkpoint whole, does it load, what step — and what was checked to say so.

    Exits 0 when it is whole (and loads, where loading is safe), 1 when it is not.
    """
    path = path.expanduser()
    if not path.exists():
        raise CheckpointNotFoundError(f"no such checkpoint: {path}")
    if path.is_dir() and formats.kind_of(path) is None:
        raise CheckpointNotFoundError(
            f"{path} is a directory of no known checkpoint layout; list what it holds with "
            f"`rgt ckpt ls {path}`")
    if not path.is_dir() and formats.kind_of(path) is None:  # neither OK nor DAMAGED: unknown
        raise CheckpointNotFoundError(
            f"{path} is not a checkpoint of a format rgt checks (rgt.ckpt ckpt-N.pt, torch "
            ".pt/.pth/.bin, Lightning .ckpt, .safetensors, an HF checkpoint-N or DCP "
            "directory); nothing was checked")
    v = formats.check(path, load=not no_load)
    if as_json:
        print_json("ckpt verify", checkpoint=_record(v, str(v.path)))
        if not v.ok:
            raise typer.Exit(1)
        return
    loads = {True: "yes", False: "no", None: "not tried"}[v.loaded]
    if v.parts and v.loaded is None:
        loads = "yes" if any(p.loaded for p in v.parts) else loads
    console.print(
        f"{'[green]OK[/]' if v.ok else '[red]DAMAGED[/]'} {escape(str(v.path))}  kind={v.kind}  "
        f"step={v.step}  bytes={v.bytes if v.bytes is not None else '?'}  loads={loads}  "
        f"checked={','.join(v.checked) or 'nothing'}"
        + (f"  — {escape(v.note)}" if v.ok else f"  reason: {escape(v.note)}"),
        highlight=False,
        soft_wrap=True,
    )
    for part in v.parts:
        mark = "[green]ok[/]" if part.ok else "[red]BAD[/]"
        console.print(f"  {mark} {escape(part.path.name)}: {escape(part.line())}",
                      highlight=False, soft_wrap=True)
    if not v.ok:
        raise typer.Exit(1)
