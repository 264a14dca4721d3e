"""A full target: tmpfs with a tiny `size=` and, separately, a tiny `nr_inodes=`."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rgt.ckpt import Checkpointer, CheckpointSpaceError
from rgt.ckpt._io import TMP_PREFIX
from rgt.errors import UserError

pytestmark = pytest.mark.root


def _no_tmp(d: Path) -> bool:
    return not [n for n in os.listdir(d) if n.startswith(TMP_PREFIX)]


def test_out_of_bytes_is_refused_before_writing(tmpfs) -> None:
    d = tmpfs("size=1m,nr_inodes=1000")
    ck = Checkpointer(d, format="pickle")
    ck.save({"blob": b"a" * 600_000}, 1)
    with pytest.raises(CheckpointSpaceError) as ei:
        ck.save({"blob": b"b" * 600_000}, 2)
    err = ei.value
    assert isinstance(err, UserError) and err.exit_code == 2
    st = os.statvfs(d)
    assert err.needed_bytes >= 600_000 > err.free_bytes
    assert err.free_bytes == st.f_bavail * st.f_frsize
    msg = str(err)
    assert f"{err.needed_bytes:,}" in msg and f"{err.free_bytes:,}" in msg
    assert f"{err.free_inodes:,} inodes" in msg and "ckpt-0000000001.pt is intact" in msg
    assert "\n" not in msg
    assert _no_tmp(d)
    loaded = Checkpointer(d, format="pickle").load_latest(verify="sha256")
    assert loaded.step == 1 and loaded.state == {"blob": b"a" * 600_000}


def test_out_of_inodes_is_refused_before_writing(tmpfs) -> None:
    d = tmpfs("size=64m,nr_inodes=4")  # root dir + one checkpoint (2 files) = 3
    ck = Checkpointer(d, format="pickle")
    ck.save({"x": 1}, 1)
    free_inodes = os.statvfs(d).f_favail
    assert free_inodes < 2
    with pytest.raises(CheckpointSpaceError) as ei:
        ck.save({"x": 2}, 2)
    assert ei.value.free_inodes == free_inodes and ei.value.needed_inodes == 2
    assert f"free {ei.value.free_bytes:,} bytes and {free_inodes} inodes" in str(ei.value)
    assert _no_tmp(d)
    assert Checkpointer(d, format="pickle").load_latest().state == {"x": 1}


def test_enospc_mid_write_is_the_same_clear_error(tmpfs, monkeypatch) -> None:
    """Estimates can be wrong (another writer, a quota): ENOSPC during the write is caught."""
    d = tmpfs("size=1m,nr_inodes=1000")
    ck = Checkpointer(d, format="pickle")
    ck.save({"blob": b"a" * 600_000}, 1)
    from rgt.ckpt import _format

    real = _format.prepare

    def lying(state, fmt):
        p = real(state, fmt)
        p.estimate = 1
        return p

    monkeypatch.setattr(_format, "prepare", lying)
    with pytest.raises(CheckpointSpaceError, match="ran out of space while writing") as ei:
        ck.save({"blob": b"b" * 600_000}, 2)
    assert isinstance(ei.value.__cause__, OSError) and ei.value.__cause__.errno == errno.ENOSPC
    assert _no_tmp(d)
    assert not (d / "ckpt-0000000002.pt").exists()
    assert Checkpointer(d, format="pickle").load_latest().state == {"blob": b"a" * 600_000}


def test_out_of_space_with_torch_state(tmpfs) -> None:
    torch = pytest.importorskip("torch")
    d = tmpfs("size=2m,nr_inodes=1000")
    ck = Checkpointer(d)
    ck.save({"w": torch.zeros(300_000)}, 1)  # 1.2 MB
    with pytest.raises(CheckpointSpaceError) as ei:
        ck.save({"w": torch.ones(300_000)}, 2)
    assert ei.value.needed_bytes > 1_200_000 > ei.value.free_bytes
    assert _no_tmp(d)
    assert torch.equal(ck.load_latest().state["w"], torch.zeros(300_000))
