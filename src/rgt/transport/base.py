"""The shapes every transport shares: results, transfer statistics, errors, the Protocol."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from rgt.errors import UserError

Progress = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` while a transfer runs (total may be 0)."""


@dataclass(frozen=True)
class Result:
    """What a command on the box returned. With a `limit` given to `run`: `truncated` when
    its stdout passed it (rgt kept only that much and ended the command), and `data`, the
    stdout bytes as they came (`stdout` has invalid UTF-8 replaced)."""

    rc: int
    stdout: str
    stderr: str
    truncated: bool = False
    data: bytes = b""

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass(frozen=True)
class TransferStats:
    """What one `put` or `get` cost, summed over all its attempts.

    Bytes are counted on this machine's end of the stream to the far side (before ssh
    encrypts them), cut-off attempts included: a `put` mostly sends, a `get` mostly receives.
    `files` counts regular files written; `skipped` names the symlinks the receiver refused to
    create (absolute, or pointing outside the destination). `streams` is the most sessions
    (connections) that carried it at once.
    """

    bytes_sent: int
    bytes_received: int
    files: int
    seconds: float
    attempts: int
    skipped: tuple[str, ...] = ()
    streams: int = 1


def _one_line(text: str, limit: int = 300) -> str:
    """Collapse `text` to one line, keeping its end (the end of stderr says what went wrong)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    flat = " / ".join(lines[-3:])
    return flat if len(flat) <= limit else "..." + flat[-limit:]


def _first_line(command: str) -> str:
    """How a command is named in a message: its first line (the rest may be a long script)."""
    stripped = command.strip()
    return stripped.splitlines()[0] if stripped else "(empty command)"


class TransportError(UserError):
    """A command or transfer on a box failed.

    Carries the exit code (`rc`), the command's first line and the tail of its stderr, all in
    one message line the CLI can print as is.
    """

    def __init__(
        self,
        message: str,
        *,
        rc: int | None = None,
        command: str = "",
        stderr: str = "",
    ) -> None:
        super().__init__(message)
        self.rc = rc
        self.command = command
        self.stderr = stderr

    @classmethod
    def command_failed(cls, where: str, command: str, rc: int, stderr: str) -> TransportError:
        tail = _one_line(stderr)
        message = f"`{_first_line(command)}` on {where} exited with code {rc}" + (
            f": {tail}" if tail else ""
        )
        return cls(message, rc=rc, command=command, stderr=stderr)


class CommandTimeout(TransportError):
    """A command ran past its timeout; rgt stopped waiting for it."""

    @classmethod
    def after(cls, where: str, command: str, timeout: float, note: str = "") -> CommandTimeout:
        message = f"`{_first_line(command)}` on {where} did not finish within {timeout:g}s"
        return cls(message + (f" ({note})" if note else ""), command=command)


class Stalled(CommandTimeout):
    """A command sent no byte of output for its `idle` seconds (`run(..., idle=)`): the box is
    there but its sender is stuck, which a caller may say differently from a slow answer."""

    @classmethod
    def after_idle(cls, where: str, command: str, idle: float) -> Stalled:
        return cls(f"`{_first_line(command)}` on {where} sent no bytes for {idle:g}s",
                   command=command)


class Unreachable(TransportError):
    """The box did not answer: refused, timed out, or its name does not resolve."""


class HostKeyChanged(TransportError):
    """The box presented a different host key than the one recorded on first contact.

    Never accepted silently: it is what a man-in-the-middle looks like. It is also what a
    re-created box looks like, so the message says how to forget the old key.
    """


class AuthenticationFailed(TransportError):
    """The box (or a jump host on the way) refused our SSH key."""


class PassphraseNeeded(AuthenticationFailed):
    """Our key is passphrase-protected and no agent holds it: ssh in batch mode cannot ask for
    the passphrase, so it never offered the key (which may well be authorized)."""


class HostKeyUnknown(TransportError):
    """A hop presented a host key that is recorded nowhere and ssh was not allowed to record
    it (first contact did not happen). Unlike a changed key, retrying may help."""


class BashMissing(TransportError):
    """The box has no bash, which every rgt command on it runs under (Alpine/busybox images)."""

    @classmethod
    def on(cls, where: str, stderr: str) -> BashMissing:
        return cls(f"rgt runs every command on the box under bash, and {where} has none "
                   f"({_one_line(stderr, 80)}): install it (`apk add bash` on Alpine, "
                   "`apt-get install bash` on Debian/Ubuntu) or use an image that has bash",
                   rc=127, stderr=stderr)


# How a login shell says that `bash` itself is missing (dash, busybox ash, zsh, tcsh, fish),
# as opposed to bash saying that a command run under it is (`bash: line 1: x: command not
# found`, which names bash first and the missing command after it).
_NO_BASH = re.compile(r"(?:^|\s)bash: (?:command )?not found|command not found: bash"
                      r"|bash: Command not found|Unknown command:? .?bash")


def bash_missing(rc: int, stderr: str) -> bool:
    """Whether a command wrapped as ``bash -c ...`` failed because bash is not there."""
    return rc == 127 and bool(_NO_BASH.search(stderr))


@runtime_checkable
class Transport(Protocol):
    """How commands and files reach one box.

    `run` executes a bash command string on the box (keeping at most `limit` bytes of its
    stdout when given: `Result.truncated`; with `limit`, `idle` seconds without a byte of
    output raise `Stalled`); secrets and on-box Python travel on
    `stdin`, never in argv (argv is world-readable in /proc). `put` and `get` copy a directory's
    contents, resumably, each attempt under a timeout, retrying transient failures.
    `python` is the box's interpreter for rgt's on-box scripts, found once at `rgt up`.
    """

    python: str

    def run(
        self,
        command: str,
        *,
        stdin: bytes | None = None,
        timeout: float = 60,
        check: bool = True,
        limit: int | None = None,
        idle: float | None = None,
    ) -> Result: ...

    def put(
        self,
        local: Path,
        remote: str,
        *,
        timeout: float = 600,
        retries: int = 5,
        progress: Progress | None = None,
        exclude: Sequence[str] = (),
    ) -> TransferStats: ...

    def get(
        self,
        remote: str,
        local: Path,
        *,
        timeout: float = 600,
        retries: int = 5,
        progress: Progress | None = None,
        exclude: Sequence[str] = (),
    ) -> TransferStats: ...

    def close(self) -> None: ...
