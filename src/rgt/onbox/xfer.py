"""Move a directory's contents between two machines over one or more byte streams, with nothing
but Python on either end.

The same file runs on both machines: the laptop imports it, the box gets it on stdin
(``python3 -c BOOT N serve ROLE ROOT`` reads N bytes of this script, then the session's stream
follows on the same stdin). The laptop drives every session; the far side serves it, as the
receiving end (a push) or the sending end (a pull). A transfer is one or more sessions, each
its own ssh connection, which share the work (rgt.transport.transfer decides how many):

    laptop -> PING                     far -> PONG      (the round trip, measured)
  push, the far side receives:
    laptop -> PLAN  dirs, files, links far -> WANT      the ranges it lacks, per file
    laptop -> PIECE DATA... END        far -> ACK       per piece, in order
    laptop -> COMMIT a file in ranges  far -> ACK
    laptop -> FINISH dirs, links       far -> DONE
  pull, the far side sends:
    laptop -> SCAN  excludes           far -> LIST      dirs, files (size, mtime, mode), links
    laptop -> GET   file, range        far -> PIECE DATA... END   (many GETs in flight)

A file is cut into ranges on a grid that depends on its size alone (`grid`): a small file is
one range, a big one many, so that several sessions can carry one file and an interrupted
transfer resends only the ranges that did not arrive. Every piece carries the sha256 of what
the sender read; the receiver hashes what it wrote and keeps the range only if the two agree.
A file in one range is renamed over its real name at once; the ranges of a bigger one go into
one partial file, each verified range recorded beside it (``KEY.ranges``), and COMMIT renames
it once every range of the file is recorded (and a resumed transfer re-hashes recorded ranges
from the disk before trusting them). So no file ever carries its real name before all of it
is there and verified. Partials live in ``DIR/.rgt-partial/`` under a key derived from the
file's name, size and mtime: only a partial of the same version of a file is ever resumed.

The sender checks size and mtime before and after reading each piece: a file that changed
while it was read is reported (``changed``), never half-sent as whole; the laptop lists it
again and retries. Text-like files (by name: logs, JSON, code) travel zlib-compressed where a
chunk shrinks; checkpoints and archives never do.

Sparse files stay sparse (issue 28: a 5 GB file of holes on the box once filled a laptop's
disk): a chunk of zeros travels as one small compressed frame whatever the file's name, and
the receiver leaves a hole instead of writing zeros where its file already reads as zeros
(past its end, or a hole), so a file of holes costs neither link nor disk.

The receiver trusts nothing it is sent (on a pull the sender is the box): every name is
checked (relative, no ``..``, ``.`` or empty part, no NUL); no symlink on the way to a file is
followed (one standing where a directory belongs is replaced, as rsync does); a symlink is
created only if its target is relative and stays inside the root; file modes lose their
setuid/setgid/sticky bits. Sockets, fifos and devices are not data and are not sent.

Standard library only, Python >= 3.8 (it runs on whatever the box's image ships).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import posixpath
import re
import stat
import struct
import sys
import threading
import time
import zlib

from rgt.onbox._common import TMP_SUFFIX

MAGIC = b"\0rgt-xfer-2\0"
"""The far side's first bytes: whatever a chatty login script printed before them is skipped."""

PARTIAL_DIR = ".rgt-partial"
RANGES_SUFFIX = ".ranges" + TMP_SUFFIX  # beside a partial: its verified ranges, one a line
CHUNK = 1 << 20
RANGE_MIN = 4 << 20  # a file up to this size is one range; bigger ones are cut
RANGE_MAX = 64 << 20
RANGES_PER_FILE = 256  # ranges grow past RANGE_MIN to keep a file's count near this
MAX_JSON = 256 << 20  # a LIST of a million files is ~100 MB; more is a broken or hostile peer
FAR_IDLE_S = 120.0  # the far side gives up on a peer that has not moved for this long
KEEPALIVE_S = 5.0  # a side busy scanning a big tree says so this often (both sides' idle clocks)

_ZEROS = bytes(CHUNK)  # compared against (memcmp through bytes.startswith), never written
_HEADER = struct.Struct(">cI")  # kind, payload length
# Errors after which no other file can be written either: stop instead of trying them all.
_FATAL = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}
# Worth compressing: text. Never: what is already compressed or is dense binary (checkpoints).
_TEXT = re.compile(
    r"\.(txt|log|out|err|json|jsonl|ndjson|csv|tsv|yaml|yml|toml|ini|cfg|conf|md|rst|html?"
    r"|xml|svg|py|pyi|ipynb|sh|c|h|cc|cpp|hpp|cu|js|ts|css|sql|tex|r|jl|go|rs|java|lock)$",
    re.I)


class XferError(Exception):
    """A transfer cannot go on: CODE is an errno name (``ENOSPC``...), or ``missing``,
    ``unsafe``, ``protocol``. Raised on either side; the far side sends it as an error frame,
    so the laptop gets the same exception whichever side hit it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_os(cls, exc: OSError, what: str) -> XferError:
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        return cls(code, f"{what}: {exc.strerror or exc}")


class Link:
    """Both directions of one session's stream, framed, counted (the laptop reports these
    counts as its wire totals) and time-stamped (a watchdog ends a session that stopped
    moving: `last` is when something other than a keepalive went out, or anything came in).
    Sending is safe from two threads at once (a frame is written whole)."""

    def __init__(self, reader, writer) -> None:
        self.reader = reader
        self.writer = writer
        self.sent = 0
        self.received = 0
        self.last = time.monotonic()
        self.kept = 0.0  # when this side last sent a keepalive
        self.lock = threading.Lock()

    def send(self, kind: bytes, payload=b"") -> None:
        with self.lock:
            self.writer.write(_HEADER.pack(kind, len(payload)))
            if len(payload):
                self.writer.write(payload)
            self.sent += _HEADER.size + len(payload)
        if kind != b"K":
            self.last = time.monotonic()

    def send_json(self, message: dict) -> None:
        self.send(b"J", json.dumps(message, separators=(",", ":")).encode("utf-8",
                                                                         "surrogateescape"))

    def flush(self) -> None:
        with self.lock:
            self.writer.flush()

    def keepalive(self) -> None:
        """While this side is busy (scanning or re-hashing) or idle and the other waits: an
        empty frame every few seconds, so that the other side's idle clock does not take this
        one for a dead link (this side's own clock ignores it: it says nothing of the other)."""
        now = time.monotonic()
        if now - max(self.last, self.kept) > KEEPALIVE_S:
            self.kept = now
            self.send(b"K")
            self.flush()

    def _exact(self, n: int) -> bytes:
        data = self.reader.read(n) if n else b""
        self.received += len(data)
        self.last = time.monotonic()
        if len(data) != n:
            raise EOFError("the stream ended mid-transfer")
        return data

    def recv_head(self, eof_ok: bool = False):
        """(kind, payload length) of the next frame; its payload is still to be read. With
        EOF_OK, a stream that ends cleanly between frames gives (None, 0)."""
        while True:
            first = self.reader.read(_HEADER.size)
            if eof_ok and not first:
                return None, 0
            self.received += len(first)
            self.last = time.monotonic()  # a keepalive too: the other side is there
            rest = self._exact(_HEADER.size - len(first)) if len(first) < _HEADER.size else b""
            kind, n = _HEADER.unpack(first + rest)
            if not (kind == b"K" and n == 0):
                break
        if n > (MAX_JSON if kind == b"J" else CHUNK + 1024):
            raise XferError("protocol", f"a {n}-byte frame is larger than any rgt sends")
        return kind, n

    def recv(self, eof_ok: bool = False):
        kind, n = self.recv_head(eof_ok)
        return kind, (self._exact(n) if kind is not None else b"")

    def recv_into(self, view) -> None:
        """Fill VIEW with payload: file data lands in one reused buffer, not in a fresh
        megabyte per frame (allocating and faulting those in costs as much as the copy)."""
        got = 0
        while got < len(view):
            n = self.reader.readinto(view[got:])
            if not n:
                break
            got += n
        self.received += got
        self.last = time.monotonic()
        if got != len(view):
            raise EOFError("the stream ended mid-transfer")

    def recv_json(self, op: str) -> dict:
        kind, payload = self.recv()
        if kind != b"J":
            raise XferError("protocol", f"expected {op}, got a {kind!r} frame")
        message = parse_json(payload, op)
        if message.get("op") != op:
            raise XferError("protocol", f"expected {op}, got {str(message.get('op'))[:40]}")
        return message


def parse_json(payload: bytes, op: str) -> dict:
    """A JSON frame's object; an error frame from the other side is raised as its XferError."""
    try:
        message = json.loads(payload.decode("utf-8", "surrogateescape"))
    except ValueError:
        raise XferError("protocol", f"expected {op}, got unreadable JSON") from None
    if not isinstance(message, dict):
        raise XferError("protocol", f"expected {op}, got {type(message).__name__}")
    if message.get("op") == "error":
        raise XferError(str(message.get("code", "EIO")), str(message.get("message", "")))
    return message


# ----------------------------------------------------------------------------- excludes


def _glob_regex(pattern: str) -> str:
    """rsync's wildcards: ``*`` stops at ``/``, ``**`` does not, ``?``, ``[...]``."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            end = pattern.find("]", j)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_excludes(patterns):
    """[(regex, whole_path, dirs_only)] with rsync's --exclude meaning: a pattern without ``/``
    matches a name at any depth, one with ``/`` or ``**`` the end of the path below the root,
    one starting with ``/`` the whole path; a trailing ``/`` matches directories only."""
    rules = []
    for pattern in patterns:
        dirs_only = pattern.endswith("/")
        body = pattern.rstrip("/")
        anchored = body.startswith("/")
        body = body.lstrip("/")
        if not body:
            continue
        whole = anchored or "/" in body or "**" in body
        regex = _glob_regex(body)
        regex = ("^" if anchored or not whole else "(?:^|/)") + regex + "$"
        rules.append((re.compile(regex, re.S), whole, dirs_only))
    return rules


def excluded(rules, rel: str, is_dir: bool) -> bool:
    name = rel.rpartition("/")[2]
    return any(
        (is_dir or not dirs_only) and rx.search(rel if whole else name)
        for rx, whole, dirs_only in rules
    )


# ----------------------------------------------------------------------------- names


def check_name(rel) -> str:
    """REL if it is a plain relative path below the root; XferError otherwise."""
    if not isinstance(rel, str) or not rel or "\0" in rel or rel.startswith("/"):
        raise XferError("unsafe", f"refusing the file name {rel!r}: not a relative path")
    for part in rel.split("/"):
        if part in ("", ".", "..", PARTIAL_DIR):
            raise XferError("unsafe", f"refusing the file name {rel!r}: it could leave the "
                                      "destination or collide with rgt's own files")
    return rel


def link_stays_inside(rel: str, target) -> bool:
    """Whether a symlink at REL pointing to TARGET resolves inside the root, lexically."""
    if not isinstance(target, str) or not target or "\0" in target or target.startswith("/"):
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return joined != ".." and not joined.startswith("../") and not joined.startswith("/")


def partial_name(rel: str, size: int, mtime_ns: int) -> str:
    key = hashlib.sha256(f"{rel}\0{size}\0{mtime_ns}".encode("utf-8", "surrogateescape"))
    return key.hexdigest()[:32] + TMP_SUFFIX


# ----------------------------------------------------------------------------- ranges


def range_size(size: int) -> int:
    """The grid a file of SIZE bytes is cut on: one range up to RANGE_MIN, then ranges of
    RANGE_MIN growing to RANGE_MAX (whole MiB) to keep a file near RANGES_PER_FILE of them.
    A function of the size alone, so that every attempt cuts a file the same way."""
    if size <= RANGE_MIN:
        return max(size, 1)
    per = -(-size // RANGES_PER_FILE)
    per = -(-per // CHUNK) * CHUNK
    return max(RANGE_MIN, min(RANGE_MAX, per))


def range_count(size: int) -> int:
    return max(1, -(-size // range_size(size)))


def bounds(size: int, k: int):
    """(start, end) of range K of a SIZE-byte file."""
    r = range_size(size)
    return k * r, min(size, (k + 1) * r)


def compressible(rel: str) -> bool:
    """Text-like by its name: worth zlib on the wire. Checkpoints and archives never are."""
    return bool(_TEXT.search(rel))


# ----------------------------------------------------------------------------- sender


def scan(root: str, exclude=(), tick=None):
    """(dirs, files, links, problems) under ROOT, parents before children. ROOT may be one file
    (then it is the only entry) or a symlink to a directory (followed, as rsync does for
    ``src/``); below it, no symlink is followed."""
    try:
        top = os.stat(root)
    except OSError as exc:
        code = "missing" if exc.errno == errno.ENOENT else errno.errorcode.get(exc.errno, "EIO")
        raise XferError(code, f"{root}: {exc.strerror}") from None
    if not stat.S_ISDIR(top.st_mode):
        if not stat.S_ISREG(top.st_mode):
            raise XferError("EINVAL", f"{root}: not a regular file or a directory")
        entry = [os.path.basename(root), top.st_size, top.st_mtime_ns, top.st_mode & 0o7777]
        return [], [entry], [], []
    rules = compile_excludes(exclude)
    dirs, files, links, problems = [], [], [], []
    todo = [""]
    while todo:
        rel = todo.pop()
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append([rel or ".", exc.strerror or str(exc)])
            continue
        below = []
        for entry in entries:
            if tick is not None:
                tick()
            name = rel + "/" + entry.name if rel else entry.name
            if entry.name == PARTIAL_DIR:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                is_dir = stat.S_ISDIR(st.st_mode)
                if excluded(rules, name, is_dir):
                    continue
                if is_dir:
                    dirs.append([name, st.st_mode & 0o7777, st.st_mtime_ns])
                    below.append(name)
                elif stat.S_ISREG(st.st_mode):
                    files.append([name, st.st_size, st.st_mtime_ns, st.st_mode & 0o7777])
                elif stat.S_ISLNK(st.st_mode):
                    links.append([name, os.readlink(entry.path)])
            except OSError as exc:
                problems.append([name, exc.strerror or str(exc)])
        todo.extend(reversed(below))
    return dirs, files, links, problems


class Pacer:
    """Holds a sender to BYTES_PER_S (0: no limit), across all the pieces it sends."""

    def __init__(self, bytes_per_s: int = 0) -> None:
        self.rate = bytes_per_s
        self.started = time.monotonic()
        self.moved = 0

    def account(self, n: int) -> None:
        if not self.rate:
            return
        self.moved += n
        ahead = self.started + self.moved / self.rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


def send_piece(link: Link, root: str, entry, k: int, offset: int, buf, *,
               single: bool = False, pacer=None, on_bytes=None) -> str:
    """Send range K of the file ENTRY ([name, size, mtime_ns, mode]) under ROOT from OFFSET
    bytes into it (the receiver has the rest): PIECE, the data, END with the sha256 of the
    whole range as read here. Returns "" or why it was not sent whole (the END then says so
    and the receiver keeps nothing of it): ``changed`` when size or mtime differ from ENTRY
    before or after the read."""
    name, size, mtime_ns, mode = entry[0], entry[1], entry[2], entry[3]
    start, end = bounds(size, k)
    offset = min(max(0, offset), end - start)
    path = root if single else os.path.join(root, name)
    why, fd = "", -1
    try:
        fd = os.open(path, os.O_RDONLY | (0 if single else getattr(os, "O_NOFOLLOW", 0)))
        st = os.fstat(fd)
        if st.st_size != size or st.st_mtime_ns != mtime_ns:
            why = "changed"
    except OSError as exc:
        why = "changed" if exc.errno == errno.ENOENT else (exc.strerror or str(exc))
    link.send(b"P", json.dumps({"n": name, "s": size, "m": mtime_ns, "o": mode, "k": k,
                                "a": offset}, separators=(",", ":")).encode("utf-8",
                                                                            "surrogateescape"))
    digest = hashlib.sha256()
    pos, z = start, compressible(name)
    view = memoryview(buf)
    try:
        try:
            if not why and offset and not _hash_range(fd, digest, start, start + offset, view):
                why = "changed"  # shorter than when it was listed
        except OSError as exc:
            why = exc.strerror or str(exc)
        pos += offset
        while not why and pos < end:
            try:
                n = _pread_into(fd, view[: min(CHUNK, end - pos)], pos)
            except OSError as exc:
                why = exc.strerror or str(exc)
                break
            if not n:
                why = "changed"  # shorter than when it was listed
                break
            chunk = view[:n]
            digest.update(chunk)
            zeros = _ZEROS.startswith(chunk)  # a hole: ~1 KB on the link, not 1 MiB
            packed = _packed_zeros(n) if zeros else zlib.compress(chunk, 1) if z else None
            if packed is not None and (zeros or len(packed) < n * 0.9):
                link.send(b"Z", packed)
            else:
                z = z and packed is not None and len(packed) < n  # stop trying on noise
                link.send(b"D", chunk)
            pos += n
            if on_bytes is not None:
                on_bytes(n)
            if pacer is not None:
                pacer.account(n)
        if not why:
            st = os.fstat(fd)
            if st.st_size != size or st.st_mtime_ns != mtime_ns:
                why = "changed"
    finally:
        if fd >= 0:
            os.close(fd)
    end_note = {"bad": why} if why else {"h": digest.hexdigest()}
    link.send(b"E", json.dumps(end_note).encode())
    return why


_PACKED_ZEROS = {}  # length -> its zlib frame: a sparse file's chunks are all CHUNK long


def _packed_zeros(n: int) -> bytes:
    packed = _PACKED_ZEROS.get(n)
    if packed is None:
        packed = zlib.compress(_ZEROS[:n], 9)  # once: 1 KB a MiB
        if len(_PACKED_ZEROS) < 8:
            _PACKED_ZEROS[n] = packed
    return packed


def _reads_as_zeros(fd: int, data, pos: int, seen_size: int) -> bool:
    """Whether writing DATA at POS can be skipped, leaving a hole: DATA is all zeros
    and the file already reads as zeros there (past its end as it was when opened, where
    only this piece writes, or an earlier hole). An earlier attempt's bytes are overwritten."""
    if not _ZEROS.startswith(data):
        return False
    if pos >= seen_size:
        return True
    return _ZEROS.startswith(os.pread(fd, len(data), pos))


def _pread_into(fd: int, view, pos: int) -> int:
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], pos)
    data = os.pread(fd, len(view), pos)
    view[: len(data)] = data
    return len(data)


def _hash_range(fd: int, digest, start: int, end: int, view, tick=None) -> bool:
    """Feed DIGEST the bytes [START, END) of FD; False if the file is shorter."""
    pos = start
    while pos < end:
        if tick is not None:
            tick()
        n = _pread_into(fd, view[: min(len(view), end - pos)], pos)
        if not n:
            return False
        digest.update(view[:n])
        pos += n
    return True


# ----------------------------------------------------------------------------- receiver


class _Tree:
    """The destination: every path below the root is reached through directories that this
    transfer made or checked to be real directories (not symlinks)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.dirs = {""}
        self.lock = threading.Lock()

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def make_root(self) -> None:
        try:
            os.makedirs(self.root, exist_ok=True)
            if not os.path.isdir(self.root):
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory")
        except OSError as exc:
            raise XferError.from_os(exc, f"cannot create directory {self.root}") from None

    def make_dir(self, rel: str) -> None:
        """REL as a real directory: made if absent; a file or symlink in its way replaced."""
        parent = posixpath.dirname(rel)
        if parent not in self.dirs:
            raise XferError("unsafe", f"{rel!r} arrived before its parent directory")
        _real_dir(self.path(rel))
        self.dirs.add(rel)

    def parent_ok(self, rel: str) -> bool:
        """Whether REL's directory is reached from the root through real directories only
        (checked once per directory; another session may have made them)."""
        parent = posixpath.dirname(rel)
        if parent in self.dirs:
            return True
        path = ""
        for part in parent.split("/"):
            path = path + "/" + part if path else part
            if path in self.dirs:
                continue
            try:
                if not stat.S_ISDIR(os.lstat(self.path(path)).st_mode):
                    return False
            except OSError:
                return False
            with self.lock:
                self.dirs.add(path)
        return True

    def partial(self, rel: str, key: str) -> str:
        where = os.path.join(self.path(posixpath.dirname(rel)), PARTIAL_DIR)
        _real_dir(where)
        return os.path.join(where, key)

    def forget_partials(self, dirs) -> None:
        """After a complete transfer, what is left in .rgt-partial is stale: remove it."""
        for rel in [""] + list(dirs):
            where = os.path.join(self.path(rel), PARTIAL_DIR)
            try:
                if not stat.S_ISDIR(os.lstat(where).st_mode):
                    continue
                for name in os.listdir(where):
                    if name.endswith(TMP_SUFFIX):
                        os.unlink(os.path.join(where, name))
                os.rmdir(where)
            except OSError:
                pass


def _real_dir(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # another session made it just now
            _real_dir(path)
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        os.mkdir(path, 0o700)


def _pwrite_all(fd: int, view, pos: int) -> None:
    while view:
        n = os.pwrite(fd, view, pos)
        view = view[n:]
        pos += n


def checked_list(message: dict):
    """A LIST's dirs, files and links, every name checked: the receiver's view of the sender."""
    dirs, files, links = (message.get(k) for k in ("dirs", "files", "links"))
    if not all(isinstance(x, list) for x in (dirs, files, links)):
        raise XferError("protocol", "LIST without dirs, files and links")
    try:
        dirs = [[check_name(d[0]), int(d[1]), int(d[2])] for d in dirs]
        files = [[check_name(f[0]), int(f[1]), int(f[2]), int(f[3])] for f in files]
        links = [[check_name(s[0]), s[1]] for s in links]
    except (TypeError, ValueError, IndexError):
        raise XferError("protocol", "LIST entries are malformed") from None
    if any(f[1] < 0 for f in files):
        raise XferError("protocol", "LIST has a negative file size")
    return dirs, files, links


def _same_time(a: int, b: int) -> bool:
    """Equal mtimes, or equal seconds where one side keeps only seconds (HFS+, some mounts)."""
    return a == b or (a // 10**9 == b // 10**9 and (a % 10**9 == 0 or b % 10**9 == 0))


def _quietly(fn, *args, **kwargs) -> None:
    with contextlib.suppress(OSError):
        fn(*args, **kwargs)


def _fatal(exc: OSError, what: str) -> None:
    if exc.errno in _FATAL:
        raise XferError.from_os(exc, what)


class Receiver:
    """The receiving end of a transfer into ROOT: plans what to ask for, writes pieces,
    commits files, finishes the tree. One per process; pieces may arrive on several threads
    (a pull's sessions) or several processes (a push's), for different ranges."""

    def __init__(self, root: str) -> None:
        self.tree = _Tree(root)

    # -- before: what is missing -----------------------------------------------------------

    def plan(self, dirs, files, tick=None):
        """(want, have, problems): WANT is [[i, k, offset], ...], range k of LIST's file i
        still to come from offset bytes into it, or k = -1 for a file all of whose ranges
        are here but which is not yet renamed into place; HAVE the bytes already here."""
        tree = self.tree
        tree.make_root()
        try:
            for rel, _mode, _mtime in dirs:
                tree.make_dir(rel)
        except OSError as exc:
            raise XferError.from_os(exc, "cannot create a directory") from None
        want, have, problems = [], 0, []
        for i, (rel, size, mtime_ns, mode) in enumerate(files):
            if tick is not None:
                tick()
            if posixpath.dirname(rel) not in tree.dirs:
                raise XferError("unsafe", f"{rel!r} arrived without its parent directory")
            try:
                st = os.lstat(tree.path(rel))
            except OSError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                problems.append([rel, "a directory is in the way"])
                continue
            if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == size and (
                _same_time(st.st_mtime_ns, mtime_ns)
            ):
                have += size
                if st.st_mode & 0o777 != mode & 0o777:
                    _quietly(os.chmod, tree.path(rel), mode & 0o777)
                continue
            done, prefixes = self._verified(rel, size, mtime_ns, tick)
            if len(done) == range_count(size) > 1:
                want.append([i, -1, 0])  # every range is here: only the commit is left
            for k in range(range_count(size)):
                a, b = bounds(size, k)
                if k in done:
                    have += b - a
                else:
                    want.append([i, k, prefixes.get(k, 0)])
                    have += prefixes.get(k, 0)
        return want, have, problems

    def _verified(self, rel: str, size: int, mtime_ns: int, tick=None):
        """What an earlier attempt left of this version of the file, as its record names it
        and as it still hashes on the disk (a record is a claim): ({whole ranges},
        {range: bytes of it from its start})."""
        try:
            partial = self.tree.partial(rel, partial_name(rel, size, mtime_ns))
        except OSError as exc:
            raise XferError.from_os(exc, f"cannot write {rel}") from None
        whole, prefixes = _read_ranges(partial)
        done, kept = set(), {}
        if not whole and not prefixes:
            return done, kept
        try:
            fd = os.open(partial, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return done, kept
        view = memoryview(bytearray(CHUNK))
        try:
            # a prefix as long as its range is still only a prefix: the sender's END (its
            # digest, its check that the file did not change) never came
            for k, (length, digest), is_whole in sorted(
                    [(k, v, True) for k, v in whole.items()]
                    + [(k, v, False) for k, v in prefixes.items()]):
                start, end = bounds(size, k)
                if not 0 < length <= end - start or (is_whole and length != end - start):
                    continue
                h = hashlib.sha256()
                if _hash_range(fd, h, start, start + length, view, tick) and (
                        h.hexdigest() == digest):
                    if is_whole:
                        done.add(k)
                    else:
                        kept[k] = length
        except OSError:
            pass
        finally:
            os.close(fd)
        return done, kept

    # -- during: one piece -------------------------------------------------------------------

    def piece(self, link: Link, entry, k: int, offset: int, buf, on_bytes=None) -> str:
        """Read one piece (after its PIECE frame) from LINK into its file: "" when it is
        written and verified, else why not (its frames are drained either way). A full disk
        raises: no other file could be written either. Cut off mid-way, what arrived is
        recorded as a prefix of the range, for the next attempt to resume from."""
        rel, size, mtime_ns, mode = entry[0], entry[1], entry[2], entry[3]
        count = range_count(size)
        if not 0 <= k < count:
            raise XferError("protocol", f"{rel}: there is no range {k}")
        start, end = bounds(size, k)
        if not 0 <= offset <= end - start:
            raise XferError("protocol", f"{rel}: range {k} has no offset {offset}")
        failed, fd, partial, seen_size = "", -1, "", 0
        digest = hashlib.sha256()
        view = memoryview(buf)
        if not self.tree.parent_ok(rel):
            failed = "a file or symlink is where its directory belongs"
        else:
            try:
                partial = self.tree.partial(rel, partial_name(rel, size, mtime_ns))
                flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                fd = os.open(partial, flags, 0o600)
                seen_size = os.fstat(fd).st_size
                if offset and not _hash_range(fd, digest, start, start + offset, view):
                    failed = "what an earlier attempt left of it is gone"
            except OSError as exc:
                _fatal(exc, f"cannot write {rel}")
                failed = exc.strerror or str(exc)
        pos = start + offset
        hole_at_end = False  # the last chunk was left a hole: the file may end before POS
        try:
            while True:
                try:
                    kind, n = link.recv_head()
                    if kind == b"E":
                        note = parse_json(link._exact(n), "END")
                        break
                    if kind not in (b"D", b"Z"):
                        raise XferError("protocol", f"expected DATA or END for {rel}")
                    if kind == b"D":
                        data = view[:n]
                        link.recv_into(data)
                    else:
                        data = _inflate(link._exact(n), view, rel)
                except EOFError:
                    if not failed and pos > start:
                        if hole_at_end:  # a recorded prefix must read back whole
                            _quietly(os.pwrite, fd, b"\0", pos - 1)
                        _quietly(_record_range, partial, k, digest.hexdigest(), pos - start,
                                 whole=False)
                    raise
                if pos + len(data) > end:
                    raise XferError("protocol", f"{rel}: more data than range {k} holds")
                if not failed:
                    try:
                        hole_at_end = _reads_as_zeros(fd, data, pos, seen_size)
                        if not hole_at_end:
                            _pwrite_all(fd, data, pos)
                    except OSError as exc:
                        _fatal(exc, f"cannot write {rel}")
                        failed = exc.strerror or str(exc)
                digest.update(data)
                pos += len(data)
                if on_bytes is not None:
                    on_bytes(len(data))
            if note.get("bad"):
                return str(note["bad"])[:200]
            if pos != end:
                raise XferError("protocol", f"{rel}: range {k} ended at {pos}, not {end}")
            if failed:
                return failed
            if note.get("h") != digest.hexdigest():
                return "mismatch"  # not as the sender read it: the next round sends it again
            try:
                if count == 1:
                    if os.fstat(fd).st_size != size:
                        os.ftruncate(fd, size)
                    os.fchmod(fd, mode & 0o777)
                    os.utime(fd, ns=(mtime_ns, mtime_ns))
                    os.close(fd)
                    fd = -1
                    os.replace(partial, self.tree.path(rel))
                    _quietly(os.unlink, _ranges_path(partial))
                else:
                    if hole_at_end:  # a zero byte, not ftruncate: that could cut a later
                        os.pwrite(fd, b"\0", end - 1)  # range another session wrote
                    _record_range(partial, k, note["h"], end - start)
            except OSError as exc:
                _fatal(exc, f"cannot write {rel}")
                return exc.strerror or str(exc)
            return ""
        finally:
            if fd >= 0:
                os.close(fd)

    # -- after: files in ranges, the tree ------------------------------------------------------

    def commit(self, entry) -> str:
        """Rename a file that came in ranges over its real name once every range of it is
        recorded as verified: "" or why not."""
        rel, size, mtime_ns, mode = entry[0], entry[1], entry[2], entry[3]
        if not self.tree.parent_ok(rel):
            return "a file or symlink is where its directory belongs"
        partial = self.tree.partial(rel, partial_name(rel, size, mtime_ns))
        missing = set(range(range_count(size))) - set(_read_ranges(partial)[0])
        if missing:
            return f"{len(missing)} of its ranges did not arrive"
        try:
            fd = os.open(partial, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                if os.fstat(fd).st_size != size:
                    os.ftruncate(fd, size)
                os.fchmod(fd, mode & 0o777)
                os.utime(fd, ns=(mtime_ns, mtime_ns))
            finally:
                os.close(fd)
            os.replace(partial, self.tree.path(rel))
            _quietly(os.unlink, _ranges_path(partial))
        except OSError as exc:
            _fatal(exc, f"cannot write {rel}")
            return exc.strerror or str(exc)
        return ""

    def finish(self, dirs, links, clean: bool):
        """Symlinks, directory modes and times, and (after a complete transfer) the partials'
        removal: (skipped links, problems)."""
        skipped, problems = [], []
        listed = {""} | {d[0] for d in dirs}
        for rel, target in links:
            _make_link(self.tree, listed, rel, target, skipped, problems)
        if clean:
            self.tree.forget_partials(d[0] for d in dirs)
        for rel, mode, mtime_ns in reversed(dirs):
            # owner keeps rwx: a later transfer must still be able to write here
            _quietly(os.chmod, self.tree.path(rel), (mode & 0o777) | 0o700)
            _quietly(os.utime, self.tree.path(rel), ns=(mtime_ns, mtime_ns))
        return skipped, problems


def _inflate(packed: bytes, view, rel: str):
    """A compressed chunk into VIEW; a bomb (more than a chunk) or garbage is refused."""
    d = zlib.decompressobj()
    try:
        data = d.decompress(packed, CHUNK)
    except zlib.error:
        raise XferError("protocol", f"{rel}: a compressed chunk does not inflate") from None
    if d.unconsumed_tail or not d.eof:
        raise XferError("protocol", f"{rel}: a compressed chunk inflates past a chunk")
    view[: len(data)] = data
    return view[: len(data)]


def _ranges_path(partial: str) -> str:
    return partial[: -len(TMP_SUFFIX)] + RANGES_SUFFIX


def _read_ranges(partial: str):
    """What is recorded beside PARTIAL: ({range: (length, sha256)} of whole ranges,
    {range: (length, sha256)} of prefixes); a whole record beats any prefix of its range."""
    whole, prefixes = {}, {}
    try:
        fd = os.open(_ranges_path(partial), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with open(fd, "rb") as f:
            text = f.read(64 << 20).decode("ascii", "replace")
    except OSError:
        return whole, prefixes
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 4 or not (parts[1].isdigit() and parts[2].isdigit()):
            continue
        kind, k, length, digest = parts[0], int(parts[1]), int(parts[2]), parts[3]
        if kind == "range":
            whole[k] = (length, digest)
        elif kind == "prefix" and k not in whole and length > prefixes.get(k, (0, ""))[0]:
            prefixes[k] = (length, digest)
    return whole, {k: v for k, v in prefixes.items() if k not in whole}


def _record_range(partial: str, k: int, digest: str, length: int, whole: bool = True) -> None:
    """One verified range (or the prefix of one), appended whole: other sessions append
    to the same record (O_APPEND)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(_ranges_path(partial), flags, 0o600)
    try:
        os.write(fd, f"{'range' if whole else 'prefix'} {k} {length} {digest}\n".encode())
    finally:
        os.close(fd)


def _make_link(tree: _Tree, listed: set, rel: str, target, skipped: list,
               problems: list) -> None:
    if posixpath.dirname(rel) not in listed:
        raise XferError("unsafe", f"{rel!r} arrived without its parent directory")
    if not tree.parent_ok(rel):
        problems.append([rel, "a file or symlink is where its directory belongs"])
        return
    if not link_stays_inside(rel, target):
        skipped.append(rel)
        return
    final = tree.path(rel)
    try:
        st = os.lstat(final)
        if stat.S_ISLNK(st.st_mode) and os.readlink(final) == target:
            return
        if stat.S_ISDIR(st.st_mode):
            problems.append([rel, "a directory is in the way"])
            return
    except FileNotFoundError:
        pass
    try:
        tmp = tree.partial(rel, partial_name(rel, -1, 0))
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(target, tmp)
        os.replace(tmp, final)
    except OSError as exc:
        problems.append([rel, exc.strerror or str(exc)])


# ----------------------------------------------------------------------------- far side


def serve(link: Link, role: str, root: str, *, bwlimit: int = 0) -> None:
    """Answer one session's requests until the laptop closes its end of the stream."""
    receiver = Receiver(root) if role == "receive" else None
    single = role == "send" and os.path.exists(root) and not os.path.isdir(root)
    buf = bytearray(CHUNK)
    pacer = Pacer(bwlimit)
    while True:
        kind, payload = link.recv(eof_ok=True)
        if kind is None:
            return
        if kind == b"P" and receiver is not None:
            entry, k, offset = piece_header(payload)
            why = receiver.piece(link, entry, k, offset, buf)
            link.send_json({"op": "ack", "why": why})
            link.flush()
            continue
        if kind != b"J":
            raise XferError("protocol", f"unexpected {kind!r} frame")
        message = parse_json(payload, "a request")
        op = message.get("op")
        if op == "ping":
            link.send_json({"op": "pong"})
        elif op == "get" and receiver is None:
            for item in message.get("pieces") or []:
                entry, k, offset = _get_item(item)
                send_piece(link, root, entry, k, offset, buf, single=single, pacer=pacer)
        elif op == "scan" and receiver is None:
            dirs, files, links, problems = scan(root, message.get("exclude") or [],
                                                tick=link.keepalive)
            link.send_json({"op": "list", "dirs": dirs, "files": files, "links": links,
                            "problems": problems})
        elif op == "plan" and receiver is not None:
            dirs, files, _links = checked_list(message)
            want, have, problems = receiver.plan(dirs, files, tick=link.keepalive)
            link.send_json({"op": "want", "files": want, "have": have, "problems": problems})
        elif op == "commit" and receiver is not None:
            entry = checked_list({"dirs": [], "files": [message.get("file")], "links": []})[1]
            link.send_json({"op": "ack", "why": receiver.commit(entry[0])})
        elif op == "finish" and receiver is not None:
            dirs, _files, links = checked_list(message)
            skipped, problems = receiver.finish(dirs, links, bool(message.get("clean")))
            link.send_json({"op": "done", "skipped": skipped, "problems": problems})
        else:
            raise XferError("protocol", f"{str(op)[:40]!r} is not a request a {role}r serves")
        link.flush()


def piece_header(payload: bytes):
    """([name, size, mtime_ns, mode], range) from a PIECE frame, the name checked."""
    message = parse_json(payload, "PIECE")
    try:
        entry = [check_name(message["n"]), int(message["s"]), int(message["m"]),
                 int(message["o"])]
        k, offset = int(message["k"]), int(message.get("a") or 0)
    except (KeyError, TypeError, ValueError):
        raise XferError("protocol", "a PIECE header is malformed") from None
    if entry[1] < 0:
        raise XferError("protocol", "a PIECE has a negative size")
    return entry, k, offset


def _get_item(item):
    """([name, size, mtime_ns, mode], range, offset) from one item of a GET."""
    try:
        entry = [check_name(item[0]), int(item[1]), int(item[2]), int(item[3])]
        return entry, int(item[4]), int(item[5])
    except (IndexError, TypeError, ValueError):
        raise XferError("protocol", "a GET item is malformed") from None


def _watchdog(link: Link) -> None:
    """End this process when the other side has not moved for FAR_IDLE_S (a dead link that
    sshd has not noticed yet): nothing buffered is lost, every write is already on disk."""
    while True:
        time.sleep(5)
        if time.monotonic() - link.last > FAR_IDLE_S:
            os._exit(4)


def _big_pipes() -> None:
    """sshd hands us pipes of 64 KiB; at 1 MiB, a link's data wakes us (and sshd) 16 times less
    often. Linux only (F_SETPIPE_SZ); elsewhere, or refused, the pipes stay as they are."""
    try:
        import fcntl

        for fd in (0, 1):
            fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError, ValueError):
        pass


def main(argv) -> int:
    """``serve send|receive ROOT [bwlimit=BYTES_PER_S]``: one session's far side."""
    if len(argv) < 3 or argv[0] != "serve" or argv[1] not in ("send", "receive"):
        sys.stderr.write("usage: xfer serve send|receive ROOT [bwlimit=N]\n")
        return 2
    role, root = argv[1], argv[2]
    bwlimit = [int(a[len("bwlimit="):]) for a in argv[3:] if a.startswith("bwlimit=")]
    _big_pipes()
    out = sys.stdout.buffer
    link = Link(sys.stdin.buffer, out)
    out.write(MAGIC)
    out.flush()
    threading.Thread(target=_watchdog, args=(link,), daemon=True).start()
    try:
        serve(link, role, root, bwlimit=bwlimit[-1] if bwlimit else 0)
        return 0
    except XferError as exc:
        error = {"op": "error", "code": exc.code, "message": exc.message}
    except OSError as exc:
        if exc.errno == errno.EPIPE or isinstance(exc, ConnectionError):
            return 3  # the laptop went away; what arrived stays for the next attempt
        error = {"op": "error", "code": errno.errorcode.get(exc.errno or 0, "EIO"),
                 "message": str(exc)}
    except EOFError:
        return 3
    try:
        link.send_json(error)
        link.flush()
    except OSError:
        pass
    return 1


if __name__ == "__main__":
    code = main(sys.argv[2:])
    with contextlib.suppress(OSError):
        sys.stdout.flush()
    os._exit(code)  # no flush at exit: the stream may be gone, nothing is left to say
