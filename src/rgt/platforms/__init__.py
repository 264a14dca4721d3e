"""Control-plane code for platforms where data is not enough.

A platform module implements the parts of the `Platform` protocol its control plane offers;
the verbs ask `platform_for(profile)` and fall back to the SSH-and-runner path where a method
is absent. A platform never decides whether teardown is safe: `rgt down` does, then calls
`stop_meter`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Protocol

# profile name → "module:Class", imported only when a box of that profile is used.
REGISTRY: dict[str, str] = {
    "lambda": "rgt.platforms.lambda_cloud:LambdaPlatform",
    "vastai": "rgt.platforms.vastai:VastPlatform",
    "slurm": "rgt.platforms.slurm:SlurmPlatform",
}


class Platform(Protocol):
    """What a control plane may provide. Every method is optional."""

    def stop_meter(self, store: Any, box: Any) -> str:
        """Run the profile's meter-stop verb through the API; return what happened."""

    def launch(self, transport: Any, box: Any, spec: Any, layout: Any, *,
               dependency: str | None = None) -> tuple[str, dict[str, Any]]:
        """Start a pushed run the platform's way (e.g. sbatch) instead of the detached runner;
        return how it is detached and the `platform_run` record that `refresh` reads."""

    def dependency_on(self, earlier: Any) -> str:
        """The scheduler option that starts a run once `earlier` succeeded (`rgt run --after`);
        having it also means the platform runs sweeps (`grid`) as one job array."""

    def audit(self, transport: Any, box: Any) -> dict[str, Any]:
        """What `rgt audit` adds for this platform (partitions, limits …), with verdicts."""

    def refresh(self, store: Any, box: Any, run: Any, transport: Any) -> dict[str, Any]:
        """The state of a run the platform launched (`launch`): squeue/sacct instead of a probe."""

    def gate(self, store: Any, box: Any, run: Any) -> dict[str, Any] | None:
        """Asked by `rgt watch` before anything else: None when the box can be probed as usual,
        else the run's summary (the keys of `rgt.lifecycle.watch.summarize`) while the machine
        cannot run it, e.g. a preempted vast.ai instance → status "paused" with the cause.
        Never a terminal status for a run that may go on: once the machine is back, the probe
        (and the platform's restart hook) take over again."""


def platform_for(profile: str) -> Platform | None:
    target = REGISTRY.get(profile)
    if target is None:
        return None
    module_name, class_name = target.split(":")
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name:
            return None  # not built yet: the generic path applies
        raise
    return getattr(module, class_name)()
