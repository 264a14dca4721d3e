"""vast.ai's own `rgt up` and `rgt offers` flags (rgt.platforms.options)."""

from __future__ import annotations

from rgt.platforms.options import KEEP_PARTIAL, SECRET, WAIT, Option

PANEL = "Rent on vast.ai (--profile vastai, without --ssh/--host)"
OFFERS_PANEL = "vast.ai filters (--profile vastai)"

UP = (
    Option("offer", int, "Offer id to rent (see `rgt offers`).", PANEL),
    Option("onstart", str, "Extra onstart commands; no secrets in them (VAST11).", PANEL),
    Option("image_cuda", float, "The image's CUDA version, if its tag does not say.", PANEL),
    SECRET,
    WAIT,
    KEEP_PARTIAL,
)

OFFERS = (
    Option("min_reliability", float, "vast.ai: host reliability floor (VAST7).", OFFERS_PANEL,
           default_shown="0.98", min=0, max=1, accepts="a fraction from 0 to 1 (e.g. 0.95)"),
    Option("unverified", bool, "vast.ai: include unverified hosts (VAST7).", OFFERS_PANEL,
           negatable=True),
)
