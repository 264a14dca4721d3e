"""The progress of a push or a pull as a Rich bar: bytes, rate, time left.

A transfer reports ``progress(done, total)`` (rgt.transport.base.Progress), from whichever of
its streams moved bytes last; this turns that into one bar per transfer (a pull fetches the
outputs, then the checkpoint home: two bars). Nothing at all when stdout is not a terminal:
scripts and pipes get the result lines only.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from rgt.cli.console import console
from rgt.transport.base import Progress as OnProgress


@contextlib.contextmanager
def transfer_bar(label: str, *, quiet: bool = False) -> Iterator[OnProgress | None]:
    """A progress callback drawing LABEL's bar while the block runs (None off a terminal,
    or when QUIET: a --json document alone on stdout)."""
    if quiet or not sys.stdout.isatty():
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
               TransferSpeedColumn(), TimeRemainingColumn())
    lock = threading.Lock()
    with Progress(*columns, console=console, transient=True) as bar:
        state = {"task": None, "total": -1, "done": 0, "n": 0}

        def update(done: int, total: int) -> None:
            with lock:
                if state["task"] is None or total != state["total"] or done < state["done"]:
                    state["n"] += 1  # a new transfer (the pull's second one): its own bar
                    name = label if state["n"] == 1 else f"{label} ({state['n']})"
                    state["task"] = bar.add_task(name, total=total or None)
                    state["total"] = total
                state["done"] = done
                bar.update(state["task"], completed=done, total=total or None)

        yield update
