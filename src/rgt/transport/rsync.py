"""rsync, driven so that a transfer survives a dropped connection.

Each attempt runs under two clocks: rsync's own ``--timeout`` (no I/O for that long means the
link is dead) and a wall-clock limit (the caller's ``timeout``). A failed attempt leaves its
half-sent file in ``--partial-dir``; the next attempt uses it as the basis of rsync's delta
transfer, so only what had not arrived travels again.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rgt.transport.base import (
    AuthenticationFailed,
    HostKeyChanged,
    Progress,
    TransferStats,
    TransportError,
    Unreachable,
    _one_line,
)

PARTIAL_DIR = ".rgt-partial"
"""Where an interrupted file waits for the next attempt (relative: one per target directory;
rsync excludes it from the transfer itself)."""

IO_TIMEOUT = 30
"""Seconds without any I/O before rsync abandons an attempt (a silently dead link)."""

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0

# rsync exit codes that mean "the link or the far side went away": another attempt can succeed.
TRANSIENT = {
    10: "socket I/O error",
    12: "the data stream broke (connection dropped)",
    30: "timeout in data send/receive",
    35: "timeout waiting for the connection",
    255: "the ssh connection failed",
}
# Not transient, deliberately: 11 (file I/O error: usually a full disk or permissions, which a
# retry only hits again), 23 (some files could not be read or written: permissions, special
# files), 24 (source files vanished while sending), 20 (interrupted: the user pressed Ctrl-C),
# 1-6 (usage, protocol, paths), 127 (no rsync on the far side).
MEANING = {
    1: "syntax or usage error",
    2: "protocol incompatibility",
    3: "errors selecting input/output files or directories",
    5: "error starting the client-server protocol",
    11: "error in file I/O",
    20: "interrupted by a signal",
    23: "some files could not be transferred",
    24: "some source files vanished while sending",
    127: "rsync not found",
    **TRANSIENT,
}

_FATAL_STDERR = (
    ("No space left on device", "the destination disk is full: free space there and retry"),
    ("Disk quota exceeded", "the destination quota is exhausted: free space there and retry"),
    ("command not found", "rsync is not installed on the box: install it (apt-get install -y "
     "rsync) and retry"),
)

_PROGRESS = re.compile(rb"^\s*([\d,.']+)\s+(\d+)%")
_XFR = re.compile(rb"xfr#(\d+)")
_STAT = re.compile(rb"^(Number of regular files transferred|Total bytes sent|Total bytes received)"
                   rb":\s*([\d,.']+)")

Diagnose = Callable[[str], "TransportError | None"]
"""Turns an attempt's stderr into a classified connection error (host key, unreachable...)."""


@dataclass
class _Attempt:
    rc: int
    stderr: str
    sent: int
    received: int
    files: int
    timed_out: bool


def _number(raw: bytes) -> int:
    digits = re.sub(rb"\D", b"", raw)
    return int(digits) if digits else 0


def tree_size(path: Path) -> int:
    """Bytes under `path` (a file or a directory), for progress totals."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM first (rsync then keeps its partial file), SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _own_io_when_exited(proc: subprocess.Popen[bytes], deadline: float) -> tuple[int, int] | None:
    """(rchar, wchar) of `proc` itself, read after it exits but before it is reaped.

    The per-thread file excludes children it reaped (its ssh), so for a sending rsync, wchar
    is what it wrote into the connection, plus its own progress output. None without /proc.
    """
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                break
        except ChildProcessError:
            return None
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/io") as f:
            fields = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
        return int(fields["rchar"]), int(fields["wchar"])
    except (OSError, KeyError, ValueError):
        return None


def _run_attempt(
    argv: Sequence[str], *, timeout: float, progress: Progress | None, total: int, upload: bool
) -> _Attempt:
    # stderr goes to a file, not a pipe: an ssh ControlMaster that rsync's ssh forks into the
    # background can inherit it and would hold a pipe open long after rsync has exited.
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,  # so a timeout can stop rsync and its ssh together
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        done = files = 0
        stats: dict[bytes, int] = {}
        pending = b""
        timed_out = False
        read_from_stdout = 0
        own_io: tuple[int, int] | None = None
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    _stop(proc)
                    break
                ready, _, _ = select.select([fd], [], [], min(left, 1.0))
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                read_from_stdout += len(chunk)
                *lines, pending = re.split(rb"[\r\n]", pending + chunk)
                for line in lines:
                    if m := _PROGRESS.match(line):
                        done = _number(m.group(1))
                        if x := _XFR.search(line):
                            files = int(x.group(1))
                        if progress is not None:
                            pct = int(m.group(2))
                            # rsync's own 100% beats our estimate (excludes, vanished files).
                            if pct == 100:
                                guess = done
                            else:
                                guess = total or (done * 100 // pct if pct else 0)
                            progress(done, max(guess, done))
                    elif s := _STAT.match(line):
                        stats[s.group(1)] = _number(s.group(2))
            own_io = None if timed_out else _own_io_when_exited(proc, deadline)
            rc = proc.wait()
        except BaseException:
            _stop(proc)
            raise
        finally:
            proc.stdout.close()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if rc == 0 and b"Total bytes sent" in stats:
        return _Attempt(
            rc, stderr,
            sent=stats[b"Total bytes sent"],
            received=stats.get(b"Total bytes received", 0),
            files=stats.get(b"Number of regular files transferred", files),
            timed_out=False,
        )
    # Cut off mid-way, so no --stats. Sending, rsync's own write count is exact (less what it
    # wrote to us); receiving, the caller measures what arrived. rsync's progress counter
    # (updated about once a second) is the fallback where /proc is missing.
    sent = done
    if upload and own_io is not None:
        sent = max(0, own_io[1] - read_from_stdout - len(stderr.encode()))
    return _Attempt(
        rc, stderr,
        sent=sent if upload else 0,
        received=0 if upload else done,
        files=files,
        timed_out=timed_out,
    )


def rsync_transfer(
    argv: Sequence[str],
    *,
    what: str,
    timeout: float,
    retries: int,
    progress: Progress | None,
    total: int,
    upload: bool,
    diagnose: Diagnose | None = None,
    arrived: Callable[[], int] | None = None,
) -> TransferStats:
    """Run `argv` (a complete rsync command) until it succeeds or fails for good.

    At most ``1 + retries`` attempts, with exponential backoff between them. A failure that
    no retry can fix (a changed host key, a refused key, a full disk, no rsync on the box)
    raises at once. `arrived` (bytes under a local destination) measures what a cut-off
    download had already received.
    """
    started = time.monotonic()
    sent = received = files = attempts = 0
    while True:
        attempts += 1
        before = arrived() if arrived is not None else 0
        a = _run_attempt(argv, timeout=timeout, progress=progress, total=total, upload=upload)
        if arrived is not None and (a.rc != 0 or a.timed_out):
            a.received = max(0, arrived() - before)
        sent += a.sent
        received += a.received
        files += a.files
        if a.rc == 0 and not a.timed_out:
            return TransferStats(sent, received, files, time.monotonic() - started, attempts)

        classified = diagnose(a.stderr) if diagnose is not None else None
        if isinstance(classified, HostKeyChanged | AuthenticationFailed):
            raise classified
        for needle, advice in _FATAL_STDERR:
            if needle in a.stderr:
                raise TransportError(
                    f"{what} failed: {advice} ({_one_line(a.stderr, 200)})",
                    rc=a.rc, command=" ".join(argv), stderr=a.stderr,
                )
        transient = a.timed_out or a.rc in TRANSIENT or isinstance(classified, Unreachable)
        if not transient or attempts > retries:
            if isinstance(classified, Unreachable):
                raise classified
            if a.timed_out:
                reason = f"an attempt ran past its {timeout:g}s limit"
            else:
                reason = f"rsync exit {a.rc} ({MEANING.get(a.rc, 'unknown error')})"
            tail = _one_line(a.stderr)
            after = f" after {attempts} attempts" if attempts > 1 else ""
            raise TransportError(
                f"{what} failed{after}: {reason}" + (f": {tail}" if tail else ""),
                rc=a.rc, command=" ".join(argv), stderr=a.stderr,
            )
        pause = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (attempts - 1))
        time.sleep(pause * random.uniform(0.8, 1.2))


def rsync_argv(
    source: str,
    dest: str,
    *,
    exclude: Sequence[str] = (),
    ssh: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The rsync command rgt runs: archive mode, resumable, with progress and wire totals."""
    argv = [
        "rsync",
        "-a",
        "--partial",
        f"--partial-dir={PARTIAL_DIR}",
        f"--timeout={IO_TIMEOUT}",
        "--info=progress2",
        "--stats",
    ]
    argv += [f"--exclude={pattern}" for pattern in exclude]
    argv += list(extra)
    if ssh is not None:
        argv += ["-e", ssh]
    argv += [source, dest]
    return argv
