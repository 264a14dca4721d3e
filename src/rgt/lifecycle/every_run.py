"""`--all` on `cancel` and `pull`: which of a box's runs the one command acts on.

`pull --all` takes exactly the runs `rgt down` would refuse over and that have ended — judged
by the same Iron Law (rgt.lifecycle.down.plan_down), so after it succeeds the refusal it
settles is gone, and a run already pulled and verified after its end is not fetched again.
`cancel --all` takes the runs the box says are live now, not those the store last saw live.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from rgt.errors import UserError
from rgt.lifecycle import down
from rgt.lifecycle.boxes import connect
from rgt.lifecycle.watch import refresh
from rgt.store import LIVE, Run, Store


@dataclass
class ToPull:
    runs: list[Run] = field(default_factory=list)  # ended, not yet pulled and verified
    live: list[Run] = field(default_factory=list)  # still running: pulled once they end
    settled: int = 0  # already pulled and verified after their end (or superseded)


def runs_to_pull(store: Store, box_name: str) -> ToPull:
    """The box's runs whose results `down` does not yet count as here, by its own verdicts."""
    plan = down.plan_down(store, box_name)
    if plan.resumed is not None:
        raise UserError(f"a `rgt down {box_name}` began and did not finish; `rgt down "
                        f"{box_name}` finishes it (its runs were judged then)")
    if plan.unreachable:
        raise UserError(f"box {box_name} does not answer, so no run can be pulled from it "
                        f"({plan.unreachable})")
    by_id = {run.id: run for run in store.runs(plan.box.name)}
    found = ToPull()
    for run_id, verdict in plan.verdicts.items():
        if verdict == "unverified":
            found.runs.append(by_id[run_id])
        elif verdict == "live":
            found.live.append(by_id[run_id])
        else:
            found.settled += 1
    return found


def live_runs(store: Store, box_name: str) -> list[Run]:
    """The box's runs that are live as the box says now (each live-looking record asked)."""
    box = store.box(box_name)
    if box.state != "up":
        raise UserError(f"box {box_name} is {box.state}; its runs ended with it")
    maybe = [run for run in store.runs(box.name) if run.status in LIVE]
    if not maybe:
        return []
    transport = connect(box)
    try:
        for run in maybe:
            with contextlib.suppress(UserError):  # unanswered: it is as last seen
                run.status = refresh(store, box, run, transport)["status"]
    finally:
        transport.close()
    return [run for run in maybe if run.status in LIVE]
