"""`rgt render` and `rgt run --dry-run`: what a platform would submit, with nothing submitted.

The platform's optional `render` verb writes it (Slurm: the sbatch script; Kubernetes: the
manifests as multi-document YAML). `render` needs no box: it stands one in with the profile's
directories, resolved for a placeholder user, or the ones given; `--dry-run` uses the
registered box, so it prints exactly what `rgt run` would submit there.
"""

from __future__ import annotations

import time
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle.boxes import resources_from
from rgt.lifecycle.launch import new_run_id
from rgt.platforms import Platform, platform_for
from rgt.platforms.base import refuse_foreign_sections
from rgt.profiles import load_profile
from rgt.remote.register import check_dir_flags, resolve_dir
from rgt.spec import JobSpec
from rgt.store import Box, Store

HOME, USER = "/home/USER", "USER"  # what the stand-in box's $HOME and $USER read as


def renderer(profile: str, spec: JobSpec) -> Platform:
    platform = platform_for(profile)
    refuse_foreign_sections(platform, spec)
    if not hasattr(platform, "render"):
        raise UserError(f"{profile} submits nothing to render: its boxes run the job under "
                        "rgt's on-box runner, as the spec says (render shows a scheduler's "
                        "batch script or a cluster's manifests: --profile slurm, kubernetes)")
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
    data = data_dir or (durable if profile.facts.kind == "slurm" else resolve_dir(
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
    if (options or {}).get("image") and "image" not in platform.supports:
        raise UserError(f"--image does not apply to --profile {profile}: its boxes run the "
                        "image the platform gives them")
    box = stand_in_box(profile, data_dir=data_dir, durable_dir=durable_dir,
                       resources=resources, options=options)
    return platform.render(box, spec, new_run_id(spec.name))


def dry_run(store: Store, box_name: str, spec: JobSpec, *, after: str | None = None) -> str:
    """`rgt run BOX JOB.yaml --dry-run`: what `rgt run` would submit on that box."""
    box = store.box(box_name)
    platform = renderer(box.profile, spec)
    dependency = platform.dependency_on(store.run(box.name, after)) if after else None
    return platform.render(box, spec, new_run_id(spec.name), dependency=dependency)
