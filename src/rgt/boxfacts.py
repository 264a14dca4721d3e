"""What rgt keeps about a box beyond its connection and directories, as typed fields.

The store keeps these in one JSON column (`Box.extra`), written by `up` (rgt.remote.register),
by a renting platform (its instance id, notes, what still bills) and by `down` / `dismiss`
(who stopped the box, the console step it waits for). Core code (cli, lifecycle, remote,
agent) reads them here, parsed once, each with its type, instead of looking keys up in the
bag; a value of the wrong shape (a store from an older rgt, a hand edit) reads as absent.
What a platform alone understands stays under `own`, the rest of the bag, which only that
platform reads. The store's format does not change: `extra` is still what is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rgt.store import Box

# the keys core code reads; everything else in `extra` is the platform's own
CORE_KEYS = ("instance_id", "uname", "python", "python_version", "python_executable",
             "created_dirs", "still_billing", "notes", "awaiting_console", "stopped_by",
             "dismissed_billing", "at_risk", "nodes")


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    return str(value) if isinstance(value, (str, int)) else None


def _instance(value: Any) -> str | int | None:
    if isinstance(value, bool) or value in (None, ""):
        return None
    return value if isinstance(value, (str, int)) else None


def _texts(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [str(item) for item in value if isinstance(item, (str, int, float))]


@dataclass(frozen=True)
class BoxFacts:
    """One box's `extra`, typed. None: the store does not say (never a guessed default)."""

    # what the platform's control plane calls the machine rgt rented, as the API gave it (a
    # number on some); None: not rented through an API (a box registered with --ssh)
    instance_id: str | int | None = None
    uname: str | None = None                  # `uname -sm` at `up`
    python: str | None = None                 # the interpreter every on-box script runs with
    python_version: str | None = None
    python_executable: str | None = None
    created_dirs: list[str] = field(default_factory=list)  # what `up` made: `down` may delete
    # what keeps billing after release, as the platform said; None: it said nothing (the
    # profile's facts speak then), []: it looked and found nothing
    still_billing: list[str] | None = None
    notes: list[str] = field(default_factory=list)  # lines the platform wants shown at `up`
    awaiting_console: dict[str, Any] | None = None  # the console step `down` waits for
    stopped_by: str | None = None             # "rgt" or "you" once the box is down
    dismissed_billing: dict[str, Any] | list[Any] | None = None
    at_risk: list[dict[str, Any]] = field(default_factory=list)  # what `down` said may be lost
    machines: int = 1  # a group of machines (rgt.remote.group reads its `nodes`): how many
    own: dict[str, Any] = field(default_factory=dict)  # the platform's own fields

    @classmethod
    def parse(cls, extra: dict[str, Any] | None) -> BoxFacts:
        extra = extra if isinstance(extra, dict) else {}
        awaiting = extra.get("awaiting_console")
        dismissed = extra.get("dismissed_billing")
        return cls(
            instance_id=_instance(extra.get("instance_id")),
            uname=_text(extra.get("uname")),
            python=_text(extra.get("python")) or None,
            python_version=_text(extra.get("python_version")),
            python_executable=_text(extra.get("python_executable")),
            created_dirs=_texts(extra.get("created_dirs")) or [],
            still_billing=_texts(extra.get("still_billing")),
            notes=_texts(extra.get("notes")) or [],
            awaiting_console=awaiting if isinstance(awaiting, dict) and awaiting else None,
            stopped_by=_text(extra.get("stopped_by")),
            dismissed_billing=dismissed if isinstance(dismissed, (dict, list)) and dismissed
            else None,
            at_risk=[r for r in extra.get("at_risk") or [] if isinstance(r, dict)]
            if isinstance(extra.get("at_risk"), list) else [],
            machines=max(1, len(extra["nodes"])) if isinstance(extra.get("nodes"), list) else 1,
            own={k: v for k, v in extra.items() if k not in CORE_KEYS},
        )

    @property
    def rented(self) -> bool:
        """Whether rgt rented this box through the platform's API (it has an instance id)."""
        return self.instance_id is not None


def facts(box: Box) -> BoxFacts:
    """The box's facts, parsed from its `extra`."""
    return BoxFacts.parse(box.extra)
