"""How `put` and `get` move files: rgt's own engine (rgt.onbox.xfer), driven over the stdin and
stdout (one socketpair) of one child process per attempt — ssh to the box, or a second Python
for the local box. It needs nothing but Python at either end: no rsync, no scp, no sftp.
It was measured against rsync and scp with bench/transfer.py (see the README's Benchmarks).

Each attempt runs under two clocks: no byte moved for IO_TIMEOUT seconds means the link is
dead, and the caller's `timeout` bounds the attempt's wall time; either ends it and the next
attempt resumes from the partial files the receiver kept. A failure no retry can fix (a changed
host key, a refused key, a full disk, an unsafe name sent by the box) raises at once.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import random
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rgt import hostos
from rgt.onbox import script_source, xfer
from rgt.transport.base import (
    AuthenticationFailed,
    HostKeyChanged,
    HostKeyUnknown,
    Progress,
    TransferStats,
    TransportError,
    Unreachable,
    _one_line,
)

IO_TIMEOUT = 30
"""Seconds without a byte moving before an attempt is abandoned (a silently dead link)."""

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
BUFFER = 1 << 18  # batches the frames of many small files into few pipe writes
MAX_NOISE = 1 << 16  # what a login script may print before the far side starts
BOOT = 'import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),"rgt-xfer","exec"))'
"""Run by the far side's Python: the first N bytes of stdin are the engine, the rest its stream."""

Diagnose = Callable[[str], "TransportError | None"]
"""Turns an attempt's stderr into a classified connection error (host key, unreachable...)."""

_ADVICE = {
    "ENOSPC": "the destination disk is full: free space there and retry",
    "EDQUOT": "the destination quota is exhausted: free space there and retry",
    "EROFS": "the destination is read-only",
}


@functools.cache
def engine() -> bytes:
    """The bytes the far side's Python runs (read once: its length goes on the command line)."""
    return script_source("xfer")


def far_command(python: str, role: str, root: str, *, exclude: Sequence[str] = (),
                bwlimit: int = 0) -> list[str]:
    """The far side's argv: PYTHON running the engine in ROLE (``send`` or ``receive``)."""
    args = [python, "-c", BOOT, str(len(engine())), role, root]
    args += [f"exclude={pattern}" for pattern in exclude]
    return args + ([f"bwlimit={bwlimit}"] if bwlimit else [])


@dataclass
class _Attempt:
    sent: int
    received: int
    files: int
    error: Exception | None  # None: the attempt completed
    transient: bool = False
    skipped: tuple[str, ...] = ()


def _start(argv: Sequence[str], stderr) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """The far side, its stdin and stdout one end of a socketpair whose other end is ours.
    A socket, not two pipes: ssh then moves data in pieces as big as its buffers, not the
    64 KiB a pipe holds (rsync hands ssh a socketpair for the same reason)."""
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            list(argv), stdin=theirs, stdout=theirs, stderr=stderr,
            start_new_session=True,  # so that a timeout stops ssh and whatever it started together
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return proc, ours


def _await_magic(link: xfer.Link) -> None:
    """Skip whatever a login script printed until the engine's first bytes."""
    seen = b""
    while not seen.endswith(xfer.MAGIC):
        byte = link.reader.read(1)
        if not byte or len(seen) > MAX_NOISE:
            raise EOFError("the far side did not start")
        seen += byte
    link.received = len(seen)


class _Watchdog:
    """Ends the attempt once the wall clock or the idle clock runs out: kills its process group
    and shuts our socket, which turns any blocked read or write of ours into an end-of-stream."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, link: xfer.Link,
                 timeout: float) -> None:
        self.proc, self.sock, self.link = proc, sock, link
        self.deadline = time.monotonic() + timeout
        self.fired: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            now = time.monotonic()
            if now > self.deadline:
                self.fired = "wall"
            elif now - self.link.last > IO_TIMEOUT:
                self.fired = "idle"
            else:
                continue
            hostos.kill_group(self.proc)
            # An ssh master (a process of its own) may hold the far end of our socket for a
            # minute more: shutting ours down ends our blocked read or write now.
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            return

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run_attempt(argv: Sequence[str], *, local_role: str, root: str, exclude: Sequence[str],
                 bwlimit: int, timeout: float, progress: Progress | None,
                 what: str, python: str, diagnose: Diagnose | None) -> _Attempt:
    tally = xfer.Tally(progress)
    with tempfile.TemporaryFile() as err:  # a file: a backgrounded ssh master may keep it open
        proc, sock = _start(argv, err)
        link = xfer.Link(sock.makefile("rb", buffering=BUFFER),
                         sock.makefile("wb", buffering=BUFFER))
        started = False
        error: Exception | None = None
        try:
            with _Watchdog(proc, sock, link, timeout) as dog:
                try:
                    link.writer.write(engine())
                    link.sent += len(engine())
                    link.flush()
                    _await_magic(link)
                    started = True
                    if local_role == "send":
                        xfer.send(link, root, tally, exclude=exclude, bwlimit=bwlimit)
                    else:
                        xfer.receive(link, root, tally)
                    link.flush()
                    sock.shutdown(socket.SHUT_WR)  # end of our stream: the far side exits
                except (OSError, EOFError, xfer.XferError) as exc:
                    error = exc
                    if isinstance(exc, (OSError, EOFError)) and not _local_fault(exc):
                        error = _far_error(link, local_role) or exc
                try:
                    rc = proc.wait(timeout=max(1.0, dog.deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    hostos.kill_group(proc)
                    rc = proc.wait()
        except BaseException:
            hostos.kill_group(proc)
            proc.wait()
            raise
        finally:
            for end in (link.writer, link.reader, sock):
                with contextlib.suppress(OSError):
                    end.close()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    out = _Attempt(link.sent, link.received, tally.files, None, skipped=tuple(tally.skipped))
    if error is None and rc == 0:
        if tally.problems:
            shown = "; ".join(f"{name} ({why})" for name, why in tally.problems[:3])
            more = f" and {len(tally.problems) - 3} more" if len(tally.problems) > 3 else ""
            out.error = TransportError(f"{what} failed: some files could not be moved: "
                                       f"{shown}{more}")
        return out
    out.error, out.transient = _classify(error, rc, stderr, dog.fired, started=started,
                                         what=what, python=python, timeout=timeout,
                                         diagnose=diagnose)
    return out


def _local_fault(exc: BaseException) -> bool:
    """An OSError on this machine's own files (not the pipe to the far side)."""
    return isinstance(exc, OSError) and exc.errno not in (errno.EPIPE, None) and not isinstance(
        exc, ConnectionError)


def _far_error(link: xfer.Link, local_role: str) -> xfer.XferError | None:
    """The far side's own account of why the stream stopped, if it sent one before exiting."""
    if local_role != "send":
        return None  # we were reading: an error frame would already have been raised
    with contextlib.suppress(OSError, EOFError, xfer.XferError):
        while True:  # as sender, all that is left to read is WANT's successors: DONE or error
            kind, payload = link.recv()
            if kind == b"J":
                with contextlib.suppress(ValueError):
                    message = json.loads(payload)
                    if isinstance(message, dict) and message.get("op") == "error":
                        return xfer.XferError(str(message.get("code")),
                                              str(message.get("message")))
    return None


def _classify(error: Exception | None, rc: int, stderr: str, fired: str | None, *,
              started: bool, what: str, python: str, timeout: float,
              diagnose: Diagnose | None) -> tuple[Exception, bool]:
    """(the error to raise or retry on, whether another attempt may succeed)."""
    if isinstance(error, xfer.XferError):
        advice = _ADVICE.get(error.code)
        if error.code == "missing":
            return TransportError(f"{what} failed: {error.message} (No such file or directory)"),\
                False
        if error.code in ("unsafe", "protocol"):
            return TransportError(f"{what} refused: {error.message}"), False
        detail = f"{advice} ({error.message})" if advice else error.message
        return TransportError(f"{what} failed: {detail}"), False
    if isinstance(error, OSError) and _local_fault(error):
        name = errno.errorcode.get(error.errno or 0, "")
        advice = _ADVICE.get(name, error.strerror or str(error))
        where = f" ({error.filename})" if error.filename else ""
        return TransportError(f"{what} failed here: {advice}{where}"), False
    classified = diagnose(stderr) if diagnose is not None and rc == 255 else None
    if isinstance(classified, HostKeyChanged | HostKeyUnknown | AuthenticationFailed):
        return classified, False  # no retry fixes a key: raise at once
    if fired == "wall":
        return TransportError(f"{what} failed: an attempt ran past its {timeout:g}s limit"), True
    if fired == "idle":
        return TransportError(f"{what} failed: nothing moved for {IO_TIMEOUT}s"), True
    if classified is not None:
        return classified, True
    tail = _one_line(stderr)
    if not started and rc != 255:
        if rc == 127 or "not found" in stderr:
            return TransportError(
                f"{what} failed: {python} is not installed on the box (rgt moves files with "
                f"it): {tail or f'exit {rc}'}"), False
        return TransportError(f"{what} failed: the transfer helper did not start "
                              f"(exit {rc})" + (f": {tail}" if tail else "")), False
    if rc == 255 or rc < 0 or rc == 3:
        # ssh's own failure (a dropped link), or the far side saw us vanish: resume
        return TransportError(f"{what} failed: the connection dropped"
                              + (f": {tail}" if tail else "")), True
    return TransportError(f"{what} failed: the far side exited with code {rc}"
                          + (f": {tail}" if tail else "")), False


def move(argv: Sequence[str], *, local_role: str, root: Path | str, what: str,
         timeout: float, retries: int, progress: Progress | None = None,
         exclude: Sequence[str] = (), bwlimit: int = 0, python: str = "python3",
         diagnose: Diagnose | None = None) -> TransferStats:
    """Run the far side (`argv`, from `far_command`) against this side's `local_role` on
    `root` until the transfer completes or fails for good: at most ``1 + retries`` attempts,
    with exponential backoff between them."""
    started = time.monotonic()
    sent = received = files = attempts = 0
    while True:
        attempts += 1
        a = _run_attempt(argv, local_role=local_role, root=str(root), exclude=exclude,
                         bwlimit=bwlimit, timeout=timeout, progress=progress, what=what,
                         python=python, diagnose=diagnose)
        sent += a.sent
        received += a.received
        files += a.files
        if a.error is None:
            return TransferStats(sent, received, files, time.monotonic() - started, attempts,
                                 skipped=a.skipped)
        if not a.transient:
            raise a.error
        if attempts > retries:
            if isinstance(a.error, Unreachable):
                raise a.error
            after = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
            raise TransportError(f"{a.error}{after}")
        pause = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (attempts - 1))
        time.sleep(pause * random.uniform(0.8, 1.2))


def tree_size(path: Path) -> int:
    """Bytes under `path` (a file or a directory), for benchmarks and progress totals."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for file in path.rglob("*"):
        with contextlib.suppress(OSError):
            if file.is_file() and not file.is_symlink():
                total += file.lstat().st_size
    return total
