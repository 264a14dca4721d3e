"""SkyPilot pipelines (several tasks in one YAML file, run one after the other), read as rgt
job specs, one per stage, with the meaning SkyPilot gives them (sky/utils/dag_utils.py
`_load_chain_dag`, `maybe_infer_and_fill_dag_and_task_names`; sky/jobs/controller.py):

- An optional header, a first document with only `name` (and `execution: serial`), names
  the pipeline; every other document is a task, read as rgt.skytask reads one file.
- A task without a name is `<pipeline>-<index>` (from 0); a pipeline of one task takes the
  pipeline's name.
- Each stage starts once the one before it succeeded, on resources of its own (SkyPilot
  launches each on a cluster of its own): rgt submits each stage as a job of the box's
  scheduler that waits for the one before (rgt.lifecycle.pipeline, `rgt run --after`'s
  dependency). A box with no scheduler to chain runs refuses a pipeline of several stages
  by name; one of a single task runs anywhere.
- `SKYPILOT_TASK_IDS` (every stage's task id, one a line, which a later stage reads to find
  what an earlier one wrote) lists this stage's and the earlier stages' run ids: a later
  stage's id does not exist before it is submitted.

A header with `execution: parallel` is a job group (tasks that run at the same time), which
rgt does not run: refused as what it is.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rgt import skytask, yaml12
from rgt.errors import UserError

HEADER_KEYS = ({"name"}, {"name", "execution"})


@dataclass
class Pipeline:
    """A pipeline's name and its stages, as rgt job specs, in the order they run."""

    name: str
    stages: list[Any]  # rgt.spec.JobSpec (rgt.spec imports this module's callers)
    notes: list[str] = field(default_factory=list)


def documents(path: Path) -> list[Any]:
    """The file's YAML documents (empty ones left out); [] when it cannot be read as YAML,
    so the one-task reader (rgt.spec.load_spec) says why."""
    try:
        return [d for d in yaml12.load_all(path.read_text(encoding="utf-8")) if d is not None]
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []


def is_pipeline(path: Path) -> bool:
    """Whether `path` is a multi-document SkyPilot file (a pipeline or a job group), which
    `rgt run` reads here rather than as one task."""
    docs = documents(path)
    return len(docs) > 1 and all(isinstance(d, dict) for d in docs)


def load_pipeline(path: Path, *, cwd: Path | None = None,
                  overrides: Any = None) -> Pipeline:
    """The stages of the pipeline in `path`, each a validated JobSpec; a UserError naming the
    stage and field that has no rgt meaning, or a job group as what it is. `overrides`:
    the command line's --infra / --instance-type (rgt.skycloud), taken by every stage."""
    from rgt.spec import JobSpec, _explain  # the one-task reader's checks, word for word

    docs = documents(path)
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise UserError(f"{path}: expected SkyPilot task mappings, one per YAML document")
    if skytask.is_job_group(docs):
        raise UserError(f"{path} {skytask.several_documents(docs)}")
    name, tasks = None, docs
    if set(docs[0]) in HEADER_KEYS:
        if docs[0].get("execution", "serial") != "serial":
            raise UserError(f"{path}: a pipeline's execution is serial, not "
                            f"{docs[0]['execution']!r}")
        name, tasks = str(docs[0]["name"]), docs[1:]
    elif len(docs) == 1:
        name = docs[0].get("name")
    name = str(name or re.sub(r"[^A-Za-z0-9_.\-]", "-", path.stem).strip("-."))
    if not tasks:
        raise UserError(f"{path}: the pipeline {name!r} has no tasks after its header")
    stages, notes, taken = [], [], set()
    for index, task in enumerate(tasks):
        task = dict(task)
        if len(tasks) == 1:
            task["name"] = name
        task.setdefault("name", f"{name}-{index}")
        where = f"stage {index + 1} ({task['name']})"
        if str(task["name"]) in taken:
            raise UserError(f"{path}: {where}: another stage has this name; rgt keeps one "
                            "checkpoint home per job name, so each stage needs its own")
        taken.add(str(task["name"]))
        try:
            data, said = skytask.to_spec(task, default_name=str(task["name"]), cwd=cwd,
                                         overrides=overrides)
            spec = JobSpec.model_validate(data)
        except UserError as err:
            raise UserError(f"{path}: {where}: {err}") from None
        except ValidationError as err:
            raise UserError(f"{path}: {where}: {_explain(err)}") from None
        notes += [f"{where}: {note}" for note in said]
        if index < len(tasks) - 1 and "SKYPILOT_TASK_IDS" in spec.setup + spec.run:
            notes.append(f"{where}: its SKYPILOT_TASK_IDS lists this stage's and the earlier "
                         "stages' run ids only: a later stage's id does not exist before it "
                         "is submitted")
        stages.append(spec)
    for note in notes:  # as the one-task reader says them, once, on stderr
        print(f"note: {path.name}: {note}", file=sys.stderr)
    return Pipeline(name=name, stages=stages, notes=notes)


def task_ids_prefix(earlier: list[str]) -> str:
    """The line that sets SKYPILOT_TASK_IDS in a stage's setup and run: the earlier stages'
    run ids, then this one's own (SKYPILOT_TASK_ID, set for every run)."""
    # run ids are a job name ([A-Za-z0-9_.-]), a time and hex digits: nothing the shell's
    # double quotes would read
    listed = "".join(f"{run_id}\n" for run_id in earlier)
    return f'export SKYPILOT_TASK_IDS="{listed}$SKYPILOT_TASK_ID"\n'
