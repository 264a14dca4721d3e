"""Low-level file plumbing: atomic writes with on-the-fly hashing, directory fsync, free space.

A checkpoint is written to ``.tmp-<host>-<pid>-<rand>-<final name>`` in the target directory,
hashed (sha256 + crc32) while it is written — never re-read —, fsynced, renamed over the final
name with ``os.replace`` and the directory is fsynced. A kill at any moment therefore leaves
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
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TMP_PREFIX = ".tmp-"
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

_PIECE = 16 << 20  # hash/write pipelining granularity
_PARALLEL_MIN = 1 << 20  # below this, hash inline: thread hand-off costs more than it saves
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


class HashingWriter:
    """A write-only file object over a raw fd that computes sha256 and crc32 of what passes.

    Large writes are cut into pieces; each piece is hashed on two helper threads while the
    calling thread writes it (hashlib, zlib and os.write all release the GIL), so hashing costs
    little wall time. Every call finishes hashing before it returns, so the caller's buffer is
    never read after `write` returns.
    """

    def __init__(self, fd: int, pool: ThreadPoolExecutor | None) -> None:
        self.fd = fd
        self.nbytes = 0
        self._sha = hashlib.sha256()
        self._crc = 0
        self._pool = pool
        self._kicked = 0

    def _crc_update(self, piece: memoryview) -> None:
        self._crc = zlib.crc32(piece, self._crc)

    def _write_all(self, piece: memoryview) -> None:
        while piece:
            n = os.write(self.fd, piece)
            piece = piece[n:]

    def write(self, data) -> int:  # noqa: ANN001 - bytes-like
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        n = len(mv)
        if n < _PARALLEL_MIN or self._pool is None:
            self._sha.update(mv)
            self._crc = zlib.crc32(mv, self._crc)
            self._write_all(mv)
        else:
            for start in range(0, n, _PIECE):
                piece = mv[start : start + _PIECE]
                f_sha = self._pool.submit(self._sha.update, piece)
                f_crc = self._pool.submit(self._crc_update, piece)
                try:
                    self._write_all(piece)
                finally:
                    f_sha.result()
                    f_crc.result()
        self.nbytes += n
        if self.nbytes - self._kicked >= _KICK_EVERY:
            _kick_writeback(self.fd, self._kicked, self.nbytes - self._kicked)
            self._kicked = self.nbytes
        return n

    def flush(self) -> None:  # torch.save calls it; data goes straight to the fd
        pass

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
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        writer = HashingWriter(fd, _hash_pool())
        produce(writer)
        if fsync:
            os.fsync(fd)
    except BaseException:
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
