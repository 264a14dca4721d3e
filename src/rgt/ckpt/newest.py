"""Which checkpoint is the newest: one definition for `rgt watch`, `rgt pull`, `rgt resume`
and `rgt ckpt ls`.

The newest checkpoint is the last one written completely: the one whose newest file has the
latest modification time. Formats write a completion marker last (rgt.ckpt's sidecar, HF's
`trainer_state.json`, accelerate's `random_states_N.pkl`), so that file's time is the save's.
The number in a name orders only the checkpoints of one attempt: a trainer that resumed may
count from a lower number again (accelerate's example, resumed, saved `step_620` after the old
`step_1640`), so the highest number can be the stale one. The number breaks ties only, between
checkpoints whose times are equal (a filesystem with coarse times, a copy that stamped them
alike), and orders checkpoints whose times nobody recorded.

A checkpoint is a unit: a directory named with a step (`checkpoint-500/`, `step_620/`,
`global_step500/`: the outermost such directory), an rgt.ckpt save (`ckpt-N.pt` with its
sidecar), or a `.ckpt`/`.pt`/`.safetensors` file named with a step. A unit with any damaged
file is damaged as a whole (`rgt.ckpt.formats.check_dir` for directories). Standard library
only, Python 3.8: this module ships to the box with `rgt.ckpt`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple, TypeVar

from rgt.ckpt import formats

_RGT_SAVE = re.compile(r"^ckpt-(\d{10,})\.(?:pt|json)$")  # rgt.ckpt's data file and sidecar
_STEP_FILES = ("lightning", "torch", "safetensors")

T = TypeVar("T")


class Unit(NamedTuple):
    """The checkpoint a path belongs to: its key (a path in the home), step, and whether it
    is a directory."""

    key: str
    step: int
    is_dir: bool


def unit_of(rel: str) -> Unit | None:
    """The checkpoint that REL, a path relative to a checkpoint home, belongs to; None for a
    file that is no ordered checkpoint (`last.ckpt`, a tokenizer, a `latest` pointer). Names
    may come from the box: they only choose, and what is fetched is verified."""
    parts = rel.split("/")
    for i, part in enumerate(parts[:-1]):
        step = formats.step_from_name(part)
        if step is not None:  # checkpoint-500/, step_620/: the outermost one
            return Unit("/".join(parts[: i + 1]), step, True)
    saved = _RGT_SAVE.match(parts[-1])
    if saved:
        return Unit("/".join([*parts[:-1], f"ckpt-{saved.group(1)}"]), int(saved.group(1)),
                    False)
    if formats.kind_of_name(parts[-1]) in _STEP_FILES:
        step = formats.step_from_name(parts[-1])
        if step is not None:
            return Unit(rel, step, False)
    return None


def written(times: Iterable[float | None]) -> float | None:
    """When a unit was written: the newest of its files' times (None: none known). Rounded
    to the millisecond, the precision rgt's manifests and probes keep."""
    known = [t for t in times if isinstance(t, (int, float)) and math.isfinite(t)]
    return round(max(known), 3) if known else None


def order_key(when: float | None, step: int | None, name: str) -> tuple:
    """The sort key of the definition, ascending from oldest to newest: the time a unit was
    written, then its step, then its name (so the order is total and repeatable)."""
    return (when is not None, when or 0.0, step is not None, step or 0, name)


def newest_first(items: Iterable[T], key: Callable[[T], tuple]) -> list[T]:
    """ITEMS newest first, KEY giving each one's `order_key`."""
    return sorted(items, key=key, reverse=True)


def written_here(path: Path) -> float | None:
    """When a checkpoint on this machine was written: the newest mtime of its files (an
    rgt.ckpt file with its sidecar; a directory with everything under it)."""
    path = Path(path)
    times: list[float | None] = []
    if path.is_dir():
        for current, _dirs, files in os.walk(path):
            times += [_mtime(os.path.join(current, name)) for name in files]
    else:
        times.append(_mtime(str(path)))
        if _RGT_SAVE.match(path.name):
            times.append(_mtime(str(path.with_suffix(".json"))))
    return written(times)


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def newest_listed(entries: Iterable[dict], kinds: tuple[str, ...]) -> dict | None:
    """The newest checkpoint among a checkpoint home's listed entries (`{"name", "mtime",
    "dir"}`, the on-box probe's `checkpoint_entries`: `rgt watch`), as {name, step, mtime}:
    a unit's time is its newest entry's. A file of KINDS that no step orders (`last.ckpt`)
    is a candidate of its own, its step unknown. NAME is a path in the home (a unit's
    directory, or its data file rather than an rgt.ckpt sidecar)."""
    units: dict[str, list] = {}  # key → [step, name, mtimes]
    for entry in entries:
        name = "/".join(p for p in str(entry.get("name") or "").split("/") if p not in ("", "."))
        if not name:
            continue
        if entry.get("dir"):
            step = formats.step_from_name(name) if "/" not in name else None
            found = Unit(name, step, True) if step is not None else None
            if found is None:
                continue
        else:
            found = unit_of(name)
            if found is None and formats.kind_of_name(name.rsplit("/", 1)[-1]) not in kinds:
                continue
        key = found.key if found is not None else name
        unit = units.setdefault(key, [found.step if found else None, key, []])
        if found is not None and not found.is_dir and not name.endswith(".json"):
            unit[1] = name  # an rgt.ckpt save is named by its data file
        unit[2].append(entry.get("mtime"))
    if not units:
        return None
    key = max(units, key=lambda k: order_key(written(units[k][2]), units[k][0], k))
    step, name, times = units[key]
    return {"name": name, "step": step, "mtime": written(times)}
