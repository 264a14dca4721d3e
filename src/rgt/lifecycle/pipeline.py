"""`rgt run BOX PIPELINE.yaml`: a SkyPilot pipeline's stages (rgt.skypipeline) as chained
jobs, each submitted to the box's scheduler to start once the one before succeeded — what
`rgt run --after RUN` does for one stage, done for every stage in order.

Everything that can be refused is refused before the first stage is submitted: a box whose
platform cannot chain runs (no scheduler, or one whose jobs cannot wait for another), a stage
the box refuses (a spec section for another platform, a TPU), a secret not set here. A stage
the scheduler refuses after earlier ones were queued is said with the ids of those queued,
which stay queued (cancel them by id). A pipeline of one task needs no chaining and runs on
any box.
"""

from __future__ import annotations

import time
from pathlib import Path

from rgt.errors import UserError
from rgt.lifecycle import launch as launch_mod
from rgt.lifecycle import render as render_mod
from rgt.platforms import platform_for
from rgt.platforms.base import Ability
from rgt.skypipeline import Pipeline, task_ids_prefix
from rgt.spec import JobSpec
from rgt.store import Run, Store


def refuse_unchainable(store: Store, box_name: str, pipeline: Pipeline, path: Path,
                       after: str | None) -> None:
    """What `rgt run` refuses of a pipeline before anything is submitted."""
    box = store.box(box_name)
    platform = platform_for(box.profile)
    several = len(pipeline.stages) > 1
    for stage in pipeline.stages:
        launch_mod.refuse_unlaunchable(box, platform, stage, None)
        launch_mod.secret_values(stage)  # every stage's secrets set here, before stage 1
    if not (several or after):
        return
    what = (f"{path} is a SkyPilot pipeline of {len(pipeline.stages)} tasks, each started "
            "once the one before succeeded" if several else "--after")
    if Ability.DEPENDENCY_ON not in platform.abilities():
        raise UserError(f"{what}: on a {box.profile} box nothing chains them "
                        f"({platform.abilities().why_not(Ability.DEPENDENCY_ON)}); run it on "
                        "a box whose scheduler chains jobs (a slurm box), or each task as a "
                        "file of its own once the one before succeeded")
    # A platform may have the ability yet refuse a chain (its jobs cannot wait for one
    # another): asked with a stand-in earlier stage, so that it says so before stage 1 starts.
    stand_in = Run(id="(the stage before)", box=box.name, job=pipeline.stages[0].name,
                   remote_dir="", spec={"platform_run": {"job_id": "1"}}, status="pending",
                   exit_code=None, created=time.time(), updated=time.time())
    try:
        platform.dependency_on(stand_in)
    except UserError as err:
        raise UserError(f"{what}: {box.profile} cannot chain them ({err}); run it on a box "
                        "whose scheduler chains jobs (a slurm box)") from None


def stage_with_ids(stage: JobSpec, earlier: list[str]) -> JobSpec:
    """The stage with SKYPILOT_TASK_IDS set in its setup and run (rgt.skypipeline)."""
    prefix = task_ids_prefix(earlier)
    return stage.model_copy(update={"run": prefix + stage.run,
                                    "setup": prefix + stage.setup if stage.setup else ""})


def launch_pipeline(store: Store, box_name: str, pipeline: Pipeline, path: Path, *,
                    after: str | None = None, fresh: bool = False, progress=None,
                    streams: int = 0, skip_resource_check: bool = False
                    ) -> list[tuple[Run, list[str]]]:
    """Submit every stage, each after the one before (the first after `after`, if given);
    returns each stage's run and notes, in order."""
    refuse_unchainable(store, box_name, pipeline, path, after)
    started: list[tuple[Run, list[str]]] = []
    for index, stage in enumerate(pipeline.stages):
        earlier = [run.id for run, _ in started]
        try:
            run, notes = launch_mod.launch(
                store, box_name, stage_with_ids(stage, earlier),
                after=earlier[-1] if earlier else after, fresh=fresh, progress=progress,
                streams=streams, skip_resource_check=skip_resource_check)
        except UserError as err:
            if not started:
                raise
            raise UserError(f"stage {index + 1} ({stage.name}) of pipeline {pipeline.name} was "
                            f"not started: {err}; the stages before it stay queued "
                            f"({', '.join(earlier)}): `rgt cancel {box_name} RUN` each to "
                            "stop them") from None
        started.append((run, notes))
    return started


def dry_run(store: Store, box_name: str, pipeline: Pipeline, path: Path, *,
            after: str | None = None, skip_resource_check: bool = False) -> str:
    """`rgt run BOX PIPELINE.yaml --dry-run`: what each stage would be given, in order."""
    refuse_unchainable(store, box_name, pipeline, path, after)
    parts = []
    for index, stage in enumerate(pipeline.stages):
        waits = (f"; submitted to start once stage {index} succeeded (the scheduler's "
                 "dependency on its job)" if index else "")
        parts.append(f"# stage {index + 1} of {len(pipeline.stages)} of pipeline "
                     f"{pipeline.name}: {stage.name}{waits}\n")
        parts.append(render_mod.dry_run(store, box_name, stage_with_ids(stage, []),
                                        after=None if index else after,
                                        skip_resource_check=skip_resource_check))
    return "".join(parts)
