"""The box is this machine: commands run under local bash, files move with rgt's own engine
(a second Python process at the far end of a socketpair: no rsync, no ssh).

Used by the `local` platform and by tests; same semantics as `SshTransport`, so code written
against one runs unchanged against the other.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from rgt import hostos
from rgt.transport.base import (
    BashMissing,
    CommandTimeout,
    Progress,
    Result,
    Stalled,
    TransferStats,
    TransportError,
)
from rgt.transport.transfer import far_command, move


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    hostos.kill_group(proc)
    proc.wait()


def run_local(argv: Sequence[str], *, stdin: bytes | None, timeout: float,
              limit: int | None = None) -> tuple[int, str, str]:
    """`run_bytes` with stdout decoded (invalid UTF-8 replaced)."""
    rc, out, err = run_bytes(argv, stdin=stdin, timeout=timeout, limit=limit)
    return rc, out.decode(errors="replace"), err


def run_bytes(argv: Sequence[str], *, stdin: bytes | None, timeout: float,
              limit: int | None = None, idle: float | None = None
              ) -> tuple[int, bytes, str]:
    """Run `argv`, feeding `stdin`; on timeout kill its whole process group and raise.

    stderr goes through a file, not a pipe, so a background process that inherits it (an ssh
    ControlMaster) cannot keep us waiting for an end-of-file that never comes. With `limit`,
    at most that many bytes of stdout are kept: past them the command's group is killed and
    the return code is `TRUNCATED` (what a box sends cannot grow this process: issue 28), and
    `idle` seconds without a byte of stdout raise `IdleExpired` (a TimeoutExpired).
    stderr is read back only up to its last `STDERR_KEEP` bytes (its end says what failed).
    """
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
        try:
            if limit is None:
                out, _ = proc.communicate(stdin, timeout=timeout)
            else:
                out = _read_capped(proc, stdin, timeout, limit, idle)
        except BaseException:  # TimeoutExpired included: the caller turns it into its error
            _kill_group(proc)
            raise
        size = err.seek(0, os.SEEK_END)
        err.seek(max(0, size - STDERR_KEEP))
        rc = TRUNCATED if limit is not None and len(out) > limit else proc.returncode
        if rc == TRUNCATED:
            del out[limit:]  # (in place: a bytearray)
        return rc, out, err.read().decode(errors="replace")


TRUNCATED = -1000  # run_local's return code for a command whose stdout passed its limit
STDERR_KEEP = 64 * 1024


class IdleExpired(subprocess.TimeoutExpired):
    """No byte of output for the `idle` seconds run_bytes was given."""


def _read_capped(proc: subprocess.Popen[bytes], stdin: bytes | None, timeout: float,
                 limit: int, idle: float | None = None) -> bytes:
    """PROC's stdout, read until its end or until more than LIMIT bytes came (then its group
    is killed); TimeoutExpired past TIMEOUT. stdin is written from a thread meanwhile."""
    deadline = time.monotonic() + timeout
    if stdin is not None:
        feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
        feeder.start()
    out = bytearray()  # grown in place: no list of pieces joined into a second copy
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        last = time.monotonic()  # when the last byte came
        while len(out) <= limit:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            if idle is not None and now - last >= idle:
                raise IdleExpired(proc.args, idle)
            if not selector.select(min(left, idle) if idle is not None else left):
                continue
            data = os.read(fd, min(1 << 16, limit + 1 - len(out)))
            if not data:
                break
            out += data
            last = time.monotonic()
    if len(out) > limit:
        _kill_group(proc)
    else:
        proc.wait(max(0.1, deadline - time.monotonic()))
    proc.stdout.close()  # type: ignore[union-attr]
    return out


def _feed(pipe, data: bytes) -> None:
    try:
        with contextlib.suppress(OSError):  # the command may end (or be ended) unread
            pipe.write(data)
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


class LocalTransport:
    """Commands via ``bash -c``, files via rgt's engine (resumable, retried: same as SSH)."""

    where = "localhost"

    def __init__(self, *, python: str = "python3", bwlimit: int = 0, streams: int = 0) -> None:
        self.bwlimit = bwlimit  # bytes/s, 0 for no limit
        self.streams = streams  # parallel streams per transfer; 0: chosen per link
        self.python = python  # the interpreter for rgt's on-box scripts (found at `up`)

    def run(
        self,
        command: str,
        *,
        stdin: bytes | None = None,
        timeout: float = 60,
        check: bool = True,
        limit: int | None = None,
        idle: float | None = None,
    ) -> Result:
        try:
            rc, data, err = run_bytes(["bash", "-c", command], stdin=stdin, timeout=timeout,
                                      limit=limit, idle=idle)
        except IdleExpired:
            raise Stalled.after_idle(self.where, command, idle or 0) from None
        except subprocess.TimeoutExpired:
            raise CommandTimeout.after(self.where, command, timeout) from None
        except FileNotFoundError as exc:
            raise BashMissing.on(self.where, f"bash: {exc.strerror}") from None
        # with a limit, the bytes as they came too: a byte offset counts them
        result = Result(rc, data.decode(errors="replace"), err, truncated=rc == TRUNCATED,
                        data=data if limit is not None else b"")
        if result.truncated:  # ended by rgt: no exit code of its own to check
            return result
        if check and not result.ok:
            raise TransportError.command_failed(self.where, command, rc, err)
        return result

    def put(
        self,
        local: Path,
        remote: str,
        *,
        timeout: float = 600,
        retries: int = 5,
        progress: Progress | None = None,
        exclude: Sequence[str] = (),
    ) -> TransferStats:
        local = Path(local)
        if not local.exists():
            raise TransportError(f"cannot push {local}: it does not exist")
        dest = Path(os.path.expanduser(remote))
        _make_dir(dest)
        return self._copy(local, dest, timeout, retries, progress, exclude, upload=True)

    def get(
        self,
        remote: str,
        local: Path,
        *,
        timeout: float = 600,
        retries: int = 5,
        progress: Progress | None = None,
        exclude: Sequence[str] = (),
    ) -> TransferStats:
        source = Path(os.path.expanduser(remote))
        if not source.exists():
            raise TransportError(f"cannot pull {remote}: it does not exist on {self.where}")
        local = Path(local)
        _make_dir(local)
        return self._copy(source, local, timeout, retries, progress, exclude, upload=False)

    def _copy(
        self,
        source: Path,
        dest: Path,
        timeout: float,
        retries: int,
        progress: Progress | None,
        exclude: Sequence[str],
        *,
        upload: bool,
    ) -> TransferStats:
        # The far side is this very interpreter: the local box needs no python3 on PATH.
        far = far_command(sys.executable, "receive" if upload else "send",
                          str(dest if upload else source), bwlimit=self.bwlimit)
        return move(far, local_role="send" if upload else "receive",
                    root=source if upload else dest, what=f"copying {source} to {dest}",
                    timeout=timeout, retries=retries, progress=progress, exclude=exclude,
                    bwlimit=self.bwlimit, python=sys.executable, streams=self.streams)

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TransportError(f"cannot create directory {path}: {exc.strerror}") from None
