"""Training progress as `rgt watch` shows it: step, loss, rate, ETA, and the last checkpoint.

The on-box probe reads what the trainer itself writes (`rgt.onbox.probe.parse_metrics`: HF
dict lines, JSON lines, `step N loss X` text; a tqdm bar for step/total/rate/ETA; Lightning's
CSVLogger `metrics.csv`) and the names in the job's checkpoint home; this module merges them.
A value nobody reported is left out, never guessed: no total, no ETA.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from rgt.ckpt import formats

CHECKPOINT_KINDS = ("rgt.ckpt", "lightning", "torch", "safetensors")


def training(log: dict[str, Any]) -> dict[str, Any]:
    """{step, total, loss, loss_key, epoch, rate, eta_s, source} from the probe's log facts."""
    line = log.get("metrics") or {}
    csv = log.get("csv_metrics") or {}
    bar = log.get("progress") or {}
    # the log line is the freshest; metrics.csv is flushed every 100 steps by Lightning
    step_from = max((m for m in (line, csv) if m.get("step") is not None),
                    key=lambda m: m["step"], default={})
    out: dict[str, Any] = {}
    for key in ("loss", "loss_key", "epoch"):
        value = line.get(key, csv.get(key))
        if value is not None:
            out[key] = value
    step = bar.get("step", step_from.get("step"))
    if step is not None:
        out["step"] = step
    for key in ("total", "rate", "eta_s"):
        if bar.get(key) is not None:
            out[key] = bar[key]
    sources = [name for name, part in (("log", line), ("progress bar", bar)) if part]
    if csv:
        sources.append(csv.get("source") or "metrics.csv")
    if sources:
        out["source"] = ", ".join(sources)
    return out


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
        parts.append(f"epoch {info['epoch']:g}")
    if info.get("rate"):
        parts.append(f"{info['rate']:.3g} steps/s")
    if info.get("eta_s") is not None and live:
        parts.append(f"ETA {_clock(info['eta_s'])}")
    return " · ".join(parts)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def last_checkpoint(entries: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The newest checkpoint among the checkpoint home's entries (newest first, by mtime):
    an HF checkpoint-N or DCP directory, or a checkpoint file; its step from its name."""
    for entry in entries or []:
        parts = PurePosixPath(str(entry.get("name") or "")).parts
        if not parts:
            continue
        top = parts[0]
        if formats.step_from_name(top) is not None and top.startswith(("checkpoint-", "step")):
            return {"name": top, "step": formats.step_from_name(top), "mtime": entry["mtime"]}
        name = parts[-1]
        if entry.get("dir"):
            continue
        if formats.kind_of_name(name) in CHECKPOINT_KINDS:
            return {"name": "/".join(parts), "step": formats.step_from_name(name),
                    "mtime": entry["mtime"]}
    return None


def stop_line(summary: dict[str, Any]) -> str:
    """`stopped by SIGTERM, last checkpoint step 1500 (checkpoint-1500)`: what a stop kept."""
    ckpt = summary.get("last_checkpoint")
    signal = summary.get("stop_signal") or "a signal"
    if not ckpt:
        return f"stopped by {signal}; no checkpoint in the checkpoint home"
    step = f"step {ckpt['step']} ({ckpt['name']})" if ckpt.get("step") is not None \
        else ckpt["name"]
    return f"stopped by {signal}, last checkpoint {step}"
