"""The two facts `rgt ls` shows of a box's platform, without validating its whole profile.

`rgt ls` is typed often and prices every box. Loading a profile validates its whole file, and
the first load in a process builds the pydantic schema's models: together more than the rest
of `ls` (bench/startup.py). What `ls` shows of a platform is two facts — its kind (a Slurm box
is billed in walltime, not dollars) and its danger clocks. Those are kept beside the store in
RGT_HOME/cache/profile-briefs.json, keyed by the profile file's path, size and mtime, and
written only from a profile that validated: an edited, added or shadowing file is a miss and is
loaded (and validated) afresh. The file is rgt's own; anything odd in it is a miss too.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from rgt.profiles.files import profile_files

VERSION = 2  # bumped when Brief changes: old entries are misses


@dataclass(frozen=True)
class Brief:
    kind: str
    danger_clocks: tuple[str, ...]
    billing: str = "hourly"  # facts.billing: "allocation" is walltime, not dollars


def brief(name: str, cache_dir: Path) -> Brief:
    """The profile's kind and danger clocks, from the cache in `cache_dir` (RGT_HOME/cache)
    when the profile's file is unchanged."""
    path = profile_files().get(name)
    try:
        stat = path.stat() if path else None
    except OSError:
        stat = None
    if path is None or stat is None:
        return _from_profile(name)  # load_profile says what is wrong, in its words
    key, stamp = str(path), [VERSION, stat.st_mtime_ns, stat.st_size]
    cache_file = cache_dir / "profile-briefs.json"
    cache = _read(cache_file)
    entry = cache.get(key)
    if isinstance(entry, dict) and entry.get("stamp") == stamp:
        kind, clocks = entry.get("kind"), entry.get("danger_clocks")
        billing = entry.get("billing")
        if isinstance(kind, str) and isinstance(clocks, list) and isinstance(billing, str) \
                and all(isinstance(c, str) for c in clocks):
            return Brief(kind, tuple(clocks), billing)
    found = _from_profile(name)
    cache[key] = {"stamp": stamp, "kind": found.kind, "danger_clocks": list(found.danger_clocks),
                  "billing": found.billing}
    _write(cache_file, cache)
    return found


def _from_profile(name: str) -> Brief:
    from rgt.profiles.loader import load_profile  # validates: YAML + pydantic

    profile = load_profile(name)
    return Brief(profile.facts.kind, tuple(profile.surface.danger_clocks), profile.facts.billing)


def _read(cache_file: Path) -> dict:
    """The cache file's entries, read once per process while the file is unchanged (`ls` of
    a hundred boxes asks it a hundred times)."""
    try:
        stat = cache_file.stat()
        seen = _READ.get(str(cache_file))
        if seen is not None and seen[0] == (stat.st_mtime_ns, stat.st_size):
            return seen[1]
        data = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    data = data if isinstance(data, dict) else {}
    _READ[str(cache_file)] = ((stat.st_mtime_ns, stat.st_size), data)
    return data


_READ: dict[str, tuple[tuple[int, int], dict]] = {}


def _write(cache_file: Path, cache: dict) -> None:
    """Best effort, whole or not at all: a read-only or full RGT_HOME only costs speed."""
    temporary = cache_file.with_name(f".{cache_file.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        cache_file.parent.mkdir(exist_ok=True)
        temporary.write_text(json.dumps(cache, ensure_ascii=False), encoding="utf-8")
        os.replace(temporary, cache_file)
    with contextlib.suppress(OSError):
        temporary.unlink(missing_ok=True)
