"""Platform profiles: every platform difference, held as validated data.

The names below load on first use (PEP 562), so importing a light part of the package
(`rgt.profiles.brief`, what `rgt ls` reads) does not build the pydantic schema.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rgt.profiles.loader import (
        ProfileError,
        all_profiles,
        find_gotcha,
        load_profile,
        profile_names,
        universal_catalog,
    )
    from rgt.profiles.schema import Action, Gotcha, Profile, Tier
    from rgt.profiles.search import GotchaHit, search_gotchas

_HOME = {
    "Action": "schema", "Gotcha": "schema", "Profile": "schema", "Tier": "schema",
    "ProfileError": "loader", "all_profiles": "loader", "find_gotcha": "loader",
    "load_profile": "loader", "profile_names": "loader", "universal_catalog": "loader",
    "GotchaHit": "search", "search_gotchas": "search",
}

__all__ = [
    "Action",
    "Gotcha",
    "GotchaHit",
    "Profile",
    "ProfileError",
    "Tier",
    "all_profiles",
    "find_gotcha",
    "load_profile",
    "profile_names",
    "search_gotchas",
    "universal_catalog",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'rgt.profiles' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rgt.profiles.{module}"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value
