"""Platform profiles: every platform difference, held as validated data."""

from rgt.profiles.loader import (
    ProfileError,
    all_profiles,
    find_gotcha,
    load_profile,
    profile_names,
    search_gotchas,
    universal_catalog,
)
from rgt.profiles.schema import Action, Gotcha, Profile, Tier

__all__ = [
    "Action",
    "Gotcha",
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
