"""Low-level file plumbing: atomic writes with on-the-fly hashing, directory fsync, free space.

A checkpoint is written to ``.tmp-<host>-<pid>-<rand>-<final name>`` in the target directory,
hashed (sha256 + crc32) while it is written — from its own pages in the page cache, never
re-read from disk —, fsynced, renamed over the final name with ``os.replace`` and the
directory is fsynced. A kill at any moment therefore leaves
either the old file or the new one under the final name, plus at most one temp file, which is
never trusted and is removed the next time a `Checkpointer` opens the directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import mmap
import os
import secrets
import socket
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TMP_PREFIX = ".tmp-"
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

_PIECE = 16 << 20  # the followers may hash up to here after each piece is written
_WINDOW = 32 << 20  # bytes a follower maps and hashes at a time
_FOLLOW_MIN = 4 << 20  # smaller files are hashed inline: starting threads costs more
_KICK_EVERY = 64 << 20  # start writeback of dirty pages every this many bytes
_SYNC_FILE_RANGE_WRITE = 2


def _host_tag() -> str:
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:32] or "host"


def tmp_name(final_name: str) -> str:
    return f"{TMP_PREFIX}{_host_tag()}-{os.getpid()}-{secrets.token_hex(4)}-{final_name}"


def tmp_owner_alive(name: str) -> bool:
    """True when a temp file may belong to another live writer on this host (keep it)."""
    parts = name[len(TMP_PREFIX) :].split("-", 2)
    if len(parts) < 3 or parts[0] != _host_tag():
        return False
    try:
        pid = int(parts[1])
    except ValueError:
        return False
    if pid == os.getpid():
        return False  # a previous life of this pid (container restart): ours, stale
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_sync_file_range: Callable[[int, int, int, int], int] | None | bool = False


def _kick_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Ask the kernel to start writing a range back now (non-blocking), so the final fsync
    has little left to do. Best effort: a no-op where sync_file_range is unavailable."""
    global _sync_file_range
    if _sync_file_range is False:
        _sync_file_range = None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fn = libc.sync_file_range
            fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _sync_file_range = fn
        except (OSError, AttributeError):
            _sync_file_range = None
    if _sync_file_range:
        _sync_file_range(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)


def _can_map(fd: int, size: int) -> bool:
    try:
        mmap.mmap(fd, size, access=mmap.ACCESS_READ).close()
    except (OSError, ValueError):
        return False
    return True


class _Follower(threading.Thread):
    """Hashes the file itself, in order, as far as the writer has written it.

    It reads the temp file's pages through short-lived read-only mappings (the pages are in
    the page cache: no copy, no disk read), so it needs nothing from the caller's buffers and
    may lag behind the writer — its tail overlaps the final fsync instead of slowing writes.
    And what it hashes is exactly what the file holds.
    """

    def __init__(self, writer: HashingWriter, start: int, update: Callable[[memoryview], None],
                 name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._w = writer
        self.pos = start
        self._update = update
        self.error: BaseException | None = None

    def run(self) -> None:
        w = self._w
        try:
            while True:
                with w._cond:
                    while w._published <= self.pos and not w._closed and not w._aborted:
                        w._cond.wait()
                    if w._aborted:
                        return
                    end = w._published
                    if self.pos >= end and w._closed:
                        return
                stop = min(end, self.pos + _WINDOW)
                base = self.pos - self.pos % mmap.ALLOCATIONGRANULARITY
                m = mmap.mmap(w.fd, stop - base, offset=base, access=mmap.ACCESS_READ)
                try:
                    with memoryview(m) as mv:
                        self._update(mv[self.pos - base : stop - base])
                finally:
                    m.close()
                self.pos = stop
        except BaseException as err:  # noqa: BLE001 - handed to the writer's thread
            self.error = err


class HashingWriter:
    """A write-only file object over a raw fd that computes sha256 and crc32 of the file.

    Small files (under `_FOLLOW_MIN`) are hashed inline from the caller's bytes. Past that, two
    follower threads (one sha256, one crc32) hash the file's own pages behind the writer:
    hashlib, zlib and os.write all release the GIL, so writing and hashing run side by side,
    and whatever hashing is left when the last byte is written overlaps the fsync — wall time
    is about max(write + fsync, hash) rather than their sum. The caller's buffers are never
    read after `write` returns (torch.save hands out views of temporaries), and the digests
    describe the bytes the file holds. `finish()` (after the fsync) joins the followers.
    The fd must be open for reading too. On a filesystem that cannot map files the writer
    falls back to hashing inline.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.nbytes = 0
        self._sha = hashlib.sha256()
        self._crc = 0
        self._kicked = 0
        self._cond = threading.Condition()
        self._published = 0  # bytes the followers may read
        self._closed = False
        self._aborted = False
        self._followers: list[_Follower] = []
        self._inline = False  # set when the file cannot be mapped

    def _crc_update(self, piece: memoryview) -> None:
        self._crc = zlib.crc32(piece, self._crc)

    def _write_all(self, piece: memoryview) -> None:
        while piece:
            n = os.write(self.fd, piece)
            piece = piece[n:]

    def _start_followers(self) -> None:
        self._published = self.nbytes
        self._followers = [
            _Follower(self, self.nbytes, self._sha.update, "rgt-ckpt-sha256"),
            _Follower(self, self.nbytes, self._crc_update, "rgt-ckpt-crc32"),
        ]
        for f in self._followers:
            f.start()

    def _hash_inline(self, piece: memoryview) -> None:
        self._sha.update(piece)
        self._crc = zlib.crc32(piece, self._crc)

    def write(self, data) -> int:  # noqa: ANN001 - bytes-like
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        n = len(mv)
        if self._inline or (not self._followers and self.nbytes + n < _FOLLOW_MIN):
            self._write_all(mv)
            self._hash_inline(mv)
            self.nbytes += n
            return n
        for start in range(0, n, _PIECE):
            piece = mv[start : start + _PIECE]
            self._write_all(piece)
            if not self._followers and not self._inline:
                if _can_map(self.fd, self.nbytes + len(piece)):
                    self._start_followers()  # from before this piece
                else:  # a filesystem without mmap (some FUSE mounts): hash the caller's bytes
                    self._inline = True
            if self._inline:
                self._hash_inline(piece)
            self.nbytes += len(piece)
            if self._followers:
                with self._cond:
                    self._published = self.nbytes
                    self._cond.notify_all()
            if self.nbytes - self._kicked >= _KICK_EVERY:
                _kick_writeback(self.fd, self._kicked, self.nbytes - self._kicked)
                self._kicked = self.nbytes
        return n

    def flush(self) -> None:  # torch.save calls it; data goes straight to the fd
        pass

    def close_input(self) -> None:
        """No more writes: the followers hash to the end and stop (does not wait for them)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def finish(self) -> None:
        """Wait until every written byte is hashed; re-raise a follower's error."""
        self.close_input()
        for f in self._followers:
            f.join()
        for f in self._followers:
            if f.error is not None:
                raise f.error
            if f.pos != self.nbytes:  # pragma: no cover - a broken invariant, never trust it
                raise RuntimeError(f"hashed {f.pos} of {self.nbytes} bytes written")

    def abort(self) -> None:
        """Stop the followers without finishing (the file is being thrown away)."""
        with self._cond:
            self._aborted = True
            self._cond.notify_all()
        for f in self._followers:
            f.join()

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()

    @property
    def crc32(self) -> int:
        return self._crc


@dataclass(frozen=True)
class Written:
    path: Path
    nbytes: int
    sha256: str
    crc32: int


_POOL: ThreadPoolExecutor | None = None


def _hash_pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rgt-ckpt-hash")
    return _POOL


def atomic_write(
    directory: Path,
    final_name: str,
    produce: Callable[[HashingWriter], None],
    *,
    fsync: bool = True,
    sync_dir: bool = True,
) -> Written:
    """Write via a temp file in `directory`, fsync, rename over `final_name`, fsync the dir.

    On any exception (ENOSPC included) the temp file is removed and the exception re-raised;
    the file previously under `final_name`, if any, is untouched.
    """
    tmp = directory / tmp_name(final_name)
    # O_RDWR, not O_WRONLY: the hashing followers map the file to read back what was written.
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    writer = HashingWriter(fd)
    try:
        produce(writer)
        writer.close_input()
        if fsync:
            os.fsync(fd)  # while the followers finish hashing: their tail costs no wall time
        writer.finish()
    except BaseException:
        writer.abort()
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    final = directory / final_name
    try:
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync_dir and fsync:
        fsync_dir(directory)
    return Written(final, writer.nbytes, writer.sha256, writer.crc32)


def file_digest(path: str | os.PathLike[str], algo: str) -> tuple[int, str | int]:
    """(size, digest) of a whole file: algo 'sha256' (hex) or 'crc32' (int). Reads via mmap."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if algo == "sha256":
            h = hashlib.sha256()
            update = h.update
        else:
            crc = 0

            def update(b) -> None:  # noqa: ANN001
                nonlocal crc
                crc = zlib.crc32(b, crc)

        if size:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                mv = memoryview(m)
                try:
                    for start in range(0, size, 64 << 20):
                        update(mv[start : start + (64 << 20)])
                finally:
                    mv.release()
        return size, (h.hexdigest() if algo == "sha256" else crc)


@dataclass(frozen=True)
class Space:
    free_bytes: int
    free_inodes: int | None  # None: the filesystem does not count inodes
    block: int


def free_space(directory: str | os.PathLike[str]) -> Space:
    st = os.statvfs(directory)
    inodes = st.f_favail if st.f_files > 0 else None
    return Space(st.f_bavail * st.f_frsize, inodes, st.f_frsize or 4096)
