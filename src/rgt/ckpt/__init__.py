"""rgt.ckpt — checkpoint to durable storage and resume idempotently, whatever kills the run.

SSH drops, Slurm walltime kills, pod reschedules, spot preemptions and Colab disconnects all
end the same way: the process dies, maybe the machine with it. What survives is a full-state
checkpoint on durable storage, written atomically, on a computed cadence, loaded
unconditionally on start::

    from rgt.ckpt import Checkpointer, PreemptionFlag, EXIT_PREEMPTED
    ckpt = Checkpointer("ckpt", keep_last=2, keep_best=1, durable="s3://bucket/run1")
    loaded = ckpt.load_latest()                 # None on a fresh start
    with PreemptionFlag() as preempted:         # SIGTERM / SIGUSR1 only set a flag
        for step in range(start, total):
            train_step()
            if step % k == 0 or preempted:
                rec = ckpt.save(state, step)   # atomic; rec.durable once mirrored + checked
            if preempted:
                sys.exit(EXIT_PREEMPTED)       # 85

Exit codes: ``EXIT_PREEMPTED = 85`` means "preempted, state saved, run the same command again
to resume" — requeue wrappers (Slurm ``--requeue`` scripts, rgt run) treat it as such; 0 is
done, anything else a failure.

Public API: `Checkpointer`, `SaveRecord`, `LoadedCheckpoint`, `CheckpointInfo`,
`verify_file` / `VerifyResult`, `list_checkpoints`, `CheckpointError` / `CheckpointSpaceError` /
`CheckpointNotFoundError`, `young_daly_interval` / `Cadence`, `PreemptionFlag` /
`EXIT_PREEMPTED`, `ResumableSampler`; torch helpers (imported lazily, torch optional):
`capture_training_state`, `restore_training_state`, `capture_rng_state`, `restore_rng_state`.
"""

from __future__ import annotations

from typing import Any

from rgt.ckpt.cadence import Cadence, expected_overhead, young_daly_interval
from rgt.ckpt.checkpointer import (
    Checkpointer,
    CheckpointInfo,
    LoadedCheckpoint,
    SaveRecord,
    VerifyResult,
    list_checkpoints,
    verify_file,
)
from rgt.ckpt.errors import CheckpointError, CheckpointNotFoundError, CheckpointSpaceError
from rgt.ckpt.preempt import EXIT_PREEMPTED, PreemptionFlag, exit_preempted
from rgt.ckpt.sampler import ResumableSampler

_TORCH_HELPERS = {
    "capture_training_state",
    "restore_training_state",
    "capture_rng_state",
    "restore_rng_state",
}

__all__ = [
    "EXIT_PREEMPTED",
    "Cadence",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointNotFoundError",
    "CheckpointSpaceError",
    "Checkpointer",
    "LoadedCheckpoint",
    "PreemptionFlag",
    "ResumableSampler",
    "SaveRecord",
    "VerifyResult",
    "exit_preempted",
    "expected_overhead",
    "list_checkpoints",
    "verify_file",
    "young_daly_interval",
    *sorted(_TORCH_HELPERS),
]


def __getattr__(name: str) -> Any:
    if name in _TORCH_HELPERS:
        from rgt.ckpt import torch_state

        return getattr(torch_state, name)
    raise AttributeError(f"module 'rgt.ckpt' has no attribute {name!r}")
