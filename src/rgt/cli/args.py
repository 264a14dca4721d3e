"""The arguments many verbs take, spelled once: the same name and help on every verb."""

from __future__ import annotations

from typing import Annotated

import typer

BoxArg = Annotated[str, typer.Argument(help="The box's name, as given to `rgt up`.")]
RunArg = Annotated[str | None, typer.Argument(
    help="Run id, or a unique start or end of it (7d92), or @last / @-1 (the one before); "
         "default: the newest run.")]
InfraOpt = Annotated[str | None, typer.Option(
    "--infra", metavar="INFRA",
    help="A SkyPilot task's infra, overridden as `sky launch --infra` overrides it: `box` (or "
         "'*') runs it on the box named whatever cloud its file pins; k8s, ssh, slurm, "
         "runpod or runpod/REGION, lambda or vast where that is the box's platform. A note "
         "says what it replaced.")]
InstanceTypeOpt = Annotated[str | None, typer.Option(
    "--instance-type", metavar="NAME|none",
    help="A SkyPilot task's resources.instance_type, overridden (SkyPilot's -t): `none` drops "
         "it, and the GPU request is the task's accelerators.")]
