"""What a box has cost, what still costs, and the clocks that are running (`rgt ls`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rgt.boxfacts import facts
from rgt.profiles.brief import brief
from rgt.store import LIVE, Box, Run, Store

IDLE_WARNING_S = 30 * 60  # GEN1: the forgotten box


@dataclass
class BoxLine:
    box: Box
    uptime_s: float
    spent: float | None
    live_runs: int
    clocks: list[str]
    still_billing: list[str]
    idle_s: float | None
    walltime_s: float | None  # schedulers bill walltime and fair-share, not dollars
    # live runs waiting on something outside rgt, as their platform last said (platform_run
    # "waiting": a Colab notebook not opened yet, a Kaggle kernel queued): (run, what, since)
    waiting: list[tuple[str, str, float]] = field(default_factory=list)


def box_lines(store: Store, now: float | None = None) -> list[BoxLine]:
    now = now or time.time()
    lines = []
    by_box = store.runs_by_box()  # one query for every box's runs (bench/many_runs.py)
    for box in store.boxes():
        end = box.down_at if box.state == "down" and box.down_at else now
        uptime = end - box.created
        spent = box.rate * uptime / 3600 if box.rate is not None else None
        runs = by_box.get(box.name, [])
        live = [r for r in runs if r.status in LIVE]
        # brief: the two facts shown here, cached beside the store (no schema to build)
        profile = brief(box.profile, store.path.parent / "cache")
        clocks = []
        if box.state == "up":
            clocks = list(profile.danger_clocks[:1])
        idle = None
        if box.state == "up" and not live:
            last = max([r.updated for r in runs], default=box.created)
            idle = now - last
        walltime = None
        if profile.billing == "allocation":
            walltime = sum((r.spec.get("platform_run") or {}).get("walltime_s") or 0
                           for r in runs)
            idle = None  # an idle login node costs nothing; only allocations do
        waits = [(r.id, *w) for r in live if (w := waiting(r)) is not None]
        lines.append(BoxLine(box, uptime, spent, len(live), clocks,
                             facts(box).still_billing or [], idle, walltime, waits))
    return lines


def waiting(run: Run) -> tuple[str, float] | None:
    """What a run waits for outside rgt, as its platform last said (platform_run "waiting": a
    Colab notebook not opened yet, a Kaggle kernel queued), and since when; None: nothing."""
    said = (run.spec.get("platform_run") or {}).get("waiting")
    if not isinstance(said, dict) or not said.get("what"):
        return None
    return str(said["what"]), float(said.get("since") or run.created)
