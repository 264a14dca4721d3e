"""Checkpoint errors. The ones a user can act on are `rgt.errors.UserError`s (one-line, exit 2)."""

from __future__ import annotations

from rgt.errors import UserError


class CheckpointError(UserError):
    """A checkpoint could not be written, read or found."""


class CheckpointNotFoundError(CheckpointError):
    """The path given does not exist or holds no checkpoint."""


class CheckpointSpaceError(CheckpointError):
    """The target filesystem cannot hold the checkpoint (bytes or inodes).

    Raised before writing when statvfs says the write cannot fit, and when ENOSPC/EDQUOT
    interrupts a write; either way the temp file is gone and the previous checkpoint is intact.
    """

    def __init__(
        self,
        directory: str,
        *,
        step: int,
        needed_bytes: int,
        free_bytes: int,
        needed_inodes: int,
        free_inodes: int | None,
        during_write: bool = False,
        previous: str | None = None,
    ) -> None:
        self.directory = directory
        self.step = step
        self.needed_bytes = needed_bytes
        self.free_bytes = free_bytes
        self.needed_inodes = needed_inodes
        self.free_inodes = free_inodes
        inodes = "unlimited" if free_inodes is None else f"{free_inodes:,}"
        how = "ran out of space while writing" if during_write else "not enough space"
        kept = f"; previous checkpoint {previous} is intact" if previous else ""
        super().__init__(
            f"cannot save checkpoint step {step} in {directory}: {how} — needs "
            f"{needed_bytes:,} bytes and {needed_inodes} inodes, free {free_bytes:,} bytes and "
            f"{inodes} inodes{kept}. Free space there (delete old files, raise the quota) "
            "or point the checkpoint directory at a bigger filesystem."
        )

