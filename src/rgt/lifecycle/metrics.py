"""`rgt plot`: the metric series a run logged, from its box or from its pulled log.

The log is read the way the on-box probe reads it (`rgt.onbox.probe.parse_metrics`), through
the trust boundary (`untrusted.read_metric_log`), so a live box and a pulled copy give the
same series. The x axis is the trainer's own step where its lines carry one, else the epoch,
else the metric line's number.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from rgt.errors import UserError
from rgt.lifecycle.untrusted import MetricLog, open_inside, read_metric_log, unsafe_path
from rgt.lifecycle.watch import read_log
from rgt.onbox.probe import EPOCH_KEYS, LOSS_KEYS, METRIC_KEY_RE, STEP_KEYS
from rgt.store import Box, Run, Store

LOG_TAIL_BYTES = 64 << 20  # as `rgt pull` fetches a log: its last 64 MiB
LOG_TAIL_LINES = 500_000  # from a box, through its platform (`logs`): lines, not bytes


@dataclass
class Series:
    box: str
    run: str
    source: str  # "box" or the pulled log's path
    x_label: str  # step | epoch | line
    series: dict[str, list[tuple[float, float]]]
    notes: list[str] = field(default_factory=list)

    def ordered(self) -> list[str]:
        """Loss-like keys first, then other metrics (acc, ppl ...), then the rest (lr ...)."""
        def rank(key: str) -> tuple[int, int, str]:
            known = LOSS_KEYS.index(key) if key in LOSS_KEYS else len(LOSS_KEYS)
            kind = 0 if "loss" in key.lower() else 1 if METRIC_KEY_RE.search(key) else \
                3 if key == "epoch" else 2
            return kind, known, key
        return sorted(self.series, key=rank)


def metric_series(store: Store, box_name: str, run_id: str | None, *, pulled: bool = False,
                  cell: int | None = None) -> Series:
    """The run's metric series: from the box while it is up (unless `pulled`), else from the
    log `rgt pull` brought back."""
    box = store.box(box_name)
    run = store.run(box.name, run_id)
    notes: list[str] = []
    data = None
    if not pulled and box.state == "up":
        try:
            data, source = fetch_log(box, run, cell), "box"
        except UserError as err:
            if pulled_log_path(store, run) is None:
                raise
            notes.append(f"the box did not answer ({err}); plotting the pulled log")
    if data is None:
        if cell is not None:
            raise UserError("--cell reads a sweep cell's log on its box; a pull keeps only "
                            "the run's own log")
        data, source = read_pulled_log(store, box, run)
    log = read_metric_log(data)
    if log.skipped_keys:
        notes.append("left out (not a finite number, or not a readable name): "
                     + ", ".join(sorted(log.skipped_keys)[:5]))
    x_label, series = to_series(log)
    if not series:
        raise UserError(f"run {run.id}'s log ({source}) holds no metric lines yet (rgt reads "
                        "`step=N loss=X`, `iter N: loss X`, JSON lines and Hugging Face dict "
                        "lines); does the trainer print its loss?", exit_code=1)
    return Series(box.name, run.id, source, x_label, series, notes)


def to_series(log: MetricLog) -> tuple[str, dict[str, list[tuple[float, float]]]]:
    """(x label, {key: [(x, y), ...]}): x is the step when most metric lines carry one (a line
    without one, like an eval line, takes the last step seen), else the epoch, else the line's
    number among the metric lines. The step and the epoch are where the run is, never
    plotted as metrics of their own."""
    with_step = sum(1 for step, _, _ in log.records if step is not None)
    with_epoch = sum(1 for _, epoch, _ in log.records if epoch is not None)
    total = len(log.records)
    x_label = "step" if with_step * 2 >= total and with_step else \
        "epoch" if with_epoch == total and total else "line"
    series: dict[str, list[tuple[float, float]]] = {}
    last_step = None
    for number, (step, epoch, values) in enumerate(log.records, 1):
        last_step = step if step is not None else last_step
        x = {"step": last_step, "epoch": epoch, "line": number}[x_label]
        if x is None:
            continue
        for key, value in values.items():
            if key in STEP_KEYS or key in EPOCH_KEYS:  # progress, not metrics: a flat line
                continue
            series.setdefault(key, []).append((float(x), value))
    return x_label, series


def fetch_log(box: Box, run: Run, cell: int | None = None) -> bytes:
    """The last LOG_TAIL_LINES lines of the run's log (or a sweep cell's), asked of its
    platform as `rgt logs` asks it."""
    cells = (run.spec.get("platform_run") or {}).get("cells") or 0
    if cells and cell is None:
        raise UserError(f"run {run.id} is a sweep of {cells} cells; pick one with --cell N")
    return read_log(box, run, LOG_TAIL_LINES, cell).encode("utf-8", "surrogateescape")


def pulled_log_path(store: Store, run: Run) -> tuple[str, str] | None:
    """(pull directory, log name in it) of the newest pull of RUN that fetched its log."""
    rows = store.db.execute(
        "SELECT detail FROM events WHERE box=? AND run=? AND kind='pull' ORDER BY id DESC",
        (run.box, run.id)).fetchall()
    for (detail,) in rows:
        dest = json.loads(detail).get("dest")
        name = f"logs/{run.id}.log"
        if isinstance(dest, str) and unsafe_path(name) is None and \
                os.path.isfile(os.path.join(dest, name)):
            return dest, name
    return None


def read_pulled_log(store: Store, box: Box, run: Run) -> tuple[bytes, str]:
    found = pulled_log_path(store, run)
    if found is None:
        why = "is down" if box.state != "up" else "was asked for the pulled copy"
        raise UserError(f"box {box.name} {why} and run {run.id} has no pulled log; "
                        f"`rgt pull {box.name} {run.id}` fetches it (while the box is up)")
    dest, name = found
    fd = open_inside(dest, name)  # the pulled tree came from the box: no link followed
    with os.fdopen(fd, "rb") as handle:
        handle.seek(max(0, os.fstat(handle.fileno()).st_size - LOG_TAIL_BYTES))
        return handle.read(), os.path.join(dest, name)
