"""`rgt render` and `rgt run --dry-run`: what a platform would submit, with nothing submitted.

The platform's optional `render` verb writes it (Slurm: the sbatch script; Kubernetes: the
manifests as multi-document YAML). `render` needs no box: it stands one in with the profile's
directories, resolved for a placeholder user, or the ones given; `--dry-run` uses the
registered box, so it prints exactly what `rgt run` would submit there.

A platform without `render` submits nothing of its own: its boxes run the job under rgt's
on-box runner. There `--dry-run` prints what the runner would be given on that box — the
command, setup, directories, the names of the environment variables and secrets (never a
value), and the files the push would send, from the push's own list — and touches nothing.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle import fit
from rgt.lifecycle.boxes import resources_from
from rgt.lifecycle.launch import job_setup, new_run_id, refuse_unlaunchable
from rgt.lifecycle.pushlist import push_excludes
from rgt.onbox import xfer
from rgt.platforms import Platform, platform_for
from rgt.platforms.base import Ability, refuse_foreign_sections
from rgt.profiles import load_profile
from rgt.remote.layout import Layout, job_environment
from rgt.remote.register import check_dir_flags, resolve_dir
from rgt.spec import JobSpec
from rgt.store import Box, Store

HOME, USER = "/home/USER", "USER"  # what the stand-in box's $HOME and $USER read as


def renderer(profile: str, spec: JobSpec) -> Platform:
    platform = platform_for(profile)
    refuse_foreign_sections(platform, spec)
    if Ability.RENDER not in platform.abilities():
        raise UserError(f"{profile} submits nothing to render: "
                        f"{platform.abilities().why_not(Ability.RENDER)}; `rgt run BOX JOB.yaml "
                        "--dry-run` shows what a registered box's runner would be given "
                        "(render writes a scheduler's batch script or a cluster's manifests: "
                        "--profile slurm, kubernetes)")
    return platform


def stand_in_box(profile_name: str, *, data_dir: str | None, durable_dir: str | None,
                 resources: dict[str, Any] | None, options: dict[str, Any] | None) -> Box:
    """A box that was never registered, for `render` to write paths into."""
    check_dir_flags(data_dir, durable_dir)
    profile = load_profile(profile_name)
    overrides = profile.overrides
    durable = durable_dir or resolve_dir(
        overrides.get("DURABLE_DIR", data_dir or overrides.get("DATA_DIR", "$HOME")),
        box="render", home=HOME, user=USER, flag="--durable-dir")
    data = data_dir or (durable if profile.facts.jobs_on_other_nodes else resolve_dir(
        overrides.get("DATA_DIR", "$HOME"), box="render", home=HOME, user=USER,
        flag="--data-dir"))
    asked = resources_from(resources)
    extra: dict[str, Any] = {**(options or {})}
    if resources:
        extra["resources"] = asked.model_dump(include=set(resources))
    return Box(name="render", profile=profile.name, connection={}, data_dir=data,
               durable_dir=durable, rate=None, state="up", created=time.time(), extra=extra)


def render(spec: JobSpec, profile: str, *, data_dir: str | None = None,
           durable_dir: str | None = None, resources: dict[str, Any] | None = None,
           options: dict[str, Any] | None = None) -> str:
    """`rgt render JOB.yaml --profile P`: no box, no cluster, nothing contacted."""
    platform = renderer(profile, spec)
    fit.refuse_tpu(spec)
    if (options or {}).get("image") and "image" not in platform.supports:
        raise UserError(f"--image does not apply to --profile {profile}: its boxes run the "
                        "image the platform gives them")
    box = stand_in_box(profile, data_dir=data_dir, durable_dir=durable_dir,
                       resources=resources, options=options)
    # a notebook carries the workdir as a push would: .rgtignore and rgt-results/ left out
    pushed = spec.model_copy(update={"exclude": push_excludes(spec)})
    return platform.render(box, pushed, new_run_id(spec.name))


def dry_run(store: Store, box_name: str, spec: JobSpec, *, after: str | None = None,
            skip_resource_check: bool = False) -> str:
    """`rgt run BOX JOB.yaml --dry-run`: what `rgt run` would submit on that box, or what its
    on-box runner would be given; nothing is sent. The spec's resources are checked as `rgt
    run` checks them: on a one-machine box that measures it (read-only, one round trip)."""
    box = store.box(box_name)
    platform = platform_for(box.profile)
    refuse_unlaunchable(box, platform, spec, after)  # what `rgt run` would refuse
    if Ability.RENDER not in platform.abilities():
        fitted = _measured_fit(platform, box, spec, skip_resource_check)
        return runner_plan(store, box, platform, spec) + "".join(
            line + "\n" for line in fitted.lines())
    dependency = platform.dependency_on(store.run(box.name, after)) if after else None
    pushed = spec.model_copy(update={"exclude": push_excludes(spec, store)})
    return platform.render(box, pushed, new_run_id(spec.name), dependency=dependency)


def _measured_fit(platform: Platform, box: Box, spec: JobSpec, skip: bool) -> fit.Fit:
    transports = []

    def connect():
        transports.append(platform.connect(box))
        return transports[-1]
    try:
        return fit.check(platform, box, spec, connect, skip=skip)
    finally:
        for transport in transports:
            transport.close()


SHOWN_FILES = 30  # the largest files the plan lists by name; the rest are counted


def runner_plan(store: Store, box: Box, platform: Platform, spec: JobSpec) -> str:
    """What `rgt run` would hand the on-box runner on BOX: read from the spec, the profile,
    the box's directories and this machine's workdir; the box is not contacted."""
    profile = load_profile(box.profile)
    run_id = new_run_id(spec.name)
    layout = Layout.of(box, run_id, spec)
    setup, dropped = job_setup(profile, spec)
    try:
        _, files, links, problems = xfer.scan(spec.workdir, push_excludes(spec, store))
    except xfer.XferError as err:
        raise UserError(f"cannot read the workdir {spec.workdir}: {err}") from None
    total = sum(entry[1] for entry in files)
    env = job_environment(spec, profile, layout)
    lines = [f"# what `rgt run` would give the on-box runner on {box.name} ({box.profile}); "
             "nothing was sent, nothing started",
             f"run dir     {layout.run_dir}  (a new run id at each launch)",
             f"workdir     {layout.code}  (the push of {spec.workdir})",
             f"setup       {setup.strip() or '(none)'}"]
    if dropped:
        lines.append(f"            dropped from setup: {', '.join(dropped)} (this image's "
                     "PyTorch is the environment)")
    lines += [f"command     {spec.run.strip()}",
              f"env         {', '.join(env)}  (names; values from the spec and the profile)"]
    for name in spec.secrets:
        said = "set here; its value goes on stdin, never shown" if os.environ.get(name) \
            else "NOT set here: `rgt run` refuses until it is exported"
        lines.append(f"secret      {name}  ({said})")
    lines.append(f"checkpoints {layout.ckpt}  ($RGT_CKPT_DIR, kept across runs of the job)")
    if spec.outputs:
        lines.append(f"outputs     {', '.join(spec.outputs)} -> {layout.out}  (copied and "
                     "verified when the job exits 0)")
    lines.append(f"files       {len(files)}, {_size(total)}"
                 + (f", {len(links)} symlink(s)" if links else "")
                 + "  (left out: the spec's exclude, .rgtignore, pulled results)")
    largest = sorted(files, key=lambda entry: (-entry[1], entry[0]))
    for name, size, *_ in largest[:SHOWN_FILES]:
        lines.append(f"  {_size(size):>10}  {name}")
    if rest := largest[SHOWN_FILES:]:
        lines.append(f"  … and {len(rest)} smaller file(s), {_size(sum(e[1] for e in rest))}")
    for name, why in problems:
        lines.append(f"  not readable here: {name} ({why})")
    return "\n".join(lines) + "\n"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
