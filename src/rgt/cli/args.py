"""The arguments many verbs take, spelled once: the same name and help on every verb."""

from __future__ import annotations

from typing import Annotated

import typer

BoxArg = Annotated[str, typer.Argument(help="The box's name, as given to `rgt up`.")]
RunArg = Annotated[str | None, typer.Argument(
    help="Run id, or a unique start or end of it (7d92), or @last / @-1 (the one before); "
         "default: the newest run.")]
