"""Which of the job's checkpoints a pull brings (`CheckpointPlan`), and what it says of them.

The checkpoints of the home's manifest, as `rgt.ckpt.newest` defines one and orders them
(the last written first); `--checkpoints` says how many of the newest come (`checkpoints_flag`),
the rest stay on the box, left out of the fetch by anchored excludes and named in the evidence.
When every checkpoint brought turns out damaged here, the next older one comes too
(`newest_failed`) and the pull says so (`fallback_note`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rgt.ckpt import newest
from rgt.errors import UserError
from rgt.lifecycle.untrusted import Entry, Manifest, read_manifest, shown


def checkpoints_flag(value: str | None) -> int | None:
    """`--checkpoints latest|all|N`: how many of the newest checkpoints to bring (None: all).
    Left out, `latest` (1)."""
    text = (value or "latest").strip().lower()
    if text == "latest":
        return 1
    if text == "all":
        return None
    if text.isdecimal() and int(text) >= 1:
        return int(text)
    raise UserError(f"--checkpoints {value!r}: say latest (the newest checkpoint that "
                    "verifies, the default), all, or a number N of the newest to bring")


def checkpoint_unit(rel: str) -> newest.Unit | None:
    """The checkpoint REL, a path in the checkpoint home, belongs to (`rgt.ckpt.newest`)."""
    return newest.unit_of(rel)


@dataclass
class _Unit:
    step: int
    is_dir: bool
    files: list[str] = field(default_factory=list)  # a file unit's own files (≤ 2)
    count: int = 0
    bytes: int = 0
    mtimes: list[float | None] = field(default_factory=list)  # the box's, of its files

    @property
    def written(self) -> float | None:
        return newest.written(self.mtimes)


@dataclass
class CheckpointPlan:
    """The checkpoints of a home's manifest, newest first, and how many of them to bring."""

    units: dict[str, _Unit]
    keep: int | None  # None: all
    files: int = 0  # every entry of the home's manifest, checkpoint or not

    @classmethod
    def of(cls, manifest: Manifest, keep: int | None) -> CheckpointPlan:
        units: dict[str, _Unit] = {}
        files = 0
        for entry in read_manifest(manifest.source, manifest.prefix):  # a pass of its own
            files += 1
            found = checkpoint_unit(entry.path.removeprefix(manifest.prefix))
            if found is None:
                continue
            key, step, is_dir = found
            unit = units.setdefault(key, _Unit(step, is_dir))
            unit.count += 1
            unit.bytes += entry.bytes
            unit.mtimes.append(entry.mtime)
            if not is_dir:
                unit.files.append(entry.path.removeprefix(manifest.prefix))
        return cls(units, keep, files)

    @property
    def newest_first(self) -> list[str]:
        """The units by `rgt.ckpt.newest`'s definition: the last written first."""
        return newest.newest_first(self.units, key=lambda k: newest.order_key(
            self.units[k].written, self.units[k].step, k))

    @property
    def kept(self) -> list[str]:
        order = self.newest_first
        return order if self.keep is None else order[: self.keep]

    @property
    def left(self) -> list[str]:
        return [] if self.keep is None else self.newest_first[self.keep:]

    def excludes(self, keys: list[str] | None = None) -> list[str]:
        """rsync-style patterns, anchored at the home, for every checkpoint left on the box
        (or for the units KEYS)."""
        out = []
        for key in self.left if keys is None else keys:
            unit = self.units[key]
            names = [key] if unit.is_dir else unit.files
            for name in names:
                literal = anchored(name)
                # a directory, and what lies under it (for transports that list files flat)
                out += [literal + "/", literal + "/**"] if unit.is_dir else [literal]
        return out

    def summary(self) -> dict[str, Any] | None:
        left = self.left
        if not left:
            return None
        steps = [self.units[k].step for k in left]
        return {"count": len(left), "files": sum(self.units[k].count for k in left),
                "bytes": sum(self.units[k].bytes for k in left), "newest": left[0],
                "steps": [min(steps), max(steps)],
                "names": [shown(k) for k in left[:NAMES_KEPT]]}  # box names, made printable


def anchored(name: str) -> str:
    """An exclude pattern matching exactly NAME (a path in the tree fetched) and no other."""
    return "/" + re.sub(r"([*?\[\\])", r"\\\1", name)


NAMES_KEPT = 200  # checkpoints left on the box named in the evidence (`rgt down` lists them)


def in_units(prefix: str, units: set[str]) -> Callable[[Entry], bool]:
    """Whether an entry of the checkpoint home's manifest belongs to one of UNITS."""
    def belongs(entry: Entry) -> bool:
        found = checkpoint_unit(entry.path.removeprefix(prefix))
        return found is not None and found[0] in units
    return belongs


def _verdicts_of(plan: CheckpointPlan, checked: list[dict[str, Any]]) -> dict[str, bool]:
    """Unit key → whether it verified here, for the plan's units that were checked (a unit
    with any damaged file is damaged: `pull_verify` built each from all its files)."""
    return {c["path"].removeprefix("ckpt/"): c["ok"] for c in checked
            if c["path"].removeprefix("ckpt/") in plan.units}


def newest_failed(plan: CheckpointPlan, checked: list[dict[str, Any]]) -> bool:
    """Whether the kept checkpoints were checked here and none of them verified: then the
    next older one must come (the newest may have been cut short on the box)."""
    verdicts = _verdicts_of(plan, checked)
    kept = [verdicts[k] for k in plan.kept if k in verdicts]
    return bool(kept) and not any(kept)


def fallback_note(plan: CheckpointPlan, checked: list[dict[str, Any]]) -> str | None:
    """Say which checkpoint the pull fell back to when the newest ones were damaged."""
    verdicts = _verdicts_of(plan, checked)
    damaged: list[str] = []
    for key in plan.kept:
        if key not in verdicts:
            continue
        if verdicts[key]:
            if not damaged:
                return None
            return (f"the newest checkpoint {damaged[0]} is damaged on the box (see the "
                    f"warnings){' as are ' + ', '.join(damaged[1:]) if damaged[1:] else ''}; "
                    f"also brought {shown(key)}, the newest intact one (step "
                    f"{plan.units[key].step})")
        damaged.append(shown(key))
    if damaged:
        return (f"no intact checkpoint in the job's checkpoint home: every one brought is "
                f"damaged on the box ({', '.join(damaged[:5])}"
                f"{' …' if len(damaged) > 5 else ''})")
    return None
