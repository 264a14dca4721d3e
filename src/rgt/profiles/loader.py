"""Find, load and validate profile files.

Bundled profiles live in `data/`. A user may add or shadow profiles with directories named in
`RGT_PROFILE_PATH` (os.pathsep-separated), searched first. A malformed file is a `ProfileError`
naming the file and the first offending field, never a pydantic traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from rgt.errors import UserError, did_you_mean
from rgt.profiles.files import DATA_DIR, UNIVERSAL_FILE
from rgt.profiles.files import profile_files as _profile_files
from rgt.profiles.schema import Gotcha, Profile, UniversalCatalog

# libyaml parses the bundled profiles about eight times faster than the pure-Python loader.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ProfileError(UserError):
    """A profile is unknown or its file does not validate."""


def profile_names() -> list[str]:
    return sorted(_profile_files())


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ProfileError(f"{path}:{where} is not valid YAML ({_first_line(err)})") from None
    except OSError as err:
        raise ProfileError(f"cannot read {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ProfileError(f"{path}: not UTF-8 text (byte {err.start})") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level")
    return data


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _explain(path: Path, err: ValidationError) -> ProfileError:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {err.error_count() - 1} more problems)" if err.error_count() > 1 else ""
    return ProfileError(f"{path}: {where}: {first['msg']}{more}")


@cache
def _load_file(path: Path, mtime_ns: int, size: int) -> Profile:
    del mtime_ns, size  # part of the cache key only: an edited file is re-read
    try:
        return Profile.model_validate(_read_yaml(path))
    except ValidationError as err:
        raise _explain(path, err) from None


def _load(name: str, path: Path) -> Profile:
    try:
        stat = path.stat()
    except OSError as err:
        raise ProfileError(f"cannot read {path}: {err.strerror}") from None
    profile = _load_file(path, stat.st_mtime_ns, stat.st_size)
    if profile.name != name:
        raise ProfileError(f"{path}: name {profile.name!r} does not match the file name {name!r}")
    return profile


def load_profile(name: str) -> Profile:
    files = _profile_files()
    path = files.get(name)
    if path is None:
        if hint := did_you_mean(name, files):
            raise ProfileError(f"unknown profile {name!r}{hint} (`rgt profiles` lists them)")
        raise ProfileError(f"unknown profile {name!r}; known profiles: {', '.join(sorted(files))}")
    return _load(name, path)


def all_profiles() -> list[Profile]:
    return [_load(name, path) for name, path in sorted(_profile_files().items())]


@cache
def universal_catalog() -> UniversalCatalog:
    path = DATA_DIR / UNIVERSAL_FILE
    try:
        return UniversalCatalog.model_validate(_read_yaml(path))
    except ValidationError as err:
        raise _explain(path, err) from None


def all_gotchas() -> Iterator[tuple[str, Gotcha]]:
    """Universal gotchas first, then each profile's, loading a profile only when reached."""
    yield from (("universal", g) for g in universal_catalog().gotchas)
    for name, path in sorted(_profile_files().items()):
        yield from ((name, g) for g in _load(name, path).gotchas)


def find_gotcha(gotcha_id: str) -> tuple[str, Gotcha]:
    wanted = gotcha_id.strip().upper()
    ids = []
    for platform, gotcha in all_gotchas():
        if gotcha.id.upper() == wanted:
            return platform, gotcha
        ids.append(gotcha.id)
    if hint := did_you_mean(gotcha_id.strip(), ids):
        raise ProfileError(f"no gotcha {gotcha_id!r}{hint} (`rgt profile show P -s gotchas` "
                           "lists a platform's)")
    raise ProfileError(
        f"no gotcha {gotcha_id!r}; ids look like LAM5, AD-DANGER, VAST2, SLURM4, K8S1, U7 "
        "(try `rgt gotcha search TEXT`)"
    )
