"""RunPod's own `rgt up` and `rgt offers` flags (rgt.platforms.options)."""

from __future__ import annotations

from rgt.platforms.options import KEEP_PARTIAL, SECRET, WAIT, Option

PANEL = "Rent on RunPod (--profile runpod, with --gpu and --image)"
OFFERS_PANEL = "RunPod filters (--profile runpod)"

UP = (
    Option("volume", str, "Network volume (name or id) as /workspace: it outlives the pod and "
                          "bills on its own; without it /workspace dies with the pod (RP3).",
           PANEL),
    Option("cloud", str, "secure or community.", PANEL, default_shown="secure"),
    Option("container_disk", int, "Container disk GB (/, wiped by every stop or restart: RP2).",
           PANEL, default_shown="20"),
    SECRET,
    WAIT,
    KEEP_PARTIAL,
)

OFFERS = (
    Option("cloud", str, "RunPod: secure or community.", OFFERS_PANEL, default_shown="secure"),
)
