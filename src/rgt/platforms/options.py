"""The flags a platform adds to `rgt up` and `rgt offers`, declared as data.

A platform that takes settings of its own (Lambda's --filesystem, vast.ai's --offer, a
Kubernetes --namespace) declares them in `flags.py` beside its `platform.py`:

    UP = (Option("filesystem", str, "Filesystem to attach …", panel=PANEL), WAIT)
    OFFERS = (Option("cloud", str, "RunPod: secure or community."),)

The CLI builds `rgt up`'s and `rgt offers`' flags from the union of every registered
platform's declarations (rgt.cli.cloud_cmd), so no platform's flag is written in rgt.cli, and
the values reach the platform as `Request.options[key]` (`OfferQuery.options` for offers).
A flag the chosen platform does not declare is refused by the platform, by name, before
anything is rented (tests/test_platform_options.py holds each platform to its declaration).

`RESOURCES` are the resource vocabulary's flags (rgt.spec.Resources, the same words for every
platform; they reach `Request.resources`), and `WAIT` and `SECRET` mean the same to every
platform that rents through an API, so those declare them by reusing these objects: a flag
name has one declaration, whoever lists it.

Light on purpose: this module and every `flags.py` import only the standard library and each
other, so `rgt up --help` and `rgt offers --help` need no platform implementation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from typing import Any

VERBS = ("up", "offers")  # the verbs whose flags platforms declare (UP, OFFERS in flags.py)


@dataclass(frozen=True)
class Option:
    """One flag of `rgt up` or `rgt offers`."""

    name: str                 # Python name; the flag is --name with '-' for '_' (--image-cuda)
    type: type                # str, int, float, or bool (a flag that takes no value)
    help: str
    panel: str | None = None  # the `--help` panel it is shown in; None: the verb's Options
    key: str | None = None    # its key in Request.options where that is not `name`
    metavar: str | None = None
    default_shown: str | None = None  # what the platform uses when the flag is not given
    min: float | None = None  # a number outside min..max is refused: "--FLAG V: give ACCEPTS"
    max: float | None = None
    accepts: str = ""
    repeatable: bool = False  # given several times: a tuple of values (str only)
    negatable: bool = False   # a bool flag that also has --no-NAME

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def option_key(self) -> str:
        return self.key or self.name

    def refusal(self, value: Any) -> str | None:
        """The one line that refuses VALUE, or None when it is in range."""
        if value is None or (self.min is None and self.max is None):
            return None
        low = -math.inf if self.min is None else self.min
        high = math.inf if self.max is None else self.max
        if low <= value <= high:  # (nan is never in range)
            return None
        return f"{self.flag} {value:g}: give {self.accepts or f'a number from {low:g} to {high:g}'}"


RESOURCES_PANEL = "Resources (the spec's `resources` words; each platform maps or refuses them)"
RENTING_PANEL = "Renting through an API (any platform that rents; without --ssh/--host)"

# The resource vocabulary (rgt.platforms.base.RESOURCE_FIELDS), as `rgt up` spells it.
RESOURCES = (
    Option("gpu", str, "GPU to rent: TYPE:COUNT (H100:1, A100:8) or a Lambda instance type "
                       "name; several, comma-separated, are tried in order until one has "
                       "capacity (H100:1,A100:1).", RESOURCES_PANEL),
    Option("cpus", int, "CPU cores.", RESOURCES_PANEL),
    Option("mem", str, "Memory: 32G, or GB as a number.", RESOURCES_PANEL),
    Option("disk", str, "Disk: 50G, 1T (1,024 GB, as every rgt size), 1.5G, or GB as a "
                        "number; fixed for the instance's life (VAST10).", RESOURCES_PANEL,
           default_shown="50 on vast.ai and RunPod"),
    Option("image", str, "Docker image; its CUDA must not exceed the host's (VAST5).",
           RESOURCES_PANEL),
    Option("region", str, "Region (default: the first with capacity, or the filesystem's).",
           RESOURCES_PANEL),
    Option("spot", bool, "Interruptible / preemptible capacity.", RESOURCES_PANEL),
    Option("bid", float, "Interruptible bid, USD/h; fixed at create, preemptible (VAST4).",
           RESOURCES_PANEL),
    Option("nodes", int, "Nodes (multi-node jobs).", RESOURCES_PANEL),
    Option("time", str, "Walltime: 01:30:00, 90m, 2h.", RESOURCES_PANEL),
)

WAIT = Option("wait", float, "Seconds to wait before giving up: for capacity on Lambda (LAM5), "
                             "for the instance to start on vast.ai and RunPod.", RENTING_PANEL,
              default_shown="1800 on Lambda, 900 on vast.ai and RunPod", min=0,
              accepts="the seconds to wait, e.g. --wait 3600")
SECRET = Option("secret", str, "An env var NAME passed as env at create (repeatable; VAST11).",
                RENTING_PANEL, key="secrets", repeatable=True)
KEEP_PARTIAL = Option("keep_partial", bool, "With --nodes N: keep (and bill) the instances of a "
                      "group that could not be formed, instead of releasing them.",
                      RENTING_PANEL)


def flags_module(target: str) -> str | None:
    """Where the platform REGISTRY names ("rgt.platforms.vastai.platform:VastPlatform")
    declares its flags: `flags` beside a folder's `platform` module; None for a platform in a
    single module (rgt.platforms.ssh), which has no flags of its own."""
    module = target.split(":")[0]
    package, _, leaf = module.rpartition(".")
    return f"{package}.flags" if leaf == "platform" else None


def declared(verb: str) -> dict[str, tuple[Option, ...]]:
    """Every registered profile's own flags for `verb` (up, offers), in REGISTRY order; a
    profile whose platform declares none maps to ()."""
    from rgt.platforms import REGISTRY  # a plain dict; the package imports nothing heavy

    if verb not in VERBS:
        raise ValueError(f"platforms declare flags for {VERBS}, not {verb!r}")
    found: dict[str, tuple[Option, ...]] = {}
    for profile, target in REGISTRY.items():
        name = flags_module(target)
        if name is None or find_spec(name) is None:
            found[profile] = ()
            continue
        found[profile] = tuple(getattr(import_module(name), verb.upper(), ()))
    return found


def union(verb: str) -> list[Option]:
    """Each flag that some platform declares for `verb`, once: those several platforms share
    first (WAIT, SECRET), then each platform's own, in REGISTRY order (as `--help` shows their
    panels). Two declarations of one name must be the same declaration: a flag parses and
    reads the same whichever platform it is for."""
    seen: dict[str, Option] = {}
    platforms: dict[str, set[str]] = {}
    for profile, options in declared(verb).items():
        for option in options:
            if seen.setdefault(option.name, option) != option:
                raise ValueError(f"--profile {profile} declares {option.flag} unlike another "
                                 "platform: share one declaration (rgt.platforms.options)")
            platforms.setdefault(option.name, set()).add(profile)
    return sorted(seen.values(), key=lambda option: len(platforms[option.name]) == 1)
