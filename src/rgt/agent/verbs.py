"""How a tool runs one of rgt's verbs: the `rgt` command line in a child process.

Why a child and not the lifecycle functions in the server's own process: a verb is written for
a process of its own. It may exit (sys.exit, os._exit after a Ctrl-C), install signal
handlers, prompt on stdin, or start children that inherit stdout — which here is the MCP wire.
In a child, a verb that fails or hangs ends as an exit code and one stderr line, a tool call
the client cancels is a process group killed, stdin is /dev/null (no prompt can be answered by
the agent: a typed confirmation stays a person's), and the results are the `--json` documents
the README already promises. The cost is rgt's start, ~0.3 s a call.

Only what the child wrote is read, and at most CAPTURE_BYTES of each stream (a log's tail:
its last bytes), so a box that answers with a gigabyte costs the server a few MB.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.abc import ByteReceiveStream

CAPTURE_BYTES = 4 * 1024 * 1024  # a --json document is far smaller; a log keeps its tail
PROGRESS_EVERY_S = 2.0
Progress = Callable[[float, str], Awaitable[None]]


@dataclass
class Outcome:
    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    cut: bool = False  # stdout was longer than CAPTURE_BYTES (the head or the tail was kept)

    def document(self) -> dict | list | None:
        """The --json document on stdout, if it is one (`gotcha search --json` is a list)."""
        try:
            value = json.loads(self.stdout)
        except ValueError:
            return None
        return value if isinstance(value, dict | list) else None

    def error_line(self) -> str:
        """rgt's one-line error (`error: ...`), else the last line it wrote to stderr."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        for line in reversed(lines):
            if line.startswith("error:"):
                return line.removeprefix("error:").strip()
        return lines[-1] if lines else ""


async def rgt(*args: str, timeout_s: float, stdin: str | None = None, tail: bool = False,
              progress: Progress | None = None) -> Outcome:
    """Run `rgt ARGS` with STDIN (else /dev/null); wait at most TIMEOUT_S, then end its process
    group. TAIL keeps the end of a long stdout instead of its start."""
    argv = [sys.executable, "-m", "rgt", *args]
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "120",
           "PYTHONIOENCODING": "utf-8"}
    started = time.monotonic()
    process = await anyio.open_process(
        argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    out, err = bytearray(), bytearray()
    cut = {"out": False}
    timed_out = False
    try:
        async with anyio.create_task_group() as group:
            drained = [anyio.Event(), anyio.Event()]
            group.start_soon(_drain, process.stdout, out, tail, cut, "out", drained[0])
            group.start_soon(_drain, process.stderr, err, True, {}, "err", drained[1])
            if stdin is not None:
                await process.stdin.send(stdin.encode())
                await process.stdin.aclose()
            with anyio.move_on_after(timeout_s) as scope:
                while process.returncode is None:
                    with anyio.move_on_after(PROGRESS_EVERY_S):
                        await process.wait()
                    if process.returncode is None and progress is not None:
                        await progress(time.monotonic() - started, " ".join(args[:1]))
            if scope.cancelled_caught:
                timed_out = True
                await _end(process)
            # A child the verb left behind may hold its pipes open: read what is there, then
            # stop reading.
            with anyio.move_on_after(3):
                for event in drained:
                    await event.wait()
            group.cancel_scope.cancel()
    finally:  # a cancelled tool call (the client gave up): the verb ends with it
        if process.returncode is None:
            with anyio.CancelScope(shield=True):
                await _end(process)
    return Outcome(args and list(args) or [], process.returncode if not timed_out else 124,
                   out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                   time.monotonic() - started, timed_out, cut["out"])


async def _drain(stream: ByteReceiveStream | None, into: bytearray, tail: bool,
                 cut: dict, name: str, done: anyio.Event) -> None:
    """Read STREAM to its end, keeping at most CAPTURE_BYTES of it (its end when TAIL)."""
    try:
        if stream is not None:
            await _read(stream, into, tail, cut, name)
    finally:
        done.set()


async def _read(stream: ByteReceiveStream, into: bytearray, tail: bool, cut: dict, name: str
                ) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                             anyio.BrokenResourceError):
        while True:
            chunk = await stream.receive(65536)
            if tail:
                into += chunk
                if len(into) > CAPTURE_BYTES:
                    del into[:len(into) - CAPTURE_BYTES]
                    cut[name] = True
            elif len(into) < CAPTURE_BYTES:
                into += chunk[:CAPTURE_BYTES - len(into)]
                cut[name] = cut.get(name) or len(into) >= CAPTURE_BYTES
            else:
                cut[name] = True


async def _end(process) -> None:
    """SIGTERM to the verb's process group (it cleans up as after a Ctrl-C: records intent,
    closes transfers); SIGKILL to the group if the verb is still there a few seconds later."""
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        with anyio.move_on_after(wait_s):
            await process.wait()
        if process.returncode is not None:
            return
