"""save_async: snapshot then background write; one write in flight; errors at the next call."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rgt.ckpt import Checkpointer, CheckpointSpaceError

torch = pytest.importorskip("torch")


def test_snapshot_is_taken_before_return(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path, keep_last=5)
    w = torch.zeros(1_000_000)
    state = {"w": w, "meta": {"lst": [1, 2]}}
    for step in range(3):
        fut = ck.save_async(state, step)
        w.add_(1)  # training goes on mutating the live tensors
        state["meta"]["lst"].append(step)
        assert fut.result().step == step
    ck.wait()
    for step in range(3):
        st = torch.load(tmp_path / f"ckpt-{step:010d}.pt")
        assert torch.equal(st["w"], torch.full((1_000_000,), float(step)))
        assert st["meta"]["lst"] == [1, 2, *range(step)]
    assert ck.load_latest().step == 2


def test_at_most_one_write_in_flight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck = Checkpointer(tmp_path, keep_last=5)
    active, peak, lock = 0, 0, threading.Lock()
    real = ck._write

    def slow_write(*a, **kw):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.2)
        try:
            return real(*a, **kw)
        finally:
            with lock:
                active -= 1

    monkeypatch.setattr(ck, "_write", slow_write)
    t0 = time.perf_counter()
    f1 = ck.save_async({"w": torch.ones(10)}, 1)
    stall1 = time.perf_counter() - t0
    assert not f1.done() and stall1 < 0.15  # returned before the write finished
    t1 = time.perf_counter()
    ck.save_async({"w": torch.ones(10)}, 2)  # must wait for the first
    assert f1.done() and time.perf_counter() - t1 >= 0.1
    ck.save({"w": torch.ones(10)}, 3)  # sync save also waits for the in-flight one
    assert peak == 1
    assert [i.step for i in ck.list()] == [1, 2, 3]


def test_background_error_surfaces_at_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ck = Checkpointer(tmp_path)
    ck.save({"w": torch.zeros(3)}, 1)
    from rgt.ckpt import _io

    real = _io.atomic_write

    def failing(directory, name, produce, **kw):
        if name.endswith(".pt") and "0000000002" in name:
            raise OSError(28, "No space left on device")  # ENOSPC mid-write
        return real(directory, name, produce, **kw)

    monkeypatch.setattr(_io, "atomic_write", failing)
    fut = ck.save_async({"w": torch.ones(3)}, 2)  # returns fine
    while not fut.done():
        time.sleep(0.01)
    with pytest.raises(CheckpointSpaceError) as ei:
        ck.save_async({"w": torch.ones(3)}, 3)  # the next call raises step 2's error
    assert ei.value.step == 2 and "background save of checkpoint step 2" in str(
        ei.value.__notes__)
    ck.save_async({"w": torch.full((3,), 4.0)}, 4)  # reported once; the next save works
    assert ck.wait().step == 4
    assert ck.wait() is None
    assert [i.step for i in ck.list()] == [1, 4]

    monkeypatch.setattr(_io, "atomic_write", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("disk on fire")))
    ck.save_async({"w": torch.ones(3)}, 5)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ck.wait()


def test_space_refusal_is_immediate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rgt.ckpt import _io

    ck = Checkpointer(tmp_path)
    monkeypatch.setattr(_io, "free_space", lambda d: _io.Space(1000, 10, 4096))
    with pytest.raises(CheckpointSpaceError, match="needs"):
        ck.save_async({"w": torch.ones(10_000)}, 1)
    assert ck.wait() is None and ck.list() == []


@pytest.mark.parametrize("device", [
    "cpu", pytest.param("cuda", marks=[pytest.mark.may_skip, pytest.mark.skipif(
        not torch.cuda.is_available(), reason="no CUDA GPU: the staged path needs one")])])
def test_a_sync_save_after_save_async_writes_the_live_state(tmp_path: Path, device: str) -> None:
    """A sync save by a Checkpointer that save_async used stages GPU tensors through the kept
    pinned buffers (measured on an H200: pageable copies ran at ~1 GB/s, pinned ones at ~55):
    what it writes must be the state as it is now, not the buffers' earlier snapshot, and a
    CPU state is written as it is (staging it would be a copy for nothing)."""
    from rgt.ckpt._stage import holds_cuda

    ck = Checkpointer(tmp_path, keep_last=5)
    w = torch.zeros(300_000, device=device)
    state = {"layers": [{"w": w}], "step": (0,)}
    assert holds_cuda(state) is (device == "cuda")
    ck.save_async(state, 1)
    w.add_(7)
    state["step"] = (2,)
    ck.save(state, 2)
    ck.close()
    back = torch.load(tmp_path / f"ckpt-{2:010d}.pt")
    assert torch.equal(back["layers"][0]["w"], torch.full((300_000,), 7.0)) and back["step"] == (2,)
    first = torch.load(tmp_path / f"ckpt-{1:010d}.pt")
    assert torch.equal(first["layers"][0]["w"], torch.zeros(300_000))
