"""Training progress as `rgt watch` shows it: step, loss, rate, ETA.

The summary's `training` facts (`rgt.remote.summary.training`) gain a rate from the probes
rgt stored when the log printed none; a value nobody reported is left out: no total, no ETA.
"""

from __future__ import annotations

from typing import Any


def with_rate(info: dict[str, Any], samples: list[tuple[float, int]]) -> dict[str, Any]:
    """Steps/s between the first and last (time, step) sample when the log gave no rate;
    an ETA only when a total is known."""
    if info.get("rate") is None and len(samples) >= 2:
        (t0, s0), (t1, s1) = samples[0], samples[-1]
        if t1 > t0 and s1 > s0:
            info = {**info, "rate": (s1 - s0) / (t1 - t0)}
    if info.get("eta_s") is None and info.get("rate") and info.get("total") and \
            info.get("step") is not None:
        info = {**info, "eta_s": max(0.0, (info["total"] - info["step"]) / info["rate"])}
    return info


def describe(info: dict[str, Any], *, live: bool = True) -> str:
    """One line: `step 120/1000 · loss 2.136 · 5.02 steps/s · ETA 3m00s` (no ETA once the
    run has ended)."""
    parts = []
    if info.get("step") is not None:
        parts.append(f"step {info['step']}" + (f"/{info['total']}" if info.get("total") else ""))
    if info.get("loss") is not None:
        parts.append(f"{info.get('loss_key') or 'loss'} {info['loss']:.4g}")
    if info.get("epoch") is not None:
        parts.append(f"epoch {info['epoch']:g}" + (f"/{info['epochs']}" if info.get("epochs")
                                                   else ""))
    if info.get("rate"):
        parts.append(f"{info['rate']:.3g} steps/s")
    if info.get("eta_s") is not None and live:
        parts.append(f"ETA {_clock(info['eta_s'])}")
    return " · ".join(parts)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"
