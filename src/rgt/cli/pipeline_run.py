"""`rgt run BOX PIPELINE.yaml` for a multi-document SkyPilot file: its stages submitted as
chained jobs (rgt.lifecycle.pipeline), each stage's run id printed, one a line, the last
stage's last; the stages run on once this command returns."""

from __future__ import annotations

from pathlib import Path

from rgt.cli.console import console, escape
from rgt.cli.transfer_bar import transfer_bar
from rgt.errors import UserError
from rgt.lifecycle import pipeline as pipeline_mod
from rgt.skypipeline import is_pipeline, load_pipeline
from rgt.store import Store


def pipeline_file(words: list[str], inline: bool) -> Path | None:
    """The pipeline file `rgt run` was given, or None for a one-task spec or a command."""
    if inline or len(words) != 1:
        return None
    path = Path(words[0])
    return path if path.is_file() and is_pipeline(path) else None


def run_pipeline(store: Store, name: str, path: Path, *, after: str | None, dry_run: bool,
                 fresh: bool, streams: int, skip_resource_check: bool, down: bool,
                 outputs: list[str], overrides=None) -> None:
    if outputs:
        raise UserError("--output is for `rgt run BOX -- CMD`; a pipeline's tasks name theirs "
                        "in their own file_mounts or buckets")
    if down:
        raise UserError(f"--down is not armed for a pipeline: a stage that fails leaves the "
                        f"later ones waiting; once the last stage ended and its results are "
                        f"pulled, `rgt down {name}`")
    pipeline = load_pipeline(path, overrides=overrides)
    if dry_run:
        print(pipeline_mod.dry_run(store, name, pipeline, path, after=after,
                                   skip_resource_check=skip_resource_check), end="")
        return
    with transfer_bar("push") as on_progress:
        started = pipeline_mod.launch_pipeline(store, name, pipeline, path, after=after,
                                               fresh=fresh, progress=on_progress,
                                               streams=streams,
                                               skip_resource_check=skip_resource_check)
    for index, (run, notes) in enumerate(started):
        for note in notes:
            console.print(f"[yellow]note:[/] {escape(note)}")
        waits = f", once {started[index - 1][0].id} succeeded" if index else ""
        console.print(f"[green]✓[/] submitted stage {index + 1} of {len(started)} "
                      f"({escape(run.job)}) as [bold]{run.id}[/] on {name}"
                      f" ({escape(str(run.spec['detach']))}){waits}")
    last = started[-1][0].id
    console.print(f"Watch: [bold]rgt watch {name} {last} --follow[/] (the last stage)")
    for run, _ in started:
        print(run.id)
