"""Platform profiles: every platform difference, held as validated data."""

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
