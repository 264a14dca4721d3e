"""Hugging Face Trainer: save a checkpoint when a stop signal arrives, then exit 85.

Trainer installs no SIGTERM handler, so a preemption (spot reclaim, Slurm walltime, a pod
eviction, `docker stop`) kills it and loses everything since the last `save_steps`
checkpoint. With this callback the signal only raises a flag (`rgt.ckpt.PreemptionFlag`);
at the end of the current optimizer step the Trainer saves `checkpoint-N` as usual
(model, optimizer, scheduler, RNG states, trainer_state.json), and then the process exits
with `EXIT_PREEMPTED` (85) — "saved, run the same command to resume" — instead of going on
to write final outputs from a half-trained model::

    from rgt.ckpt.hf import SaveOnSignal
    trainer = Trainer(..., callbacks=[SaveOnSignal()])
    trainer.train(resume_from_checkpoint=bool(get_last_checkpoint(args.output_dir)))

`exit_code=None` stops training cleanly instead (``trainer.train()`` returns). transformers is
imported only when `SaveOnSignal` is first used, so importing this module costs nothing.
"""

from __future__ import annotations

import sys
from typing import Any

from rgt.ckpt.preempt import DEFAULT_SIGNALS, EXIT_PREEMPTED, PreemptionFlag

_CLASS: Any = None


def _build() -> Any:
    from transformers import TrainerCallback

    class SaveOnSignal(TrainerCallback):
        """Save `checkpoint-N` at the next step end after SIGTERM/SIGUSR1, then exit 85."""

        def __init__(self, signals: tuple = DEFAULT_SIGNALS,
                     exit_code: int | None = EXIT_PREEMPTED) -> None:
            self.flag = PreemptionFlag(signals, install=False)
            self.exit_code = exit_code
            self.saving = False

        def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
            self.flag.install()  # the Trainer runs in the main thread; handlers only flag

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
            if self.flag and not self.saving:
                self.saving = True
                print(f"[rgt] {self.flag.signal_name} received: saving checkpoint-"
                      f"{state.global_step} and stopping", flush=True)
                control.should_save = True
                control.should_training_stop = True
            return control

        def on_save(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
            if self.saving and self.exit_code is not None:
                print(f"[rgt] checkpoint-{state.global_step} saved; exiting "
                      f"{self.exit_code} (preempted: run again to resume)", flush=True)
                self.flag.close()
                sys.stdout.flush()
                sys.stderr.flush()
                sys.exit(self.exit_code)
            return control

        def on_train_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
            self.flag.close()

    return SaveOnSignal


def __getattr__(name: str) -> Any:
    global _CLASS
    if name == "SaveOnSignal":
        if _CLASS is None:
            _CLASS = _build()
        return _CLASS
    raise AttributeError(f"module 'rgt.ckpt.hf' has no attribute {name!r}")
