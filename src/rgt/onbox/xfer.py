"""Move a directory's contents over one byte stream, with nothing but Python on either end.

The same file runs on both machines: the laptop imports it, the box gets it on stdin
(``python3 -c BOOT N ROLE ROOT`` reads N bytes of this script, then the stream follows on the
same stdin). One side sends and the other receives; on a push the laptop sends. In order:

    sender   -> LIST  the directories, files (size, mtime, mode) and symlinks under the root
    receiver -> WANT  the files it lacks, each from an offset: a partial file that an earlier,
                      interrupted attempt left behind resumes where it stopped
    sender   -> FILE, DATA..., END for each wanted file; then FIN
    receiver -> DONE  what it wrote, what it refused

A file is written to ``DIR/.rgt-partial/<key>.rgt.tmp`` and renamed over its real name only
once all of it has arrived, so a half-written file never carries that name. The key is
derived from the file's name, size and mtime, so only a partial of the same version of a file
is ever resumed; stale partials go when a transfer into that directory completes.

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

from rgt.onbox._common import TMP_SUFFIX

MAGIC = b"\0rgt-xfer-1\0"
"""The far side's first bytes: whatever a chatty login script printed before them is skipped."""

PARTIAL_DIR = ".rgt-partial"
CHUNK = 1 << 20
MAX_JSON = 256 << 20  # a LIST of a million files is ~100 MB; more is a broken or hostile peer
FAR_IDLE_S = 120.0  # the far side gives up on a peer that has not moved for this long
KEEPALIVE_S = 5.0  # a side busy scanning a big tree says so this often (both sides' idle clocks)

_HEADER = struct.Struct(">cI")  # kind, payload length
_FILE = struct.Struct(">IQ")  # index into LIST's files, offset the data starts at
_END = struct.Struct(">Qq")  # the file's size as sent, its mtime (ns) when it was read
# Errors after which no other file can be written either: stop instead of trying them all.
_FATAL = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}


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
    """Both directions of the stream, framed, counted (the laptop reports these counts as its
    wire totals) and time-stamped (a watchdog ends an attempt that stopped moving)."""

    def __init__(self, reader, writer) -> None:
        self.reader = reader
        self.writer = writer
        self.sent = 0
        self.received = 0
        self.last = time.monotonic()

    def send(self, kind: bytes, payload=b"") -> None:
        self.writer.write(_HEADER.pack(kind, len(payload)))
        if len(payload):
            self.writer.write(payload)
        self.sent += _HEADER.size + len(payload)
        self.last = time.monotonic()

    def send_json(self, message: dict) -> None:
        self.send(b"J", json.dumps(message, separators=(",", ":")).encode())

    def flush(self) -> None:
        self.writer.flush()
        self.last = time.monotonic()

    def keepalive(self) -> None:
        """While this side is busy (scanning a big tree) and the other waits: an empty frame
        every few seconds, so that neither side's idle clock takes the work for a dead link."""
        if time.monotonic() - self.last > KEEPALIVE_S:
            self.send(b"K")
            self.flush()

    def _exact(self, n: int) -> bytes:
        data = self.reader.read(n) if n else b""
        self.received += len(data)
        self.last = time.monotonic()
        if len(data) != n:
            raise EOFError("the stream ended mid-transfer")
        return data

    def recv_head(self):
        """(kind, payload length) of the next frame; its payload is still to be read."""
        kind, n = _HEADER.unpack(self._exact(_HEADER.size))
        while kind == b"K" and n == 0:
            kind, n = _HEADER.unpack(self._exact(_HEADER.size))
        if n > (MAX_JSON if kind == b"J" else CHUNK):
            raise XferError("protocol", f"a {n}-byte frame is larger than any rgt sends")
        return kind, n

    def recv(self):
        kind, n = self.recv_head()
        return kind, self._exact(n)

    def recv_into(self, view) -> None:
        """Fill VIEW with payload: file data lands in one reused buffer, not in a fresh
        megabyte per frame (allocating and faulting those in costs as much as the copy)."""
        n = self.reader.readinto(view) if len(view) else 0
        self.received += n
        self.last = time.monotonic()
        if n != len(view):
            raise EOFError("the stream ended mid-transfer")

    def recv_json(self, op: str) -> dict:
        kind, payload = self.recv()
        if kind != b"J":
            raise XferError("protocol", f"expected {op}, got a {kind!r} frame")
        try:
            message = json.loads(payload.decode("utf-8", "surrogateescape"))
        except ValueError:
            raise XferError("protocol", f"expected {op}, got unreadable JSON") from None
        if not isinstance(message, dict):
            raise XferError("protocol", f"expected {op}, got {type(message).__name__}")
        if message.get("op") == "error":
            raise XferError(str(message.get("code", "EIO")), str(message.get("message", "")))
        if message.get("op") != op:
            raise XferError("protocol", f"expected {op}, got {str(message.get('op'))[:40]}")
        return message


class Tally:
    """What one side has done so far (the driver reads it after a cut-off attempt too)."""

    def __init__(self, progress=None) -> None:
        self.progress = progress
        self.files = 0  # regular files fully sent (sender) or written (receiver)
        self.done = 0  # file bytes the receiver has, counting those it already had
        self.total = 0  # file bytes in LIST
        self.problems: list = []  # [name, why]: files that could not be moved
        self.skipped: list = []  # symlinks refused (target absolute or outside the root)

    def advance(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, max(self.total, self.done))


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


def send(link: Link, root: str, tally: Tally, *, exclude=(), bwlimit: int = 0) -> None:
    """Send ROOT's contents to the receiver at the other end of LINK."""
    single = not os.path.isdir(root)
    dirs, files, links, problems = scan(root, exclude, tick=link.keepalive)
    tally.problems.extend(problems)
    tally.total = sum(f[1] for f in files)
    link.send_json({"op": "list", "dirs": dirs, "files": files, "links": links})
    link.flush()
    want = link.recv_json("want").get("files")
    if not isinstance(want, list):
        raise XferError("protocol", "WANT without a file list")
    offsets = {}
    for item in want:
        i, offset = (item + [None, None])[:2] if isinstance(item, list) else (None, None)
        if not isinstance(i, int) or not 0 <= i < len(files) or i in offsets:
            raise XferError("protocol", f"WANT names no file of LIST: {item!r}")
        if not isinstance(offset, int) or not 0 <= offset <= files[i][1]:
            offset = 0
        offsets[i] = offset
    tally.advance(tally.total - sum(files[i][1] - off for i, off in offsets.items()))
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    started, moved = time.monotonic(), 0
    for i, offset in offsets.items():
        name = files[i][0]
        path = root if single else os.path.join(root, name)
        try:
            fd = os.open(path, os.O_RDONLY | (0 if single else getattr(os, "O_NOFOLLOW", 0)))
        except OSError as exc:
            tally.problems.append([name, exc.strerror or str(exc)])
            continue
        with open(fd, "rb", buffering=0) as f:
            st = os.fstat(fd)
            if st.st_size < offset or st.st_mtime_ns != files[i][2]:
                offset = 0  # changed since LIST: the partial may be of the version before
            f.seek(offset)
            link.send(b"F", _FILE.pack(i, offset))
            size = offset
            while True:
                try:
                    n = f.readinto(buf)
                except OSError as exc:  # the receiver drops what came: its partial stays
                    tally.problems.append([name, exc.strerror or str(exc)])
                    n = -1
                    break
                if not n:
                    break
                link.send(b"D", view[:n])
                size += n
                moved += n
                tally.advance(n)
                if bwlimit:
                    ahead = started + moved / bwlimit - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
            if n == -1:
                link.send(b"E", _END.pack(size, -1))
                continue
            link.send(b"E", _END.pack(size, os.fstat(f.fileno()).st_mtime_ns))
            tally.files += 1
    link.send_json({"op": "fin", "problems": tally.problems})
    link.flush()
    done = link.recv_json("done")
    tally.files = int(done.get("files") or 0)
    tally.problems[:] = _pairs(done.get("problems"))
    tally.skipped.extend(str(s) for s in done.get("skipped") or [])


def _pairs(items) -> list:
    return [[str(x) for x in item[:2]] for item in items or [] if isinstance(item, list)]


# ----------------------------------------------------------------------------- receiver


class _Tree:
    """The destination: every path below the root is reached through directories that this
    transfer made or checked to be real directories (not symlinks)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.dirs = {""}
        self.partials: set = set()  # directories whose .rgt-partial we made or used
        self.buffer = memoryview(bytearray(CHUNK))

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
        self._real_dir(self.path(rel))
        self.dirs.add(rel)

    @staticmethod
    def _real_dir(path: str) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            os.mkdir(path, 0o700)
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path)
            os.mkdir(path, 0o700)

    def partial(self, rel: str, key: str) -> str:
        parent = posixpath.dirname(rel)
        where = os.path.join(self.path(parent), PARTIAL_DIR)
        if parent not in self.partials:
            self._real_dir(where)
            self.partials.add(parent)
        return os.path.join(where, key)

    def forget_partials(self) -> None:
        """After a complete transfer, what is left in .rgt-partial is stale: remove it."""
        for parent in self.partials:
            where = os.path.join(self.path(parent), PARTIAL_DIR)
            try:
                for name in os.listdir(where):
                    if name.endswith(TMP_SUFFIX):
                        os.unlink(os.path.join(where, name))
                os.rmdir(where)
            except OSError:
                pass


def _pwrite_all(fd: int, view, pos: int) -> None:
    while view:
        n = os.pwrite(fd, view, pos)
        view = view[n:]
        pos += n


def _checked_list(message: dict):
    dirs, files, links = (message.get(k) for k in ("dirs", "files", "links"))
    if not all(isinstance(x, list) for x in (dirs, files, links)):
        raise XferError("protocol", "LIST without dirs, files and links")
    try:
        dirs = [(check_name(d[0]), int(d[1]), int(d[2])) for d in dirs]
        files = [(check_name(f[0]), int(f[1]), int(f[2]), int(f[3])) for f in files]
        links = [(check_name(s[0]), s[1]) for s in links]
    except (TypeError, ValueError, IndexError):
        raise XferError("protocol", "LIST entries are malformed") from None
    if any(f[1] < 0 for f in files):
        raise XferError("protocol", "LIST has a negative file size")
    return dirs, files, links


def receive(link: Link, root: str, tally: Tally) -> None:
    """Receive into ROOT (created if absent) what the sender at the other end of LINK sends."""
    dirs, files, links = _checked_list(link.recv_json("list"))
    tree = _Tree(root)
    tree.make_root()
    try:
        for rel, _mode, _mtime in dirs:
            tree.make_dir(rel)
    except OSError as exc:
        raise XferError.from_os(exc, "cannot create a directory") from None
    tally.total = sum(f[1] for f in files)
    want, have = [], 0
    for i, (rel, size, mtime_ns, mode) in enumerate(files):
        link.keepalive()
        if posixpath.dirname(rel) not in tree.dirs:
            raise XferError("unsafe", f"{rel!r} arrived without its parent directory")
        try:
            st = os.lstat(tree.path(rel))
        except OSError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            tally.problems.append([rel, "a directory is in the way"])
            continue
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == size and (
            _same_time(st.st_mtime_ns, mtime_ns)
        ):
            have += size
            if st.st_mode & 0o777 != mode & 0o777:
                _quietly(os.chmod, tree.path(rel), mode & 0o777)
            continue
        try:
            part = os.lstat(tree.partial(rel, partial_name(rel, size, mtime_ns)))
            offset = part.st_size if stat.S_ISREG(part.st_mode) and part.st_size <= size else 0
        except FileNotFoundError:
            offset = 0
        except OSError as exc:
            raise XferError.from_os(exc, f"cannot write {rel}") from None
        want.append([i, offset])
        have += offset
    link.send_json({"op": "want", "files": want})
    link.flush()
    tally.advance(have)
    expected = dict((i, off) for i, off in want)
    while True:
        kind, payload = link.recv()
        if kind == b"F":
            i, offset = _FILE.unpack(payload) if len(payload) == _FILE.size else (-1, -1)
            # from the offset asked for, or from 0 if the file changed since LIST
            asked = expected.pop(i, None)
            if asked is None or offset not in (0, asked):
                raise XferError("protocol", f"FILE {i} at {offset} was not asked for")
            _receive_file(link, tree, files[i], offset, tally)
        elif kind == b"J":
            message = json.loads(payload.decode("utf-8", "surrogateescape"))
            if not isinstance(message, dict) or message.get("op") != "fin":
                raise XferError("protocol", "expected FILE or FIN")
            tally.problems.extend(_pairs(message.get("problems")))
            break
        else:
            raise XferError("protocol", f"expected FILE or FIN, got a {kind!r} frame")
    for rel, target in links:
        _make_link(tree, rel, target, tally)
    if not tally.problems:
        tree.forget_partials()
    for rel, mode, mtime_ns in reversed(dirs):
        # owner keeps rwx: a later transfer must still be able to write here
        _quietly(os.chmod, tree.path(rel), (mode & 0o777) | 0o700)
        _quietly(os.utime, tree.path(rel), ns=(mtime_ns, mtime_ns))
    link.send_json({"op": "done", "files": tally.files, "problems": tally.problems,
                    "skipped": tally.skipped})
    link.flush()


def _same_time(a: int, b: int) -> bool:
    """Equal mtimes, or equal seconds where one side keeps only seconds (HFS+, some mounts)."""
    return a == b or (a // 10**9 == b // 10**9 and (a % 10**9 == 0 or b % 10**9 == 0))


def _quietly(fn, *args, **kwargs) -> None:
    with contextlib.suppress(OSError):
        fn(*args, **kwargs)


def _receive_file(link: Link, tree: _Tree, entry, offset: int, tally: Tally) -> None:
    """One file's DATA frames into its partial, then renamed into place; a per-file failure
    (permissions, a directory in the way) drains the frames and is reported, a full disk stops
    the transfer."""
    rel, size, mtime_ns, mode = entry
    final = tree.path(rel)
    partial = tree.partial(rel, partial_name(rel, size, mtime_ns))
    failed, fd, pos = None, -1, offset
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        os.ftruncate(fd, offset)
    except OSError as exc:
        failed = exc
    try:
        while True:
            kind, n = link.recv_head()
            if kind == b"E" and n == _END.size:
                sent, sent_mtime = _END.unpack(link._exact(n))
                break
            if kind != b"D":
                raise XferError("protocol", f"expected DATA or END for {rel}")
            data = tree.buffer[:n]
            link.recv_into(data)
            if failed is None:
                try:
                    _pwrite_all(fd, data, pos)
                except OSError as exc:
                    failed = exc
            pos += n
            tally.advance(n)
        if sent != pos:
            raise XferError("protocol", f"{rel}: END says {sent} bytes, {pos} arrived")
        if sent_mtime < 0:  # the sender could not read it to the end: keep what came
            return
        if failed is None:
            try:
                os.fchmod(fd, mode & 0o777)
                os.utime(fd, ns=(sent_mtime, sent_mtime))
                os.close(fd)
                fd = -1
                os.replace(partial, final)
                tally.files += 1
            except OSError as exc:
                failed = exc
    finally:
        if fd >= 0:
            os.close(fd)
    if failed is not None:
        if failed.errno in _FATAL:
            raise XferError.from_os(failed, f"cannot write {rel}")
        tally.problems.append([rel, failed.strerror or str(failed)])


def _make_link(tree: _Tree, rel: str, target, tally: Tally) -> None:
    if posixpath.dirname(rel) not in tree.dirs:
        raise XferError("unsafe", f"{rel!r} arrived without its parent directory")
    if not link_stays_inside(rel, target):
        tally.skipped.append(rel)
        return
    final = tree.path(rel)
    try:
        st = os.lstat(final)
        if stat.S_ISLNK(st.st_mode) and os.readlink(final) == target:
            return
        if stat.S_ISDIR(st.st_mode):
            tally.problems.append([rel, "a directory is in the way"])
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
        tally.problems.append([rel, exc.strerror or str(exc)])


# ----------------------------------------------------------------------------- far side


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
    """``send ROOT [exclude=PATTERN]... [bwlimit=BYTES_PER_S]`` or ``receive ROOT``."""
    if len(argv) < 2 or argv[0] not in ("send", "receive"):
        sys.stderr.write("usage: xfer send|receive ROOT [exclude=P]... [bwlimit=N]\n")
        return 2
    role, root = argv[0], argv[1]
    exclude = [a[len("exclude=") :] for a in argv[2:] if a.startswith("exclude=")]
    bwlimit = [int(a[len("bwlimit=") :]) for a in argv[2:] if a.startswith("bwlimit=")]
    _big_pipes()
    out = sys.stdout.buffer
    link = Link(sys.stdin.buffer, out)
    out.write(MAGIC)
    out.flush()
    threading.Thread(target=_watchdog, args=(link,), daemon=True).start()
    tally = Tally()
    try:
        if role == "send":
            send(link, root, tally, exclude=exclude, bwlimit=bwlimit[-1] if bwlimit else 0)
        else:
            receive(link, root, tally)
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
