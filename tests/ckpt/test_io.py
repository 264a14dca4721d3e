"""The atomic writer's hashing: the sidecar digests must describe exactly the bytes on disk,
whichever path computed them (inline for small files, follower threads reading the file's own
pages for large ones, inline again where a filesystem cannot map files)."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import zlib
from pathlib import Path

import pytest

from rgt.ckpt import _io


def _chunks(total: int) -> list[bytes]:
    """Odd sizes on purpose: pieces that straddle the 4 MiB switch, the 16 MiB piece and the
    32 MiB mapping window, plus small records between them (as torch.save writes)."""
    out, n, i = [], 0, 0
    sizes = [63, 1_000_003, 3 << 20, 17 << 20, 67, 33 << 20, 5, 9 << 20]
    while n < total:
        size = min(sizes[i % len(sizes)], total - n)
        out.append(hashlib.sha256(str(i).encode()).digest() * (size // 32) + b"x" * (size % 32))
        n += size
        i += 1
    return out


def _check(written: _io.Written, chunks: list[bytes]) -> None:
    data = written.path.read_bytes()
    assert data == b"".join(chunks)
    assert written.nbytes == len(data)
    assert written.sha256 == hashlib.sha256(data).hexdigest()
    assert written.crc32 == zlib.crc32(data)
    assert _io.file_digest(written.path, "sha256") == (len(data), written.sha256)


def _no_hash_threads() -> bool:
    return not [t for t in threading.enumerate() if t.name.startswith("rgt-ckpt-sha256")
                or t.name.startswith("rgt-ckpt-crc32")]


@pytest.mark.parametrize("total", [0, 10, (4 << 20) - 1, 4 << 20, 100 << 20])
def test_digests_are_of_the_bytes_on_disk(tmp_path: Path, total: int) -> None:
    chunks = _chunks(total)

    def produce(f: _io.HashingWriter) -> None:
        for c in chunks:
            assert f.write(memoryview(c)) == len(c)

    _check(_io.atomic_write(tmp_path, "x.pt", produce), chunks)
    assert _no_hash_threads()


def test_inline_fallback_where_files_cannot_be_mapped(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_io, "_can_map", lambda fd, size: False)
    chunks = _chunks(60 << 20)
    w = _io.atomic_write(tmp_path, "x.pt", lambda f: [f.write(c) for c in chunks])
    _check(w, chunks)
    assert _no_hash_threads()


def test_caller_buffer_is_not_read_after_write_returns(tmp_path: Path) -> None:
    """torch.save hands the writer views of temporaries: scribbling over a buffer once write()
    returned must not change the recorded digest."""
    big = bytearray(b"a" * (40 << 20))
    expected = hashlib.sha256(bytes(big)).hexdigest()

    def produce(f: _io.HashingWriter) -> None:
        f.write(big)
        big[:] = b"b" * len(big)

    w = _io.atomic_write(tmp_path, "x.pt", produce)
    assert w.sha256 == expected == hashlib.sha256(w.path.read_bytes()).hexdigest()


def test_error_mid_write_stops_followers_and_removes_tmp(tmp_path: Path) -> None:
    def produce(f: _io.HashingWriter) -> None:
        f.write(b"z" * (20 << 20))
        raise OSError(errno.EIO, "boom")

    with pytest.raises(OSError, match="boom"):
        _io.atomic_write(tmp_path, "x.pt", produce)
    assert os.listdir(tmp_path) == []
    assert _no_hash_threads()


@pytest.mark.root
def test_enospc_with_followers_running(tmpfs) -> None:
    d = tmpfs("size=8m,nr_inodes=100")
    with pytest.raises(OSError) as ei:
        _io.atomic_write(d, "x.pt", lambda f: f.write(b"q" * (32 << 20)))
    assert ei.value.errno == errno.ENOSPC
    assert os.listdir(d) == []
    assert _no_hash_threads()
