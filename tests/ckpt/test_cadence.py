"""Young/Daly cadence: the formula, step rounding, and a seeded Poisson-preemption simulation."""

from __future__ import annotations

import math
import random

import pytest

from rgt.ckpt import Cadence, young_daly_interval
from rgt.ckpt.cadence import expected_overhead

MU, C = 10800.0, 30.0


def test_worked_example() -> None:
    w = young_daly_interval(MU, C)
    assert w == pytest.approx(805, abs=0.5)
    assert w == pytest.approx(math.sqrt(2 * MU * C))
    with pytest.raises(ValueError):
        young_daly_interval(0, 30)


def test_rounds_down_to_steps_and_world_multiplier() -> None:
    cad = Cadence(mtbf_s=MU, write_s=C, step_time_s=7.0)
    assert cad.interval_steps == math.floor(young_daly_interval(MU, C) / 7.0) == 114
    big = Cadence(mtbf_s=8 * MU, world_size=8, write_s=C, step_time_s=7.0)
    assert big.interval_steps == 114  # 8 machines of MTBF 8μ fail as often as one of μ
    assert Cadence(mtbf_s=MU, world_size=4, write_s=C, step_time_s=7.0).interval_steps == 57
    assert Cadence(mtbf_s=MU, write_s=C, step_time_s=5000.0).interval_steps == 1


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_measures_step_and_write_time() -> None:
    clock = FakeClock()
    cad = Cadence(mtbf_s=MU, clock=clock)  # knows neither step nor write time
    decisions = []
    for step in range(1, 400):
        clock.t += 10.0  # a 10 s step
        if cad.should_save(step):
            decisions.append(step)
            clock.t += 30.0  # the save takes 30 s
            cad.record_save(30.0)
    assert decisions[0] == 2  # the first chance to measure the write cost
    assert cad.step_time_s == pytest.approx(10.0)  # save time excluded
    assert cad.write_s == pytest.approx(30.0)
    gaps = {b - a for a, b in zip(decisions[1:], decisions[2:], strict=False)}
    assert gaps == {80}  # floor(805 / 10)


class Every:
    """A fixed policy: save every `n` steps."""

    def __init__(self, n: int) -> None:
        self.n = n

    def should_save(self, step: int) -> bool:
        return step % self.n == 0

    def record_save(self, seconds: float) -> None:
        pass


def simulate(new_policy, *, total_steps: int, step_s: float, seed: int) -> float:
    """Run a job under exponential failures (mean MU); return the fraction of time lost."""
    rng = random.Random(seed)
    clock = FakeClock()
    next_fail = rng.expovariate(1 / MU)
    step = committed = 0
    policy = new_policy(clock)
    while step < total_steps:
        if clock.t + step_s > next_fail:  # dies mid-step: back to the last checkpoint
            clock.t, step = next_fail, committed
            next_fail = clock.t + rng.expovariate(1 / MU)
            policy = new_policy(clock)  # a new process
            continue
        clock.t += step_s
        step += 1
        if policy.should_save(step):
            if clock.t + C > next_fail:  # dies mid-save
                clock.t, step = next_fail, committed
                next_fail = clock.t + rng.expovariate(1 / MU)
                policy = new_policy(clock)
                continue
            clock.t += C
            committed = step
            policy.record_save(C)
    return 1 - total_steps * step_s / clock.t


def test_simulated_lost_work_near_optimum_and_beats_every_epoch() -> None:
    step_s = 30.0
    total = 700_000  # 2.1e7 s of work: ~2000 preemptions
    optimum = math.sqrt(2 * C / MU)  # ≈ 0.0745, first-order expected overhead at W*
    assert expected_overhead(MU, C, young_daly_interval(MU, C)) == pytest.approx(optimum)

    def cadence(clock):
        # a restarted process seeds write_s from the checkpoint's recorded write time
        return Cadence(mtbf_s=MU, write_s=C, clock=clock)

    epoch_steps = 3600 // int(step_s)  # an epoch is an hour here

    def every_epoch(clock):
        return Every(epoch_steps)

    lost_cadence = simulate(cadence, total_steps=total, step_s=step_s, seed=1234)
    lost_epoch = simulate(every_epoch, total_steps=total, step_s=step_s, seed=1234)
    print(f"lost: cadence {lost_cadence:.4f}, optimum {optimum:.4f}, every-epoch {lost_epoch:.4f}")
    assert abs(lost_cadence - optimum) / optimum < 0.10, (lost_cadence, optimum)
    assert lost_cadence < lost_epoch, (lost_cadence, lost_epoch)
    # and a cadence 4x too frequent or 4x too rare is measurably worse
    for factor in (0.25, 4.0):
        n = max(1, int(young_daly_interval(MU, C) * factor / step_s))
        off = simulate(lambda clock, n=n: Every(n),
                       total_steps=total, step_s=step_s, seed=1234)
        print(f"lost: every {n} steps ({factor}x W*) {off:.4f}")
        assert off > lost_cadence * 1.2, (factor, off, lost_cadence)
