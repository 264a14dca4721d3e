"""How often to checkpoint: the Young/Daly optimum, measured rather than guessed.

With a mean time between failures (preemptions, kills) μ and a checkpoint cost C, the interval
that minimises expected lost work is W = √(2·μ·C) (Young 1974; Daly 2006 to first order); the
expected overhead at W is about √(2·C/μ). Example: μ = 3 h = 10800 s, C = 30 s → W ≈ 805 s.

`Cadence` measures C (the real stall of each save) and the step time, turns W into a whole
number of steps — rounded *down* — and answers `should_save(step)` with a couple of float
operations, cheap enough to call every step. In a distributed job any one of `world_size`
machines failing kills the job, so the effective μ is μ / world_size.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def young_daly_interval(mtbf_s: float, write_s: float) -> float:
    """Optimal seconds between checkpoints, √(2·mtbf·write). 10800 s, 30 s → ≈ 805 s."""
    if mtbf_s <= 0 or write_s < 0:
        raise ValueError("mtbf_s must be > 0 and write_s >= 0")
    return math.sqrt(2.0 * mtbf_s * write_s)


def expected_overhead(mtbf_s: float, write_s: float, interval_s: float) -> float:
    """First-order fraction of time lost: write_s/interval + interval/(2·mtbf)."""
    return write_s / interval_s + interval_s / (2.0 * mtbf_s)


class Cadence:
    """Decides, each step, whether to checkpoint now.

    >>> cad = Cadence(mtbf_s=3 * 3600, world_size=8, write_s=loaded.write_s if loaded else None)
    >>> for step in range(start, total):
    ...     train_step()
    ...     if cad.should_save(step):
    ...         with cad.timed():          # or cad.record_save(rec.elapsed_s)
    ...             ckpt.save(state, step)

    `should_save` measures the step time itself (an average of the intervals between its calls,
    save time excluded); pass `step_time_s` to fix it. With no measured write time yet it asks
    for one early save to measure it (seed `write_s` from the last checkpoint's `write_s` to
    skip that). `clock` is injectable for simulations. `max_interval_s` caps the interval.
    """

    def __init__(
        self,
        mtbf_s: float,
        *,
        world_size: int = 1,
        write_s: float | None = None,
        step_time_s: float | None = None,
        max_interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        smoothing: float = 0.1,
    ) -> None:
        if mtbf_s <= 0 or world_size < 1:
            raise ValueError("mtbf_s must be > 0 and world_size >= 1")
        self.mtbf_s = mtbf_s
        self.world_size = world_size
        self.write_s = write_s
        self.step_time_s = step_time_s
        self._fixed_step = step_time_s is not None
        self.max_interval_s = max_interval_s
        self._clock = clock
        self._alpha = smoothing
        self._last_t: float | None = None
        self._last_step: int | None = None
        self._excluded = 0.0  # save time to subtract from the current step interval
        self.last_save_step: int | None = None
        self._interval_steps: int | None = None

    @property
    def effective_mtbf_s(self) -> float:
        return self.mtbf_s / self.world_size

    @property
    def interval_s(self) -> float | None:
        if self.write_s is None:
            return None
        w = young_daly_interval(self.effective_mtbf_s, self.write_s)
        return min(w, self.max_interval_s) if self.max_interval_s else w

    @property
    def interval_steps(self) -> int | None:
        """Steps between saves: ⌊W / step time⌋, at least 1; None until both are known."""
        if self._interval_steps is None:
            w, st = self.interval_s, self.step_time_s
            if w is None or not st:
                return None
            self._interval_steps = max(1, math.floor(w / st))
        return self._interval_steps

    def _observe_step(self, step: int) -> None:
        now = self._clock()
        if self._last_t is not None and self._last_step is not None and step > self._last_step:
            dt = (now - self._last_t - self._excluded) / (step - self._last_step)
            if dt > 0 and not self._fixed_step:
                st = self.step_time_s
                self.step_time_s = dt if st is None else st + self._alpha * (dt - st)
                self._interval_steps = None
        self._last_t, self._last_step, self._excluded = now, step, 0.0

    def should_save(self, step: int) -> bool:
        """True when checkpoint `step` is due. Call once per step, after the step."""
        self._observe_step(step)
        if self.last_save_step is None:
            self.last_save_step = step  # start (or resume) point: nothing to lose yet
            return False
        if self.step_time_s is None:
            return False
        if self.write_s is None:
            return True  # measure the real write cost once, early
        n = self.interval_steps
        return n is not None and step - self.last_save_step >= n

    def record_save(self, seconds: float, step: int | None = None) -> None:
        """Report that a save took `seconds` of training time (e.g. `SaveRecord.elapsed_s`)."""
        self.write_s = seconds if self.write_s is None else max(
            1e-9, self.write_s + 0.5 * (seconds - self.write_s)
        )
        self._interval_steps = None
        self._excluded += seconds
        self.last_save_step = step if step is not None else self._last_step

    @contextmanager
    def timed(self, step: int | None = None) -> Iterator[None]:
        """Time the body as one save and `record_save` it."""
        t0 = self._clock()
        yield
        self.record_save(self._clock() - t0, step)
