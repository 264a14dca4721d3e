"""Preemption: turn SIGTERM / SIGUSR1 into a flag the training loop checks at a safe point.

Slurm sends SIGTERM at walltime (and the signal chosen with ``--signal=USR1@120`` ahead of
it), Kubernetes and spot reclaims send SIGTERM, `docker stop` too. Checkpointing *inside* a
signal handler is unsafe (the handler can run in the middle of an optimizer step or of a
save); the handler here only records the signal. The loop checks the flag after a step,
saves, and exits with `EXIT_PREEMPTED` (85), which a requeue wrapper reads as "saved, requeue
me" — distinct from 0 (done), 1 (crash) and 128+N (killed by signal N).
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

EXIT_PREEMPTED = 85
"""Exit status meaning: preempted, state saved, run again to resume."""

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class PreemptionFlag:
    """Install handlers that only set a flag; restore the previous handlers on close.

    >>> with PreemptionFlag() as preempted:
    ...     for step in ...:
    ...         train_step()
    ...         if preempted:
    ...             ckpt.save(state, step)
    ...             sys.exit(EXIT_PREEMPTED)
    """

    def __init__(self, signals: tuple[int, ...] = DEFAULT_SIGNALS, *, install: bool = True):
        self.signals = tuple(signals)
        self.signum: int | None = None
        self.count = 0
        self._previous: dict[int, Any] = {}
        if install:
            self.install()

    def install(self) -> PreemptionFlag:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("PreemptionFlag must be installed from the main thread")
        for sig in self.signals:
            if sig not in self._previous:
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        # Only record: no I/O, no locks, no checkpointing here (SLURM1).
        self.signum = signum
        self.count += 1

    def set(self, signum: int = signal.SIGTERM) -> None:
        """Raise the flag by hand (tests, or a watchdog noticing a preemption notice)."""
        self._handler(signum, None)

    @property
    def is_set(self) -> bool:
        return self.signum is not None

    def __bool__(self) -> bool:
        return self.signum is not None

    @property
    def signal_name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    def close(self) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        self._previous.clear()

    def __enter__(self) -> PreemptionFlag:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.close()


def exit_preempted() -> None:
    """Exit with `EXIT_PREEMPTED` after flushing stdio."""
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(EXIT_PREEMPTED)
