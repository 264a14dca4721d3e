"""How `put` and `get` move files: rgt's own engine (rgt.onbox.xfer), over one or more sessions,
each the stdin and stdout (one socketpair) of a child process — ssh to the box, or a second
Python for the local box. It needs nothing but Python at either end: no rsync, no scp, no sftp.

One SSH channel moves at most its flow-control window (~2 MiB) per round trip, so on a distant
link one session is slow however fast the link is. The work is therefore split: big files in
ranges, small files one piece each, all on one queue that every session takes from. The first
session (over the shared master connection) measures the round trip and plans; more sessions,
each its own ssh connection, are added while the link keeps giving more (`Streams`).

Each session runs under two clocks: no byte moved for IO_TIMEOUT seconds means its link is
dead, and the caller's `timeout` bounds its wall time; either ends it, its unfinished pieces go
back on the queue, and a new session takes over (at most `retries` times in all), resuming
from what the receiver kept. A failure no retry can fix (a changed host key, a refused key, a
full disk, an unsafe name sent by the box) raises at once.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import os
import random
import socket
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rgt import hostos
from rgt.errors import UserError
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
"""Seconds without a byte moving before a session is abandoned (a silently dead link)."""

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
BUFFER = 1 << 18  # batches the frames of many small files into few pipe writes
MAX_NOISE = 1 << 16  # what a login script may print before the far side starts
AHEAD = 16 << 20  # bytes a pull session asks for before the first of them arrives
AHEAD_PIECES = 512
CHANGED_ROUNDS = 3  # how often a file that changes while read is tried again
BOOT = 'import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),"rgt-xfer","exec"))'
"""Run by the far side's Python: the first N bytes of stdin are the engine, the rest its stream."""

Diagnose = Callable[[str], "TransportError | None"]
"""Turns a session's stderr into a classified connection error (host key, unreachable...)."""

_ADVICE = {
    "ENOSPC": "the destination disk is full: free space there and retry",
    "EDQUOT": "the destination quota is exhausted: free space there and retry",
    "EROFS": "the destination is read-only",
}


@functools.cache
def engine() -> bytes:
    """The bytes the far side's Python runs (read once: its length goes on the command line)."""
    return script_source("xfer")


def far_command(python: str, role: str, root: str, *, bwlimit: int = 0) -> list[str]:
    """The far side's argv: PYTHON serving one session in ROLE (``send`` or ``receive``)."""
    args = [python, "-c", BOOT, str(len(engine())), "serve", role, root]
    return args + ([f"bwlimit={bwlimit}"] if bwlimit else [])


# ----------------------------------------------------------------------------- streams


@dataclass
class Streams:
    """How many sessions carry a transfer. `fixed` (> 0) is the user's choice; otherwise it
    starts from the round trip and grows while the measured rate says the sessions are held
    back by their windows, not by the link or the CPUs.

    One session carries at most WINDOW bytes per round trip (OpenSSH's channel window), so at
    100 ms it tops out near 20 MB/s (16.6 measured). The first guess assumes a link of
    ASSUMED_RATE; then, every few round trips, if the sessions together move at least half
    of what their windows allow, the link has room: half as many again are added, up to
    `most`, as long as the last addition paid (the rate rose by 10%) and enough work is left
    to repay the handshakes (~2 s at 100 ms).
    """

    fixed: int = 0
    most: int = 8
    WINDOW = 2 << 20
    ASSUMED_RATE = 80e6  # bytes/s: a good link; the measurement corrects it upwards

    def first(self, rtt: float, work: int) -> int:
        if self.fixed:
            return self.fixed
        if work < 8 * xfer.CHUNK:
            return 1
        return max(1, min(self.most, math.ceil(self.ASSUMED_RATE * rtt / self.WINDOW)))

    def more(self, now: int, rtt: float, rate: float, last_rate: float, left: int) -> int:
        """How many sessions to run, given NOW running and the rate they just moved."""
        if self.fixed or now >= self.most:
            return now
        ceiling = now * self.WINDOW / max(rtt, 1e-4)
        paid = last_rate <= 0 or rate > 1.1 * last_rate
        if rate >= 0.5 * ceiling and paid and left > 3 * rate:
            return min(self.most, now + max(1, now // 2))
        return now


MOST_STREAMS = 64


def streams_from_env() -> int:
    """RGT_STREAMS: a fixed number of sessions per transfer (0 or unset: chosen per link)."""
    value = os.environ.get("RGT_STREAMS", "").strip()
    if not value:
        return 0
    if not value.isdecimal() or not 0 <= int(value) <= MOST_STREAMS:
        raise TransportError(f"RGT_STREAMS={value!r}: give a number of streams from 1 to "
                             f"{MOST_STREAMS}, or 0 to let rgt choose")
    return int(value)


def streams_flag(value: str | None) -> int:
    """`--streams N` as typed: 1 to 64 sessions per transfer; None (not given) is 0, chosen
    per link (or RGT_STREAMS). Anything else is the user's mistake, said in one line."""
    if value is None:
        return 0
    text = value.strip()
    if not text.isdecimal() or not 1 <= int(text) <= MOST_STREAMS:
        raise UserError(f"--streams {value!r}: give a number of parallel streams from 1 to "
                        f"{MOST_STREAMS} (leave it out to let rgt choose from the link)")
    return int(text)


# ----------------------------------------------------------------------------- the work


@dataclass
class _Piece:
    fi: int  # index into the plan's files
    k: int  # range; COMMIT for a file in ranges whose every range arrived
    offset: int  # bytes of the range the receiver already has
    moved: int = 0  # bytes of it counted in the progress so far

    COMMIT = -1

    @property
    def is_commit(self) -> bool:
        return self.k == self.COMMIT


class _Plan:
    """The files to move and the queue of their pieces, shared by every session's threads."""

    def __init__(self, files: list, want: list, have: int, progress: Progress | None) -> None:
        self.files = files
        self.queue: deque[_Piece] = deque()
        self.left: dict[int, int] = {}  # file -> pieces still to land (files in ranges)
        self.cond = threading.Condition()
        self.busy = 0  # pieces taken and not yet landed or given back
        self.problems: list[list[str]] = []
        self.changed: set[str] = set()
        self.fatal: BaseException | None = None
        self.total = sum(f[1] for f in files)
        self.done = have
        self.progress = progress
        self.landed = 0  # bytes that landed in this round, for the rate
        self.written = 0  # files renamed into place
        self._shown = 0.0
        small, big = [], []
        self.returned: list[_Piece] = []  # pieces of sessions that died, for the next round
        # Newest first: a pull that is cut short has the newest checkpoint and the latest
        # logs whole before older ones (a file's ranges stay in order).
        for fi, k, offset in sorted(want, key=lambda w: (-files[w[0]][2], w[0], w[1])):
            piece = _Piece(fi, k, offset)
            (big if xfer.range_count(files[fi][1]) > 1 else small).append(piece)
            if xfer.range_count(files[fi][1]) > 1 and not piece.is_commit:
                self.left[fi] = self.left.get(fi, 0) + 1
        # Ranges and small files interleaved: every session gets some of both, and the last
        # seconds are not one session moving a thousand small files alone.
        step = max(1, len(small) // max(1, len(big)))
        while big or small:
            if big:
                self.queue.append(big.pop(0))
            for _ in range(step):
                if small:
                    self.queue.append(small.pop(0))
        self.todo = sum(self.bytes_of(p) for p in self.queue)

    def bytes_of(self, piece: _Piece) -> int:
        if piece.is_commit:
            return 0
        start, end = xfer.bounds(self.files[piece.fi][1], piece.k)
        return end - start - piece.offset

    def take(self, wait: float) -> _Piece | None:
        """The next piece; None after WAIT seconds without one, or when all is done."""
        with self.cond:
            if not self.queue and not self.finished():
                self.cond.wait(wait)
            if self.queue and self.fatal is None:
                self.busy += 1
                return self.queue.popleft()
            return None

    def finished(self) -> bool:
        return self.fatal is not None or (not self.queue and not self.busy)

    def advance(self, piece: _Piece, n: int) -> None:
        with self.cond:
            piece.moved += n
            self.done += n
            self.landed += n
            self._show()

    def landed_piece(self, piece: _Piece, why: str) -> None:
        """A piece's outcome from the receiver: "" (it is there and verified) or why not."""
        name = self.files[piece.fi][0]
        with self.cond:
            self.busy -= 1
            if why in ("changed", "mismatch") or why.endswith("did not arrive"):
                self.changed.add(name)
            elif why:
                self.problems.append([name, why])
            elif piece.is_commit or piece.fi not in self.left:
                self.written += 1
            else:
                self.left[piece.fi] -= 1
                if not self.left[piece.fi] and name not in self.changed:
                    self.queue.appendleft(_Piece(piece.fi, _Piece.COMMIT, 0))
            self.cond.notify_all()

    def give_back(self, pieces) -> None:
        """A session died: what it had not landed waits for the next round, whose plan asks
        the receiver what it kept of them (a cut piece resumes from its recorded prefix)."""
        with self.cond:
            for piece in pieces:
                self.busy -= 1
                self.done -= piece.moved
                self.returned.append(piece)
            self._show()
            self.cond.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self.cond:
            if self.fatal is None:
                self.fatal = exc
            self.cond.notify_all()

    def _show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.progress is not None and (force or now - self._shown > 0.1):
            self._shown = now
            self.progress(max(0, self.done), max(self.total, self.done))

    def show(self) -> None:
        with self.cond:
            self._show(force=True)


# ----------------------------------------------------------------------------- one session


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


class _Session:
    """One child process serving the far side, its stream, and the clocks that end it: the
    wall clock (`timeout`) and the idle clock (IO_TIMEOUT). Ending it shuts our socket first,
    so that the far side sees the end of its stream and records what it has, then kills the
    process group (ssh and what it started)."""

    def __init__(self, argv: Sequence[str], timeout: float) -> None:
        self.argv = list(argv)
        # stderr to a file: a backgrounded ssh master may keep it open; closed in stderr()
        self.err = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc, self.sock = _start(self.argv, self.err)
        self.link = xfer.Link(self.sock.makefile("rb", buffering=BUFFER),
                              self.sock.makefile("wb", buffering=BUFFER))
        self.deadline = time.monotonic() + timeout
        self.fired: str | None = None
        self.started = False
        self.inflight: deque[_Piece] = deque()
        self.error: BaseException | None = None
        self.rc: int | None = None
        self.generation = 0  # the mover's failure count when this session opened
        self._stop = threading.Event()
        self._dog = threading.Thread(target=self._watch, daemon=True)
        self._dog.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            now = time.monotonic()
            if now > self.deadline:
                self.fired = "wall"
            elif now - self.link.last > IO_TIMEOUT:
                self.fired = "idle"
            else:
                continue
            self.cut()
            return

    def cut(self) -> None:
        """End the session now: the far side gets end-of-stream, then its process group dies.
        (An ssh master may hold the far end of our socket for a minute more: shutting ours
        down ends our own blocked reads and writes now.)"""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            hostos.kill_group(self.proc)

    def begin(self) -> None:
        """Send the engine, skip whatever a login script printed until its first bytes."""
        self.link.writer.write(engine())
        self.link.sent += len(engine())
        self.link.flush()
        seen = b""
        while not seen.endswith(xfer.MAGIC):
            byte = self.link.reader.read(1)
            if not byte or len(seen) > MAX_NOISE:
                raise EOFError("the far side did not start")
            seen += byte
        self.link.received = len(seen)
        self.started = True

    def ping(self) -> float:
        started = time.monotonic()
        self.link.send_json({"op": "ping"})
        self.link.flush()
        self.link.recv_json("pong")
        return time.monotonic() - started

    def close(self) -> None:
        """End our stream (the far side exits), wait for the process, stop the clocks."""
        with contextlib.suppress(OSError):
            self.link.flush()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
        try:
            self.rc = self.proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hostos.kill_group(self.proc)
            self.rc = self.proc.wait()
        self.release()

    def release(self) -> None:
        self._stop.set()
        if self.proc.poll() is None:
            hostos.kill_group(self.proc)
        self.rc = self.proc.wait()
        for end in (self.link.writer, self.link.reader, self.sock):
            with contextlib.suppress(OSError):
                end.close()

    def stderr(self) -> str:
        self.err.seek(0)
        text = self.err.read().decode(errors="replace")
        self.err.close()
        return text


# ----------------------------------------------------------------------------- the mover


@dataclass
class _Mover:
    """One `put` or `get`: its sessions, its plan, its totals."""

    argv: Sequence[str]
    more_argv: Sequence[str]
    local_role: str  # "send" (a push) or "receive" (a pull)
    root: str
    what: str
    timeout: float
    retries: int
    progress: Progress | None
    exclude: Sequence[str]
    bwlimit: int
    python: str
    diagnose: Diagnose | None
    streams: Streams
    sent: int = 0
    received: int = 0
    failures: int = 0
    resume_at: float = 0.0  # after a failure, no session opens before this
    skipped: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    receiver: xfer.Receiver | None = None
    finisher: _Session | None = None  # a push's session kept for FINISH
    live: list[_Session] = field(default_factory=list)
    most_live: int = 0  # the most sessions open at once
    spare: list[_Session] = field(default_factory=list)  # opened, not yet at work
    opening: int = 0  # sessions being opened in the background
    openers: list[threading.Thread] = field(default_factory=list)
    open_failed: BaseException | None = None
    rtt_hint: Callable[[], float | None] | None = None

    @property
    def pushing(self) -> bool:
        return self.local_role == "send"

    # -- sessions ------------------------------------------------------------------------------

    def open(self, index: int) -> _Session:
        """A started session: the first over ARGV (the shared master), others each over a
        connection of their own (MORE_ARGV). Raises _Transient when another may succeed."""
        session = _Session(self.argv if index == 0 else self.more_argv, self.timeout)
        session.generation = self.failures
        with self.lock:
            self.live.append(session)
            self.most_live = max(self.most_live, len(self.live))
        try:
            session.begin()
        except (OSError, EOFError, xfer.XferError) as exc:
            error = self.end(session, exc)
            raise _Transient(error or TransportError(f"{self.what} failed"),
                             session.generation) from None
        return session

    def end(self, session: _Session, exc: BaseException | None) -> Exception | None:
        """Close SESSION and count its bytes; the classified error (None: it ended well)."""
        if exc is None:
            session.close()
        else:
            if isinstance(exc, (OSError, EOFError)) and not _local_fault(exc) and (
                    session.started and self.pushing):
                exc = _far_error(session.link) or exc
            session.cut()
            session.release()
        with self.lock:
            self.sent += session.link.sent
            self.received += session.link.received
            with contextlib.suppress(ValueError):
                self.live.remove(session)
        stderr = session.stderr()
        if exc is None and session.rc == 0:
            return None
        error, transient = _classify(exc, session.rc or 0, stderr, session.fired,
                                     started=session.started, what=self.what,
                                     python=self.python, timeout=self.timeout,
                                     diagnose=self.diagnose)
        if not transient:
            raise error
        return error

    def first_session(self) -> _Session:
        """Session 0, retried with backoff while the failure is one a retry may fix."""
        while True:
            self.wait_out_backoff()
            try:
                return self.open(0)
            except _Transient as t:
                self.count_failure(t.error, t.generation)

    def wait_out_backoff(self) -> None:
        time.sleep(max(0.0, self.resume_at - time.monotonic()))

    def count_failure(self, error: Exception, generation: int) -> None:
        """One failure more, unless another session's failure since GENERATION (the count
        when the failed session opened) already stands for it: one cut link that drops eight
        sessions is one failure. Raises once the retries are spent; sets the backoff."""
        with self.lock:
            if generation != self.failures:
                return
            self.failures += 1
            if self.failures > self.retries:
                if isinstance(error, Unreachable):
                    raise error
                attempts = self.failures
                after = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
                raise TransportError(f"{error}{after}")
            pause = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (self.failures - 1))
            self.resume_at = time.monotonic() + pause * random.uniform(0.8, 1.2)

    # -- one round: plan, move, finish ---------------------------------------------------------

    def early_sessions(self) -> None:
        """Before the first session is up (its handshake takes ~8 round trips): estimate the
        round trip with RTT_HINT and, if the link is distant, open the extra sessions a big
        transfer will want alongside it. A push knows its size already; a pull guesses big
        (spares it does not need are closed unused)."""
        hint = self.rtt_hint
        self.rtt_hint = None  # the first round only
        if hint is None or self.bwlimit or self.streams.fixed == 1:
            return

        def guess() -> None:
            rtt = hint()
            if rtt is None or rtt < 0.01:
                return
            work = xfer_size(self.root) if self.pushing else 1 << 40
            self.preopen(self.streams.first(rtt, work) - 1)

        thread = threading.Thread(target=guess, daemon=True, name="rgt-xfer-rtt")
        self.openers.append(thread)  # joined with them: what it opens is closed if unused
        thread.start()

    def round(self) -> tuple[_Plan, list]:
        """Plan and move everything once; (the plan, the LIST's dirs and links)."""
        self.early_sessions()
        session = self.first_session()
        try:
            rtt = session.ping()  # a second ping would only cost another round trip
            if self.pushing:
                single = not os.path.isdir(self.root)
                dirs, files, links, problems = xfer.scan(self.root, self.exclude)
                target = self.streams.first(rtt, sum(f[1] for f in files))
            else:  # the size is known after SCAN: open for a big pull meanwhile
                target = self.streams.first(rtt, 1 << 40)
            with self.lock:  # `live` holds this session and the spares already open
                have = self.opening + len(self.live) - 1
            self.preopen(target - 1 - have)  # their handshakes overlap the plan
            if self.pushing:
                session.link.send_json({"op": "plan", "dirs": dirs, "files": files,
                                        "links": links})
                session.link.flush()
                answer = session.link.recv_json("want")
                want = _checked_want(answer.get("files"), files)
                have = int(answer.get("have") or 0)
                problems += _pairs(answer.get("problems"))
            else:
                single = False
                session.link.send_json({"op": "scan", "exclude": list(self.exclude)})
                session.link.flush()
                listing = session.link.recv_json("list")
                dirs, files, links = xfer.checked_list(listing)
                problems = _pairs(listing.get("problems"))
                self.receiver = xfer.Receiver(self.root)
                want, have, more = self.receiver.plan(dirs, files)
                problems += more
        except (OSError, EOFError, xfer.XferError) as exc:
            self.close_spares()
            error = self.end(session, exc)
            raise _Transient(error or TransportError(f"{self.what} failed"),
                             session.generation) from None
        plan = _Plan(files, want, have, self.progress)
        plan.problems += problems
        plan.show()
        self.run_sessions(session, plan, rtt, single,
                          min(target, self.streams.first(rtt, plan.todo)))
        if plan.fatal is not None:
            raise plan.fatal
        plan.show()
        return plan, [dirs, links]

    def preopen(self, count: int) -> None:
        """Open COUNT more sessions in the background (a handshake is several round trips:
        ~2 s at 100 ms), each put in `spare` once it is ready for work."""
        def opener() -> None:
            try:
                session = self.open(1)
                with self.lock:
                    self.spare.append(session)
            except _Transient as t:
                try:
                    self.count_failure(t.error, t.generation)
                except BaseException as fatal:  # noqa: BLE001 - handed to the coordinator
                    self.open_failed = fatal
            except BaseException as fatal:  # noqa: BLE001 - a key refused, a host key changed
                self.open_failed = fatal
            finally:
                with self.lock:
                    self.opening -= 1

        for _ in range(max(0, count)):
            with self.lock:
                self.opening += 1
            thread = threading.Thread(target=opener, daemon=True, name="rgt-xfer-open")
            self.openers.append(thread)
            thread.start()

    def run_sessions(self, first: _Session, plan: _Plan, rtt: float, single: bool,
                     target: int) -> None:
        """Sessions take pieces from PLAN until none is left: more are started while the
        link has room (TARGET at first, see `Streams`), a dead one is replaced."""
        threads: list[threading.Thread] = []
        alive = [0]  # sessions at work

        def worker(session: _Session, index: int) -> None:
            try:
                exc: BaseException | None = None
                try:
                    if self.pushing:
                        self.push_pieces(session, plan, single)
                    else:
                        self.pull_pieces(session, plan)
                except (OSError, EOFError, xfer.XferError) as e:
                    exc = e
                plan.give_back(session.inflight)
                session.inflight.clear()
                if exc is None and index == 0 and self.pushing:
                    self.finisher = session  # kept open for FINISH
                    return
                try:
                    error = self.end(session, exc)
                except BaseException as fatal:  # noqa: BLE001 - handed to the coordinator
                    plan.fail(fatal)
                    return
                if error is not None:
                    self.fail_soft(plan, error, session.generation)
            finally:
                with plan.cond:
                    alive[0] -= 1
                    plan.cond.notify_all()

        def launch(session: _Session) -> None:
            index = len(threads)
            with plan.cond:
                alive[0] += 1
            t = threading.Thread(target=worker, args=(session, index), daemon=True,
                                 name=f"rgt-xfer-{index}")
            threads.append(t)
            t.start()

        if self.bwlimit:
            target = 1  # one paced stream: a cap is a cap, however many sessions share it
        launch(first)
        window = max(1.0, 6 * rtt)
        mark_t, mark_bytes, last_rate = time.monotonic(), 0, 0.0
        while True:
            with plan.cond:
                if plan.finished() and alive[0] == 0:
                    break
                plan.cond.wait(0.1)
                if self.open_failed is not None:
                    plan.fatal = plan.fatal or self.open_failed
                fatal = plan.fatal is not None
                running, left = alive[0], len(plan.queue)
                landed = plan.landed
            if fatal:  # a full disk, a refused key: every session stops now
                with self.lock:
                    doomed = list(self.live)
                for session in doomed:
                    session.cut()
                continue
            with self.lock:
                ready, self.spare = self.spare, []
                opening = self.opening
            for session in ready:
                if running < target and left and not plan.finished():
                    launch(session)
                    running += 1
                else:
                    with contextlib.suppress(Exception):
                        self.end(session, None)
            if plan.finished():
                continue
            now = time.monotonic()
            if now - mark_t >= window:
                rate = (landed - mark_bytes) / (now - mark_t)
                wanted = self.streams.more(running, rtt, rate, last_rate,
                                           self._bytes_left(plan))
                if wanted > target and not self.bwlimit:
                    target, last_rate = wanted, rate
                mark_t, mark_bytes = now, landed
            if running + opening < target and left and now >= self.resume_at:
                self.preopen(min(target - running - opening, left))
        for t in threads:
            t.join()
        self.close_spares()

    def close_spares(self) -> None:
        """Sessions opened for work that ran out first: closed unused."""
        while self.openers:
            self.openers.pop(0).join()
        with self.lock:
            ready, self.spare = self.spare, []
        for session in ready:
            with contextlib.suppress(Exception):
                self.end(session, None)

    @staticmethod
    def _bytes_left(plan: _Plan) -> int:
        with plan.cond:
            return sum(plan.bytes_of(p) for p in plan.queue)

    def fail_soft(self, plan: _Plan, error: Exception, generation: int) -> None:
        """A session failed in a way another may not: count it (the coordinator waits out
        the backoff before it opens the next), or end the transfer once retries are spent."""
        try:
            self.count_failure(error, generation)
        except BaseException as fatal:  # noqa: BLE001 - handed to the coordinator
            plan.fail(fatal)

    # -- what one session does -----------------------------------------------------------------

    def push_pieces(self, session: _Session, plan: _Plan, single: bool) -> None:
        """Send pieces (and COMMITs) as fast as the stream takes them; a thread of its own
        reads the far side's ACKs, one per piece, in order."""
        link = session.link
        acks_done = threading.Event()
        failure: list[BaseException] = []

        def read_acks() -> None:
            try:
                while True:
                    with plan.cond:  # an ACK comes only for a piece sent
                        while not session.inflight and not acks_done.is_set():
                            plan.cond.wait(0.5)
                        if not session.inflight:
                            return
                    kind, payload = link.recv()
                    if kind != b"J":
                        raise xfer.XferError("protocol", f"expected ACK, got {kind!r}")
                    message = xfer.parse_json(payload, "ACK")
                    if message.get("op") != "ack":
                        raise xfer.XferError("protocol", "expected ACK")
                    with plan.cond:
                        piece = session.inflight.popleft()
                    plan.landed_piece(piece, str(message.get("why") or ""))
            except (OSError, EOFError, xfer.XferError, IndexError) as exc:
                failure.append(exc)
                with contextlib.suppress(OSError):
                    session.sock.shutdown(socket.SHUT_RDWR)  # the sending side stops too

        reader = threading.Thread(target=read_acks, daemon=True)
        reader.start()
        buf = bytearray(xfer.CHUNK)
        pacer = xfer.Pacer(self.bwlimit)
        try:
            while not failure:
                piece = plan.take(0)
                if piece is None:
                    link.flush()
                    if plan.finished():
                        break
                    piece = plan.take(2.0)
                    if piece is None:
                        link.keepalive()
                        continue
                with plan.cond:
                    session.inflight.append(piece)
                    plan.cond.notify_all()
                entry = plan.files[piece.fi]
                if piece.is_commit:
                    link.send_json({"op": "commit", "file": entry})
                else:
                    xfer.send_piece(link, self.root, entry, piece.k, piece.offset, buf,
                                    single=single, pacer=pacer,
                                    on_bytes=lambda n, p=piece: plan.advance(p, n))
            link.flush()
        except OSError as exc:  # the stream broke under us: the far side may have said why
            failure.append(exc)
        finally:
            acks_done.set()
            with plan.cond:
                plan.cond.notify_all()
            reader.join()
        said = [e for e in failure if isinstance(e, xfer.XferError)]
        if said or failure:
            raise (said or failure)[0]

    def pull_pieces(self, session: _Session, plan: _Plan) -> None:
        """Ask for pieces ahead (GET, up to AHEAD bytes in flight) from a thread of its own;
        read them here, in the order asked, into the receiver."""
        link = session.link
        asked_done = threading.Event()
        failure: list[BaseException] = []
        receiver = self.receiver
        assert receiver is not None

        def ask() -> None:
            try:
                while not failure:
                    batch = []
                    with plan.cond:
                        ahead = sum(plan.bytes_of(p) for p in session.inflight)
                        room = len(session.inflight) < AHEAD_PIECES and ahead < AHEAD
                    while room:
                        piece = plan.take(0)
                        if piece is None:
                            break
                        if piece.is_commit:  # this side is the receiver: commit here
                            plan.landed_piece(piece, receiver.commit(plan.files[piece.fi]))
                            continue
                        batch.append(piece)
                        ahead += plan.bytes_of(piece)
                        room = len(session.inflight) + len(batch) < AHEAD_PIECES and (
                            ahead < AHEAD)
                    if batch:
                        with plan.cond:
                            session.inflight.extend(batch)
                            plan.cond.notify_all()
                        link.send_json({"op": "get", "pieces": [
                            [*plan.files[p.fi], p.k, p.offset] for p in batch]})
                        link.flush()
                        continue
                    with plan.cond:
                        if plan.finished() and not session.inflight:
                            break
                        plan.cond.wait(0.5)
                    link.keepalive()
            except (OSError, xfer.XferError) as exc:
                failure.append(exc)
            finally:
                asked_done.set()
                with plan.cond:
                    plan.cond.notify_all()

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        buf = bytearray(xfer.CHUNK)
        try:
            while not failure:
                with plan.cond:
                    while not session.inflight and not asked_done.is_set():
                        plan.cond.wait(0.5)
                    if not session.inflight:
                        break
                    piece = session.inflight[0]
                kind, payload = link.recv()
                if kind != b"P":
                    raise xfer.XferError("protocol", f"expected PIECE, got {kind!r}")
                entry, k, offset = xfer.piece_header(payload)
                expected = plan.files[piece.fi]
                if entry != expected or (k, offset) != (piece.k, piece.offset):
                    raise xfer.XferError("protocol", f"the box sent {entry[0]!r} range {k} "
                                                     "when another piece was asked for")
                why = receiver.piece(link, expected, k, offset, buf,
                                     on_bytes=lambda n, p=piece: plan.advance(p, n))
                with plan.cond:
                    session.inflight.popleft()
                plan.landed_piece(piece, why)
        except BaseException as exc:
            failure.append(exc)
            with contextlib.suppress(OSError):
                session.sock.shutdown(socket.SHUT_RDWR)  # the asking side stops too
        finally:
            asked_done.set()
            asker.join()
        if failure:
            raise failure[0]

    # -- the end ---------------------------------------------------------------------------

    def finish(self, plan: _Plan, dirs: list, links: list) -> None:
        clean = not plan.problems and not plan.changed and not plan.returned
        if not self.pushing:
            assert self.receiver is not None
            skipped, problems = self.receiver.finish(dirs, links, clean)
        else:
            session, self.finisher = self.finisher or self.first_session(), None
            try:
                session.link.send_json({"op": "finish", "dirs": dirs, "files": [],
                                        "links": links, "clean": clean})
                session.link.flush()
                done = session.link.recv_json("done")
            except (OSError, EOFError, xfer.XferError) as exc:
                error = self.end(session, exc)
                raise _Transient(error or TransportError(f"{self.what} failed"),
                                 session.generation) from None
            self.end(session, None)
            skipped = [str(s) for s in done.get("skipped") or []]
            problems = _pairs(done.get("problems"))
        self.skipped += skipped
        plan.problems += problems


class _Transient(Exception):
    """A session failed in a way a new one may not (carried to the retry loop)."""

    def __init__(self, error: Exception, generation: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.generation = generation


def _checked_want(items, files: list) -> list:
    if not isinstance(items, list):
        raise xfer.XferError("protocol", "WANT without a file list")
    out = []
    for item in items:
        try:
            fi, k, offset = (int(x) for x in item)
        except (TypeError, ValueError):
            raise xfer.XferError("protocol", f"WANT names no piece: {item!r}") from None
        if not 0 <= fi < len(files) or not -1 <= k < xfer.range_count(files[fi][1]):
            raise xfer.XferError("protocol", f"WANT names no piece of LIST: {item!r}")
        if k == _Piece.COMMIT:
            out.append([fi, k, 0])
            continue
        start, end = xfer.bounds(files[fi][1], k)
        out.append([fi, k, offset if 0 <= offset <= end - start else 0])
    return out


def _pairs(items) -> list:
    return [[str(x) for x in item[:2]] for item in items or [] if isinstance(item, list)]


def _local_fault(exc: BaseException) -> bool:
    """An OSError on this machine's own files (not the pipe to the far side)."""
    return isinstance(exc, OSError) and exc.errno not in (errno.EPIPE, errno.ENOTCONN,
                                                          errno.EBADF, None) and not isinstance(
        exc, ConnectionError)


def _far_error(link: xfer.Link) -> xfer.XferError | None:
    """The far side's own account of why the stream stopped, if it sent one before exiting."""
    with contextlib.suppress(OSError, EOFError, xfer.XferError, ValueError):
        while True:  # skip the ACKs still on the way to the error frame
            kind, payload = link.recv()
            if kind == b"J":
                message = json.loads(payload)
                if isinstance(message, dict) and message.get("op") == "error":
                    return xfer.XferError(str(message.get("code")),
                                          str(message.get("message")))
    return None


def _classify(error: BaseException | None, rc: int, stderr: str, fired: str | None, *,
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
    if not started and rc != 255 and rc >= 0:
        if rc == 127 or "not found" in stderr:
            return TransportError(
                f"{what} failed: {python} is not installed on the box (rgt moves files with "
                f"it): {tail or f'exit {rc}'}"), False
        return TransportError(f"{what} failed: the transfer helper did not start "
                              f"(exit {rc})" + (f": {tail}" if tail else "")), False
    if rc == 255 or rc < 0 or rc == 3 or error is not None:
        # ssh's own failure (a dropped link), or the far side saw us vanish: resume
        return TransportError(f"{what} failed: the connection dropped"
                              + (f": {tail}" if tail else "")), True
    return TransportError(f"{what} failed: the far side exited with code {rc}"
                          + (f": {tail}" if tail else "")), False


def move(argv: Sequence[str], *, local_role: str, root: Path | str, what: str,
         timeout: float, retries: int, progress: Progress | None = None,
         exclude: Sequence[str] = (), bwlimit: int = 0, python: str = "python3",
         diagnose: Diagnose | None = None, more_argv: Sequence[str] | None = None,
         streams: int = 0, rtt_hint: Callable[[], float | None] | None = None
         ) -> TransferStats:
    """Move `root`'s contents: this side is `local_role`, the far side runs `argv` (from
    `far_command`) in each session — the first as given, later ones as `more_argv` (their
    own connections). Sessions that fail are replaced at most `retries` times in all, with
    exponential backoff; files that change while read are tried CHANGED_ROUNDS times more.
    `streams` fixes the number of sessions (0: chosen from the link, see `Streams`);
    `rtt_hint`, if given, estimates the round trip before the first session is up (a TCP
    handshake), so that extra sessions open alongside the first."""
    started = time.monotonic()
    mover = _Mover(list(argv), list(more_argv or argv), local_role, str(root), what, timeout,
                   retries, progress, list(exclude), bwlimit, python, diagnose,
                   Streams(fixed=streams or streams_from_env()), rtt_hint=rtt_hint)
    rounds = written = 0
    while True:
        try:
            plan, (dirs, links) = mover.round()
            mover.finish(plan, dirs, links)
        except _Transient as t:
            mover.count_failure(t.error, t.generation)
            mover.wait_out_backoff()
            continue
        written += plan.written
        if plan.returned and not plan.problems:
            continue  # a session died: plan again, resuming what it left
        if plan.changed and rounds < CHANGED_ROUNDS and not plan.problems:
            rounds += 1  # listed again: the new version has a new size or mtime
            continue
        break
    problems = plan.problems + [[name, f"it changed while it was read, {rounds + 1} times"]
                                for name in sorted(plan.changed)]
    if problems:
        shown = "; ".join(f"{name} ({why})" for name, why in problems[:3])
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise TransportError(f"{what} failed: some files could not be moved: {shown}{more}")
    return TransferStats(mover.sent, mover.received, written, time.monotonic() - started,
                         1 + mover.failures, skipped=tuple(mover.skipped),
                         streams=max(1, mover.most_live))


def xfer_size(root: str) -> int:
    """Bytes a push of ROOT would move, all of it (for the first guess at its streams)."""
    return tree_size(Path(root))


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
