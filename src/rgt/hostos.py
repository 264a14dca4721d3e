"""What differs between the laptops rgt runs on, in one place.

rgt's laptop side is POSIX: Linux and macOS alike (process groups, signals, Unix sockets for
ssh connection sharing). It uses no Linux-only call: no ``os.waitid`` (macOS has it only from
Python 3.13), no /proc; files move with rgt's own engine, so the laptop's rsync, old or
absent, does not matter. Native Windows lacks what ssh's ControlMaster and rgt's process
handling need, so there rgt says, in one line, to run it inside WSL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from rgt.errors import UserError

WSL = ("rgt runs on Linux and macOS; on Windows, run it inside WSL "
       "(`wsl --install`, then `pip install` rgt in that Linux shell)")


def unsupported_reason(platform: str | None = None) -> str | None:
    """Why rgt cannot run on PLATFORM (default: this one, ``sys.platform``), or None."""
    platform = sys.platform if platform is None else platform
    if platform.startswith("win") or platform in ("cygwin", "msys"):
        return WSL
    return None


def check_supported() -> None:
    """Raise the one-line UserError for a laptop rgt cannot drive boxes from."""
    reason = unsupported_reason()
    if reason is not None:
        raise UserError(reason)


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal the process group `proc` leads (it was started with ``start_new_session``), so
    that what it started (ssh and its children) goes with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


@contextlib.contextmanager
def exclusive_lock(path, busy: str):
    """Hold an exclusive lock on the file `path` for the block, across processes; raise the
    one-line UserError `busy` (with the holder's pid) at once if another process holds it.

    ``flock`` (Linux and macOS alike) is released by the kernel when the holder exits, even
    by SIGKILL, so a crashed rgt never leaves a stale lock behind. The file stays; only the
    lock on it matters.
    """
    import fcntl  # POSIX only; Windows is refused before any verb (check_supported)

    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise UserError(f"{busy} (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
