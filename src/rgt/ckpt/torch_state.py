"""Full PyTorch training state: capture and restore everything a bitwise resume needs.

Imported lazily (`rgt.ckpt` itself never imports torch). The captured dict holds only tensors
and plain Python types, so `torch.load(..., weights_only=True)` — the default — loads it:
RNG states are stored as tensors / ints, not as NumPy or Python objects.

    state = capture_training_state(model=model, optimizer=opt, scheduler=sched, scaler=scaler,
                                   epoch=epoch, step=step, sampler=sampler)
    ckpt.save(state, step)
    ...
    loaded = ckpt.load_latest()
    if loaded:
        progress = restore_training_state(loaded.state, model=model, optimizer=opt, ...)
        start = progress["step"] + 1
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import torch

STATE_FORMAT = "rgt.ckpt.training/1"


def capture_rng_state() -> dict[str, Any]:
    """RNG of Python, NumPy (global legacy generator), torch CPU and every CUDA device."""
    version, internal, gauss = random.getstate()
    out: dict[str, Any] = {
        "python": {"version": version, "state": list(internal), "gauss": gauss},
        "torch_cpu": torch.get_rng_state(),
        "torch_cuda": [],
    }
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None  # type: ignore[assignment]
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        out["numpy"] = {
            "kind": str(kind),
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    if torch.cuda.is_available():
        out["torch_cuda"] = [s.cpu() for s in torch.cuda.get_rng_state_all()]
    return out


def restore_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((int(py["version"]), tuple(int(x) for x in py["state"]), py["gauss"]))
    torch.set_rng_state(state["torch_cpu"])
    if state.get("numpy") is not None:
        import numpy as np

        n = state["numpy"]
        keys = n["keys"].numpy().astype("uint32")
        np.random.set_state((n["kind"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    cuda = state.get("torch_cuda") or []
    if cuda:
        if not torch.cuda.is_available():
            warnings.warn("checkpoint has CUDA RNG state but CUDA is unavailable; skipped",
                          stacklevel=2)
        else:
            n = torch.cuda.device_count()
            if n != len(cuda):
                warnings.warn(f"checkpoint has CUDA RNG state for {len(cuda)} devices, "
                              f"this machine has {n}; restoring the first {min(n, len(cuda))}",
                              stacklevel=2)
            for i, s in enumerate(cuda[:n]):
                torch.cuda.set_rng_state(s, device=i)


def capture_training_state(
    *,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    scaler: Any = None,
    epoch: int = 0,
    step: int = 0,
    sampler: Any = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One dict with model, optimizer, LR scheduler, grad scaler, epoch, step, data position,
    every RNG and your `extra` (plain types / tensors only, for weights_only loading)."""
    return {
        "format": STATE_FORMAT,
        "model": model.state_dict() if model is not None else None,
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "epoch": int(epoch),
        "step": int(step),
        "sampler": sampler.state_dict() if sampler is not None else None,
        "rng": capture_rng_state(),
        "extra": extra or {},
    }


def restore_training_state(
    state: dict[str, Any],
    *,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    scaler: Any = None,
    sampler: Any = None,
    restore_rng: bool = True,
    strict: bool = True,
) -> dict[str, Any]:
    """Load what `capture_training_state` captured into the given objects; restores the RNGs
    last. Returns {"epoch", "step", "extra"}."""
    if state.get("format") != STATE_FORMAT:
        raise ValueError(f"not a training state captured by rgt.ckpt ({state.get('format')!r})")
    pairs = [(model, "model"), (optimizer, "optimizer"), (scheduler, "scheduler"),
             (scaler, "scaler"), (sampler, "sampler")]
    for obj, key in pairs:
        if obj is None:
            continue
        if state.get(key) is None:
            raise ValueError(f"checkpoint has no {key} state")
        if key == "model":
            obj.load_state_dict(state[key], strict=strict)
        else:
            obj.load_state_dict(state[key])
    if restore_rng:
        restore_rng_state(state["rng"])
    return {"epoch": state["epoch"], "step": state["step"], "extra": state.get("extra", {})}
