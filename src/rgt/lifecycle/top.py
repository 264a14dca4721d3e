"""`rgt top`: every box and run at once — money, clocks, progress — for a live table.

Two speeds: asking the boxes (one probe per live run, all boxes at once, each probe in its
own thread with its own store connection) happens every few seconds; the clocks (up-time,
money, ages) are recomputed from the store at every frame, so they tick while a slow box is
still being asked.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rgt.errors import UserError
from rgt.lifecycle import money, progress
from rgt.lifecycle.watch import ENDED_EVENT, refresh, step_samples
from rgt.store import LIVE, Store

RECENT_S = 15 * 60  # an ended run stays on the board this long (unless it still needs a pull)
ENDED_SHOWN = 3  # ended runs per box on the board, newest first; the rest are counted
PROBE_WORKERS = 8


@dataclass
class RunRow:
    box: str
    id: str
    job: str
    status: str
    age_s: float
    progress: str  # `step 120/1000 · loss 2.136 · 5.02 steps/s · ETA 3m00s`
    checkpoint_age_s: float | None
    pulled: bool
    note: str = ""  # why the status may be stale (the box did not answer), or what it waits for


@dataclass
class Frame:
    at: float
    boxes: list[money.BoxLine]
    runs: dict[str, list[RunRow]] = field(default_factory=dict)
    # box -> its ended runs still to pull that the board has no room for (`rgt runs BOX`)
    more: dict[str, int] = field(default_factory=dict)

    @property
    def spent(self) -> float:
        return sum(line.spent or 0.0 for line in self.boxes)

    @property
    def burn_per_hour(self) -> float:
        return sum(line.box.rate or 0.0 for line in self.boxes if line.box.state == "up")


class Prober:
    """The latest probe of every live run on an up box, refreshed by `probe_all`."""

    def __init__(self, store_path) -> None:
        self.store_path = store_path
        self.lock = threading.Lock()
        self.summaries: dict[str, dict[str, Any]] = {}
        self.errors: dict[str, str] = {}
        self.finished_at: float | None = None

    def probe_all(self) -> None:
        store = Store(self.store_path)
        live = store.runs_by_box(LIVE)  # the live runs only: one query, not one per box
        targets = [(box, run) for box in store.boxes() if box.state == "up"
                   for run in live.get(box.name, [])]
        with ThreadPoolExecutor(max_workers=PROBE_WORKERS) as pool:
            list(pool.map(lambda target: self._probe(*target), targets))
        self.finished_at = time.time()

    def _probe(self, box, run) -> None:
        try:
            summary = refresh(Store(self.store_path), box, run)
        except UserError as err:
            with self.lock:
                self.errors[run.id] = str(err).splitlines()[0][:200]
            return
        with self.lock:
            self.summaries[run.id] = summary
            self.errors.pop(run.id, None)


def frame(store: Store, prober: Prober, *, all_boxes: bool = False,
          now: float | None = None) -> Frame:
    """What the table shows now: the store's boxes and runs, the prober's latest facts."""
    now = now or time.time()
    shown = [line for line in money.box_lines(store, now)
             if line.box.state == "up" or all_boxes or line.still_billing]
    result = Frame(now, shown)
    verdicts = store.latest_verdicts("pull-verified")  # one query, not one per run
    by_box = store.runs_by_box()  # and one for every box's runs
    for line in shown:
        runs, ended = [], []
        for run in by_box.get(line.box.name, []):
            pulled = verdicts.get((run.box, run.id), False)
            if run.status not in LIVE and pulled and now - run.updated > RECENT_S:
                continue
            if run.status not in LIVE and line.box.state != "up" and pulled:
                continue
            (runs if run.status in LIVE else ended).append((run, pulled))
        # a month of runs never pulled would be thousands of rows: the newest few, counted
        keep = {id(run) for run, _ in ended[-ENDED_SHOWN:]}
        result.more[line.box.name] = len(ended) - len(keep)
        result.runs[line.box.name] = [_row(store, prober, run, pulled, now)
                                      for run, pulled in sorted(runs + ended,
                                                                key=lambda r: r[0].created)
                                      if run.status in LIVE or id(run) in keep]
    return result


def _row(store: Store, prober: Prober, run, pulled: bool, now: float) -> RunRow:
    with prober.lock:
        summary = prober.summaries.get(run.id) or {}
        error = prober.errors.get(run.id, "")
    if not summary and run.status not in LIVE:  # its last progress, as watch saw it end
        kept = store.latest_event(ENDED_EVENT, run.box, run.id)
        if kept is not None and isinstance(kept["detail"], dict):
            summary = kept["detail"]
    training = progress.with_rate(summary.get("training") or {},
                                  step_samples(store, run.box, run.id))
    ckpt = summary.get("last_checkpoint") or {}
    mtime = ckpt.get("mtime")
    note = f"last seen {run.status}; {error}" if error else ""
    wait = money.waiting(run) if run.status in LIVE else None
    if not note and wait is not None:  # a notebook not opened, a queued kernel
        what, since = wait
        note = f"waiting {max(0.0, now - since) // 60:.0f} min: {what}"
    return RunRow(
        box=run.box, id=run.id, job=run.job, status=run.status, age_s=now - run.created,
        progress=progress.describe(training, live=run.status in LIVE),
        checkpoint_age_s=now - mtime if isinstance(mtime, int | float) else None,
        pulled=pulled, note=note)


def as_json(f: Frame) -> dict[str, Any]:
    """The frame as `rgt top --once --json` prints it."""
    return {
        "at": f.at, "spent_usd": round(f.spent, 4), "burn_usd_per_hour": f.burn_per_hour,
        "boxes": [{"name": ln.box.name, "profile": ln.box.profile, "state": ln.box.state,
                   "uptime_s": ln.uptime_s, "rate_usd_per_hour": ln.box.rate,
                   "spent_usd": ln.spent, "walltime_s": ln.walltime_s, "idle_s": ln.idle_s,
                   "live_runs": ln.live_runs, "still_billing": ln.still_billing,
                   "runs": [vars(r) for r in f.runs.get(ln.box.name, [])],
                   "ended_runs_not_shown": f.more.get(ln.box.name, 0)}
                  for ln in f.boxes]}
