"""Platforms: one module per control plane, every one behind the same contract.

`platform_for(profile)` returns a `Platform` (rgt.platforms.base) for every profile; the
lifecycle verbs call only its verbs (provision, launch, state, logs, fetch, release,
audit_extras, and the optional ones it has: `abilities()`, rgt.platforms.base.Ability, each
absent one with its reason) and never name a platform (tests/test_no_platform_names.py).

A new platform is one module, one profile YAML and its tests:

1. `src/rgt/profiles/data/<name>.yaml` — the facts (storage tiers and what survives each
   verb, the meter-stop verb, gotchas); `rgt profiles show <name>` validates it.
2. `src/rgt/platforms/<module>.py` — a class with `name = "<name>"`, `supports` (the
   `Resources` fields it maps, rgt.platforms.base.RESOURCE_FIELDS) and the required verbs:
   a box rented through a cloud's API subclasses `rgt.platforms.rented.RentedPlatform` in
   `<cloud>/platform.py`, with its API client in `<cloud>/api.py` (rented.py's docstring is
   the guide: the hooks to write, and the create/record/wait/register/release it does around
   them); a machine the user already has that answers SSH uses or subclasses
   `rgt.platforms.ssh.SshPlatform`; anything else `rgt.platforms.base.Platform`. Import only from
   rgt.remote, rgt.transport, rgt.onbox, rgt.store, rgt.profiles, rgt.spec, rgt.ckpt and
   rgt.platforms.http (for a REST control plane): never rgt.lifecycle or rgt.cli
   (tests/test_layering.py fails otherwise). Refuse a resource field or an option you cannot
   honour in `provision`, before anything is rented (`refuse_unsupported`).
   Its own `rgt up` / `rgt offers` flags (a region's filesystem, an offer id): declared as
   `UP` / `OFFERS` in `flags.py` beside a folder's `platform.py` (rgt.platforms.options);
   the CLI makes them flags and the values arrive in `request.options`. Refuse any other
   option by name (tests/test_platform_options.py holds a platform to its declaration).
3. One line in REGISTRY below: "<name>": "rgt.platforms.<package>.platform:<Class>".
4. Tests: a local fake of the control plane that speaks its documented API shapes and
   rejects what the real one rejects (tests/cloud/fakes), and the verbs run against it.

No lifecycle or CLI code changes: `rgt up --profile <name>`, run, watch, logs, pull and down
reach the new platform through this registry.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rgt.platforms.base import Platform

# The contract's names, imported from rgt.platforms.base on first use: reading REGISTRY, or a
# platform's flag declarations (rgt.platforms.options), must not cost pydantic and the spec
# (`rgt offers --help`, `rgt up --help`).
_FROM_BASE = ("Launched", "Platform", "ReleaseRefused", "Released", "Request", "Teardown",
              "Unbuilt")


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from rgt.platforms import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["REGISTRY", "Launched", "Platform", "ReleaseRefused", "Released", "Request", "Teardown",
           "platform_for"]

# profile name → "module:Class", imported only when a box of that profile is used.
REGISTRY: dict[str, str] = {
    "local": "rgt.platforms.ssh:SshPlatform",
    "generic-ssh": "rgt.platforms.ssh:SshPlatform",
    "autodl": "rgt.platforms.ssh:SshPlatform",
    "lambda": "rgt.platforms.lambda_cloud.platform:LambdaPlatform",
    "vastai": "rgt.platforms.vastai.platform:VastPlatform",
    "slurm": "rgt.platforms.slurm.platform:SlurmPlatform",
    "runpod": "rgt.platforms.runpod.platform:RunpodPlatform",
    "kubernetes": "rgt.platforms.k8s.platform:KubernetesPlatform",
    "colab": "rgt.platforms.colab.platform:ColabPlatform",
    "kaggle": "rgt.platforms.kaggle.platform:KagglePlatform",
}

# The profile a verb asks when the user names none (`rgt offers`, `rgt render` and their MCP
# tools): which platform answers first is a choice kept here, beside REGISTRY, so that the CLI
# and the agent name no platform.
DEFAULT_PROFILE: dict[str, str] = {"offers": "vastai", "render": "slurm"}

# A profile of the user's own (RGT_PROFILE_PATH) gets the platform its `facts.kind` names.
BY_KIND: dict[str, str] = {
    "local": "rgt.platforms.ssh:SshPlatform",
    "ssh": "rgt.platforms.ssh:SshPlatform",
    "ssh-rental": "rgt.platforms.ssh:SshPlatform",
    "slurm": "rgt.platforms.slurm.platform:SlurmPlatform",
}


def platform_for(profile: str) -> Platform:
    """The platform of a profile; a profile whose module has not landed yet gets `Unbuilt`,
    whose every verb says so."""
    from rgt.platforms.base import Unbuilt
    from rgt.profiles import load_profile

    target = REGISTRY.get(profile)
    if target is None:
        target = BY_KIND.get(load_profile(profile).facts.kind)
    if target is None:
        return Unbuilt(profile)
    module_name, class_name = target.split(":")
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name:
            return Unbuilt(profile)  # the module has not landed yet
        raise
    return getattr(module, class_name)(profile)
