"""Lambda Cloud's own `rgt up` flags (rgt.platforms.options); `rgt offers --profile lambda`
takes only the common filters."""

from __future__ import annotations

from rgt.platforms.options import KEEP_PARTIAL, WAIT, Option

PANEL = "Rent on Lambda Cloud (--profile lambda, without --ssh/--host)"

UP = (
    Option("filesystem", str, "Filesystem to attach; only possible at launch, in its own region "
                              "(LAM2).", PANEL),
    Option("ssh_key", str, "Name of the Lambda SSH key to install (default: your only one).",
           PANEL),
    WAIT,
    KEEP_PARTIAL,
)
