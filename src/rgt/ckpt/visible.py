"""Count a checkpoint as saved only once the durable tier shows it whole (Colab's NB1).

A Google Drive mount takes writes into a local cache and uploads them later; the runtime can
die before that, and then Drive holds a 0-byte file or nothing. A checkpointer that deletes the
older checkpoint as soon as the newer one is written can lose both. So, where a flush channel
is set up (``RGT_CKPT_FLUSH_DIR``, by rgt's Colab notebook), every save goes:

    write (atomic, fsync) → flush (the notebook runs drive.flush_and_unmount() and mounts
    again) → re-read size and sha256 of data and sidecar from the mount → only then prune.

A checkpoint that is not confirmed leaves every older one in place; the next save tries again.

The channel is a directory both sides see (scratch, not Drive): the trainer writes
``flush-<token>.request`` and waits for ``flush-<token>.done`` (JSON ``{"ok": bool, "error":
str}``) from whoever owns the mount. Standard library only (this module ships with rgt.ckpt).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
from pathlib import Path

log = logging.getLogger("rgt.ckpt")

FLUSH_DIR_ENV = "RGT_CKPT_FLUSH_DIR"
FLUSH_TIMEOUT_ENV = "RGT_CKPT_FLUSH_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 1800.0  # a large checkpoint can need ~30 minutes to reach Drive (NB1)


class FlushChannel:
    """The trainer's end of the flush handshake."""

    def __init__(self, directory: str | os.PathLike[str], timeout_s: float = DEFAULT_TIMEOUT_S,
                 poll_s: float = 0.05) -> None:
        self.directory = Path(directory)
        self.timeout_s = timeout_s
        self.poll_s = poll_s

    @classmethod
    def from_env(cls) -> FlushChannel | None:
        where = os.environ.get(FLUSH_DIR_ENV)
        if not where:
            return None
        try:
            timeout = float(os.environ.get(FLUSH_TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
        except ValueError:
            timeout = DEFAULT_TIMEOUT_S
        return cls(where, timeout)

    def flush(self, what: str) -> str | None:
        """Ask for a flush and wait for it: None when done, else why not."""
        token = f"{os.getpid()}-{secrets.token_hex(4)}"
        request = self.directory / f"flush-{token}.request"
        done = self.directory / f"flush-{token}.done"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f".{request.name}.tmp"
            tmp.write_text(json.dumps({"what": what, "asked": time.time()}), encoding="utf-8")
            os.replace(tmp, request)
        except OSError as err:
            return f"cannot ask for a flush in {self.directory}: {err}"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if done.exists():
                try:
                    answer = json.loads(done.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    time.sleep(self.poll_s)  # written atomically, but be lenient
                    continue
                for path in (done, request):
                    with contextlib.suppress(OSError):
                        path.unlink()
                if isinstance(answer, dict) and answer.get("ok") is True:
                    return None
                error = answer.get("error") if isinstance(answer, dict) else None
                return str(error or "the flush failed")
            time.sleep(self.poll_s)
        with contextlib.suppress(OSError):
            request.unlink()
        return f"no flush answer within {self.timeout_s:.0f}s"


def confirm_visible(data: Path, channel: FlushChannel) -> str | None:
    """Flush, then re-read `data` and its sidecar from the (re-mounted) directory: None when
    both are whole (size and sha256 as recorded), else what is wrong."""
    from rgt.ckpt.checkpointer import verify_file

    problem = channel.flush(data.name)
    if problem is not None:
        return problem
    if not data.exists():  # the mount can take a moment to list after a remount
        time.sleep(0.5)
    try:
        result = verify_file(data, load=False)
    except Exception as err:  # noqa: BLE001 - not visible is the answer
        return f"not visible after the flush: {err}"
    return None if result.ok else f"not whole after the flush: {result.reason}"
