"""A sampler that remembers where it is, so a resumed epoch neither repeats nor skips samples.

The order of epoch e is a permutation drawn from (seed, e) alone — not from any global RNG —
so it is the same in every process life. The position is the number of samples handed out
in the current epoch; save `state_dict()` in the checkpoint and `load_state_dict()` it on
resume. Use it as a DataLoader `sampler=` (it yields indices from the current position and
moves to the next epoch when exhausted) or call `batches()` directly. With
``num_workers > 0`` a DataLoader pulls indices ahead of the batches you have consumed: pass
``state_dict(consumed=n_batches_consumed * batch_size)`` then.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any


class ResumableSampler:
    def __init__(
        self, num_samples: int, *, seed: int = 0, shuffle: bool = True, drop_last: bool = False
    ) -> None:
        if num_samples < 1:
            raise ValueError("num_samples must be >= 1")
        self.num_samples = num_samples
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0
        self.consumed = 0
        self._perm: Any = None
        self._perm_epoch = -1

    def order(self, epoch: int | None = None) -> list[int]:
        """The full sample order of `epoch` (default: the current one)."""
        epoch = self.epoch if epoch is None else epoch
        if self._perm_epoch != epoch:
            if self.shuffle:
                # stdlib, so a box without numpy resumes the same order; the seed is derived
                # by hash so (seed, epoch) pairs never collide
                key = hashlib.sha256(f"{self.seed}:{epoch}".encode()).digest()
                self._perm = list(range(self.num_samples))
                random.Random(int.from_bytes(key[:16], "big")).shuffle(self._perm)
            else:
                self._perm = list(range(self.num_samples))
            self._perm_epoch = epoch
        return self._perm

    def set_epoch(self, epoch: int) -> None:
        """Jump to the start of `epoch` (no-op if already in it: keeps a restored position)."""
        if epoch != self.epoch:
            self.epoch, self.consumed = epoch, 0

    def _next_epoch(self) -> None:
        self.epoch += 1
        self.consumed = 0

    def __iter__(self) -> Iterator[int]:
        order = self.order()
        while self.consumed < self.num_samples:
            i = order[self.consumed]
            self.consumed += 1
            yield i
        self._next_epoch()

    def __len__(self) -> int:
        return self.num_samples - self.consumed

    def batches(self, batch_size: int) -> Iterator[list[int]]:
        """Endless index batches across epochs, from the current position.

        An epoch's last short batch is dropped when `drop_last`, else yielded short.
        """
        while True:
            order = self.order()
            while self.consumed < self.num_samples:
                end = min(self.consumed + batch_size, self.num_samples)
                if end - self.consumed < batch_size and self.drop_last:
                    break
                batch = order[self.consumed : end]
                self.consumed = end
                yield batch
            self._next_epoch()

    def state_dict(self, consumed: int | None = None) -> dict[str, int | bool]:
        return {
            "num_samples": self.num_samples,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "epoch": self.epoch,
            "consumed": self.consumed if consumed is None else consumed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["num_samples"]) != self.num_samples:
            raise ValueError(
                f"checkpoint was taken with {state['num_samples']} samples, "
                f"this sampler has {self.num_samples}"
            )
        self.seed = int(state["seed"])
        self.shuffle = bool(state["shuffle"])
        self.epoch = int(state["epoch"])
        self.consumed = int(state["consumed"])
        self._perm_epoch = -1
