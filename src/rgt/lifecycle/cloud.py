"""`rgt offers` and `rgt cloud-status`: what a renting platform's control plane says, asked
through the platform's optional verbs (`offers`, `cloud_status`), never by naming a platform."""

from __future__ import annotations

import contextlib
import math
from typing import Any

from rgt.boxfacts import facts
from rgt.errors import UserError
from rgt.platforms import REGISTRY, platform_for
from rgt.platforms.base import Ability, OfferQuery, Offers
from rgt.profiles import load_profile
from rgt.store import Box, Store


def renting_profiles(verb: Ability) -> list[str]:
    """The registered profiles whose platform has `verb` (for the message that names them)."""
    names = []
    for name in REGISTRY:
        with contextlib.suppress(Exception):  # a platform whose extra is missing: not listed
            if verb in platform_for(name).abilities():
                names.append(name)
    return names


def offers(profile: str, query: OfferQuery) -> Offers:
    """What `profile`'s platform would rent now for `query`; refused in one line by a platform
    that rents nothing through an API (Slurm, Kubernetes, an SSH box)."""
    check_query(query)
    name = load_profile(profile).name
    platform = platform_for(name)
    if Ability.OFFERS not in platform.abilities():
        raise UserError(f"--profile {name} has no offers to list: rgt does not rent its "
                        f"machines through an API. `rgt offers` lists what "
                        f"{', '.join(renting_profiles(Ability.OFFERS))} rent")
    return platform.offers(query)


def check_query(query: OfferQuery) -> None:
    """The user's words, checked before any platform asks for its API key: a mistyped
    argument is said as itself, not as a missing credential."""
    if query.limit < 1:
        raise UserError(f"--limit {query.limit}: give the number of offers to show, 1 or more")
    price = query.max_price
    if price is not None and not (0 < price < math.inf):
        raise UserError(f"--max-price {price:g}: give the most USD per hour, more than 0 "
                        "(e.g. 0.5)")
    if query.count is not None and query.count < 1:
        raise UserError(f"--num-gpus {query.count}: give 1 or more")
    if query.gpu is not None:
        name, colon, count = query.gpu.rpartition(":")
        if not query.gpu.strip() or (colon and not (name.strip() and count.isdigit()
                                                    and int(count) >= 1)):
            raise UserError(f"--gpu {query.gpu!r}: write it as TYPE or TYPE:COUNT with COUNT "
                            "1 or more, e.g. H100:2")


def cloud_status(store: Store, name: str) -> tuple[Box, dict[str, Any]]:
    """The box, and what its platform's API says about its instance (or pod)."""
    box = store.box(name)
    platform = platform_for(box.profile)
    if Ability.CLOUD_STATUS not in platform.abilities() or not facts(box).rented:
        raise UserError(f"box {name!r} ({box.profile}) was not rented through an API: "
                        f"`rgt cloud-status` asks the control plane of a box `rgt up` rented "
                        f"({', '.join(renting_profiles(Ability.CLOUD_STATUS))}); "
                        f"`rgt watch {name}` shows its runs")
    return box, platform.cloud_status(store, box)
