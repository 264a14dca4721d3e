"""How many of SkyPilot's and dstack's own task files rgt reads as they are, and what refuses
the rest (issue 32). Prints one table per corpus: accepted / refused, and refusals by field.

    python bench/task_acceptance.py --skypilot DIR --dstack DIR [--held-out-fields]
                                    [--infra-box PROFILE ...]

DIR is a checkout of each project's examples (SkyPilot: examples/ and llm/, run from the
repository root, as `sky launch examples/x.yaml` is; dstack: examples/). The corpora are the
projects' files, not rgt's, so they are not in this repository: see each DIR's SOURCE.md for
the repository and commit they were taken from.

Relative paths in a task are read from the repository root, and, when that finds nothing
there, from the file's own folder (the examples' READMEs use both).

A file counts as a task file when one of its YAML documents is a mapping with a task's words
(SkyPilot: run, setup, resources, service, num_nodes, file_mounts, envs, workdir, pool;
dstack: type) and none is a Kubernetes object or a tool's own config. "Accepted" means
`rgt.spec.load_spec` turned it into a job spec and nothing rgt checks before renting refuses
it (TPUs, `rgt.lifecycle.fit.refuse_tpu`); SkyPilot services are counted apart, as the issue
counts them. A task's envs and secrets with no value are measured as exported by the user
(SkyPilot reads them from the user's shell). One file in four (by a hash of its path) is held
out: its counts are printed apart, and its refusals by field only with --held-out-fields, so
changes can be made without looking at them.

The SkyPilot counts are printed twice, never mixed: "unchanged" (`rgt run BOX task.yaml`, the
file as it is) and "with --infra box" on a box of each PROFILE given (default: kubernetes and
generic-ssh): `rgt run BOX task.yaml --infra box`, SkyPilot's `sky launch --infra` override
that runs a task pinned to a cloud rgt has no platform for on the box named (rgt.skycloud).
A third count adds `--instance-type none` (SkyPilot's `-t none`), which drops a pinned
instance type that the box's platform does not have.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import os
import re
import sys
from pathlib import Path

import yaml

from rgt import skycloud, yaml12
from rgt.errors import UserError
from rgt.lifecycle.fit import refuse_tpu
from rgt.skypipeline import is_pipeline, load_pipeline
from rgt.spec import load_spec

SKY_WORDS = {"run", "setup", "resources", "service", "num_nodes", "file_mounts", "envs",
             "workdir", "pool"}
FIELD = re.compile(r"`([A-Za-z_][\w.\-\[\]]*)`"
                   r"|\b((?:resources|envs|secrets|file_mounts)\.[\w.\-]*)")


def held_out(relative: str) -> bool:
    return hashlib.sha1(relative.encode()).hexdigest()[0] in "0123"


def documents(path: Path) -> list:
    try:
        return [d for d in yaml12.load_all(path.read_text(encoding="utf-8")) if d is not None]
    except (yaml.YAMLError, UnicodeDecodeError):
        return []


def is_task(path: Path, words: set[str]) -> bool:
    docs = documents(path)
    maps = [d for d in docs if isinstance(d, dict)]
    if not maps or any("apiVersion" in d or "kind" in d for d in maps):
        return False
    return any(words & set(d) for d in maps)


def field_of(message: str, path: Path) -> str:
    """The field a refusal names, with the kind of refusal where one field has several."""
    text = re.sub(r"^\S+\.ya?ml:?(\d+:\d+:)? ?", "", message.replace(str(path), "")
                  ).lstrip(": ")
    text = re.sub(r"^stage \d+ \([^)]*\): ", "", text)  # a pipeline's stage: its field
    for word, label in (("not valid YAML", "YAML"), ("pipeline", "pipeline"),
                        ("job group", "job group"), ("SkyServe", "service"),
                        ("dstack service", "service"), ("pool", "pool"),
                        ("no value in the file", "env from the shell, unset"),
                        ("is a TPU", "TPU")):
        if word in text:
            return label
    if text.startswith("is "):
        return text[3:].split(":")[0]
    if text.startswith(("file_mounts.", "files")):
        kind = ("bucket" if "bucket" in text or "not copied by rgt" in text else
                "several nodes" if "first node only" in text else
                "outside the pushed folder" if "outside" in text or "share no" in text else
                "mode" if "mode" in text else text.split(": ", 1)[-1][:30])
        return f"{re.split(r'[. :]', text)[0]} ({kind})"
    match = FIELD.search(text)
    if match:
        return match[1] or match[2]
    return text.split(":")[0][:40]


def apart(doc) -> bool:
    """Counted apart from the tasks: a SkyPilot service or pool (workers for `sky jobs pool
    apply`, as a dstack fleet is machines for its runs), a dstack service, fleet, volume,
    gateway or dev environment (the issue's targets are over tasks)."""
    if not isinstance(doc, dict):
        return False
    return "service" in doc or "pool" in doc or doc.get("type", "task") != "task"


def asked_for(path: Path) -> set[str]:
    """The variables a task takes from the user's shell (SkyPilot: envs and secrets with no
    value): measured as a user who exported them, as the task's README tells them to."""
    names = set()
    for doc in documents(path):
        for key in ("envs", "secrets", "env"):
            given = doc.get(key) if isinstance(doc, dict) else None
            if isinstance(given, dict):
                names |= {str(k) for k, v in given.items() if v is None or v == ""}
            elif isinstance(given, list):  # dstack's [NAME=value, NAME]
                names |= {str(e) for e in given if "=" not in str(e)}
    return names


@contextlib.contextmanager
def exported(names: set[str]):
    before = {n: os.environ.get(n) for n in names}
    os.environ.update({n: "exported-by-the-user" for n in names if n not in os.environ})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)


def load(path: Path, overrides: skycloud.Overrides | None = None) -> None:
    """What `rgt run` reads: a pipeline's stages (accepted when every stage is; they run
    chained where the box's scheduler chains runs), or one task."""
    if is_pipeline(path):
        for stage in load_pipeline(path, overrides=overrides).stages:
            refuse_tpu(stage)
    else:
        refuse_tpu(load_spec(path, overrides=overrides))


def measure(root: Path, words: set[str], overrides: skycloud.Overrides | None = None) -> dict:
    tally = {True: collections.Counter(), False: collections.Counter()}
    fields = {True: collections.Counter(), False: collections.Counter()}
    files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    here = os.getcwd()
    os.chdir(root)  # a relative workdir is read from where the command runs
    try:
        for path in files:
            relative = str(path.relative_to(root))
            if not is_task(path, words):
                continue
            out = held_out(relative)
            tally[out]["task files"] += 1
            if any(apart(d) for d in documents(path)):
                tally[out]["services"] += 1
                if any(isinstance(d, dict) and "pool" in d for d in documents(path)):
                    tally[out]["pools"] += 1
            try:
                with exported(asked_for(path)):
                    try:
                        load(Path(relative), overrides)
                    except UserError as err:
                        # its README says to run it from its own folder: try that too
                        if "exist" not in str(err) and "not a directory" not in str(err):
                            raise
                        os.chdir(path.parent)
                        try:
                            load(Path(path.name), overrides)
                        finally:
                            os.chdir(root)
            except UserError as err:
                tally[out]["refused"] += 1
                fields[out][field_of(str(err), Path(relative))] += 1
                continue
            except Exception as err:  # a crash is a finding, not a refusal
                tally[out]["crashed"] += 1
                fields[out][f"CRASH {type(err).__name__}"] += 1
                print(f"  crash: {relative}: {err!r}", file=sys.stderr)
                continue
            tally[out]["accepted"] += 1
            if is_pipeline(path):
                tally[out]["pipelines accepted"] += 1
    finally:
        os.chdir(here)
    return {"tally": tally, "fields": fields}


def report(name: str, result: dict, show_held_out_fields: bool, how: str = "") -> None:
    for out, label in ((False, "looked at"), (True, "held out")):
        label += how
        t = result["tally"][out]
        not_services = t["task files"] - t["services"]
        pools = (f"; pools counted apart: {t['pools']}, {t['accepted']} of "
                 f"{not_services + t['pools']} counting them as tasks" if t["pools"] else "")
        print(f"{name} ({label}): {t['task files']} files, {t['services']} services or other "
              f"types; accepted {t['accepted']} of {t['task files']}"
              f" ({t['accepted']} of {not_services} tasks{pools})"
              + (f"; {t['crashed']} CRASHED" if t["crashed"] else "")
              + (f"; of them {t['pipelines accepted']} pipelines (chained jobs: on a box whose "
                 "scheduler chains runs, or one task)" if t["pipelines accepted"] else ""))
        if out and not show_held_out_fields:
            continue
        for field, count in result["fields"][out].most_common():
            print(f"    {count:4d}  {field}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skypilot", type=Path)
    parser.add_argument("--dstack", type=Path)
    parser.add_argument("--held-out-fields", action="store_true")
    parser.add_argument("--infra-box", action="append", metavar="PROFILE",
                        help="measure `--infra box` on a box of this profile (repeatable)")
    args = parser.parse_args()
    if args.skypilot:
        root = args.skypilot.resolve()
        report("SkyPilot", measure(root, SKY_WORDS), args.held_out_fields, ", unchanged")
        for profile in args.infra_box or ["kubernetes", "generic-ssh"]:
            for flags in (("box", None), ("box", "none")):
                overrides = skycloud.overrides(*flags, f"a {profile} box", profile)
                said = " --instance-type none" if flags[1] else ""
                report("SkyPilot", measure(root, SKY_WORDS, overrides), args.held_out_fields,
                       f", with --infra box{said} on a {profile} box")
    if args.dstack:
        report("dstack", measure(args.dstack.resolve(), {"type"}), args.held_out_fields)


if __name__ == "__main__":
    main()
