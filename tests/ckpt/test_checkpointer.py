"""Checkpointer basics: atomic save, load_latest with fallback, pruning, listing, estimates."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.ckpt import Checkpointer, CheckpointError, list_checkpoints, verify_file
from rgt.ckpt._io import TMP_PREFIX


def _state(step: int, size: int = 1000) -> dict:
    return {"step": step, "blob": bytes([step % 256]) * size}


def test_import_does_not_pull_torch(tmp_path: Path) -> None:
    code = ("import sys, rgt.ckpt, rgt.ckpt.checkpointer, rgt.ckpt.cadence;"
            "assert 'torch' not in sys.modules, 'torch imported';"
            "rgt.ckpt.Checkpointer(sys.argv[1]).save({'a': 1}, 0);"
            "assert 'torch' not in sys.modules, 'torch imported by save'; print('ok')")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_fresh_start_returns_none(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path / "c")
    assert ck.load_latest() is None
    assert ck.latest_path is None and ck.best_path is None
    assert ck.list() == []


def test_save_load_roundtrip_and_sidecar(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path, format="pickle")
    rec = ck.save(_state(7), 7, metric=0.5)
    assert rec.path.name == "ckpt-0000000007.pt" and rec.bytes == rec.path.stat().st_size
    meta = json.loads(rec.sidecar.read_text())
    assert meta["step"] == 7 and meta["metric"] == 0.5 and meta["bytes"] == rec.bytes
    assert meta["sha256"] == verify_file(rec.path, load=False).sha256
    loaded = ck.load_latest()
    assert loaded is not None and loaded.step == 7 and loaded.state == _state(7)
    assert loaded.metric == 0.5 and loaded.skipped == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_keep_last_and_best(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path, keep_last=2, keep_best=1, mode="min", format="pickle")
    metrics = {0: 5.0, 1: 1.0, 2: 4.0, 3: 3.0, 4: 6.0, 5: 7.0}
    for s, m in metrics.items():
        ck.save(_state(s), s, metric=m)
    assert [i.step for i in ck.list()] == [1, 4, 5]
    assert ck.best_path.name == "ckpt-0000000001.pt"
    assert ck.latest_path.name == "ckpt-0000000005.pt"
    ck_max = Checkpointer(tmp_path / "max", keep_last=1, keep_best=2, mode="max",
                          format="pickle")
    for s, m in metrics.items():
        ck_max.save(_state(s), s, metric=m)
    assert [i.step for i in ck_max.list()] == [4, 5]  # best two by max, newest is one of them


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_sidecar", "bad_sidecar"])
def test_load_latest_falls_back_and_says_so(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    ck = Checkpointer(tmp_path, keep_last=3, format="pickle")
    for s in (1, 2, 3):
        ck.save(_state(s, 50_000), s)
    newest = tmp_path / "ckpt-0000000003.pt"
    if damage == "truncate":
        os.truncate(newest, newest.stat().st_size // 2)
    elif damage == "flip":
        with open(newest, "r+b") as f:
            f.seek(30_000)
            b = f.read(1)
            f.seek(30_000)
            f.write(bytes([b[0] ^ 0xFF]))
    elif damage == "no_sidecar":
        newest.with_suffix(".json").unlink()
    else:
        newest.with_suffix(".json").write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="rgt.ckpt"):
        loaded = Checkpointer(tmp_path, format="pickle").load_latest()
    assert loaded is not None and loaded.step == 2 and loaded.state == _state(2, 50_000)
    assert loaded.skipped and loaded.skipped[0][0] == str(newest)
    assert any(str(newest) in r.getMessage() for r in caplog.records)
    assert not verify_file(newest).ok


def test_flip_detected_by_torch_format(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    ck = Checkpointer(tmp_path, keep_last=2)
    ck.save({"w": torch.zeros(100_000)}, 1)
    ck.save({"w": torch.ones(100_000)}, 2)
    p = tmp_path / "ckpt-0000000002.pt"
    with open(p, "r+b") as f:  # torch.load itself does not notice this
        f.seek(p.stat().st_size // 2)
        f.write(b"\x07")
    loaded = ck.load_latest()
    assert loaded.step == 1 and torch.equal(loaded.state["w"], torch.zeros(100_000))
    for verify in ("sha256", "none"):
        got = ck.load_latest(verify=verify)
        assert got.step == (1 if verify == "sha256" else 2)


def test_temp_files_ignored_and_cleaned(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path, format="pickle")
    ck.save(_state(1), 1)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    import socket

    host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:32]
    stale = tmp_path / f"{TMP_PREFIX}{host}-{dead}-abcd1234-ckpt-0000000009.pt"
    stale.write_bytes(b"partial")
    foreign = tmp_path / f"{TMP_PREFIX}otherhost-1-abcd1234-ckpt-0000000009.json"
    foreign.write_bytes(b"{}")
    assert Checkpointer(tmp_path, format="pickle").load_latest().step == 1
    assert not stale.exists() and not foreign.exists()


def test_list_checkpoints_verify(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path, keep_last=3, format="pickle")
    for s in (1, 2):
        ck.save(_state(s, 10_000), s, metric=s / 10)
    with open(tmp_path / "ckpt-0000000002.pt", "r+b") as f:
        f.write(b"X")
    infos = list_checkpoints(tmp_path, verify=True)
    assert [(i.step, i.ok) for i in infos] == [(1, True), (2, False)]
    assert infos[1].problem and "sha256" in infos[1].problem
    assert infos[0].bytes == (tmp_path / "ckpt-0000000001.pt").stat().st_size
    assert infos[0].age_s is not None and infos[0].age_s < 60


def test_torch_size_estimate_is_honest(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from rgt.ckpt._format import prepare

    state = {"a": torch.randn(1000, 100), "b": [torch.arange(10), {"c": 3}],
             "shared": None, "opt": {i: torch.zeros(i + 1) for i in range(50)}}
    state["shared"] = state["a"][:10]  # a view: same storage, written once
    est = prepare(state, "torch").estimate
    rec = Checkpointer(tmp_path).save(state, 1)
    assert rec.bytes <= est <= rec.bytes * 1.05 + 64 * 1024


def test_weights_only_pickle_refuses_objects(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path, format="pickle")
    ck.save({"path": Path("/x")}, 1)
    with pytest.raises(CheckpointError, match="whole but does not load"):
        ck.load_latest()  # not damage: never silently fall back to a fresh start
    assert ck.load_latest(weights_only=False).state == {"path": Path("/x")}


def test_torch_weights_only_refusal_is_an_error(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ck = Checkpointer(tmp_path)
    ck.save({"path": Path("/x")}, 1)
    with pytest.raises(CheckpointError, match="weights_only"):
        ck.load_latest()
    assert ck.load_latest(weights_only=False).state == {"path": Path("/x")}


def test_torch_crc32_is_off_only_until_the_first_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch.save's own per-record CRC32 is skipped for our files, but the process-wide torch
    switch is back on before the first byte is written (other threads' torch.save keep it)."""
    torch = pytest.importorskip("torch")
    import io
    import zipfile

    from rgt.ckpt import _format, _io

    ser = torch.serialization
    assert ser.get_crc32_options()
    seen: list[bool] = []
    real_write = _io.HashingWriter.write

    def spy(self, data):  # noqa: ANN001, ANN202
        seen.append(ser.get_crc32_options())
        return real_write(self, data)

    monkeypatch.setattr(_io.HashingWriter, "write", spy)
    rec = Checkpointer(tmp_path).save({"w": torch.ones(1000), "b": torch.arange(7)}, 1)
    assert seen and all(seen)
    with zipfile.ZipFile(rec.path) as z:
        crcs = {i.CRC for i in z.infolist() if i.file_size}
    assert crcs == {0}  # torch computed none; our sidecar covers the bytes
    assert ser.get_crc32_options() and not _format._CRC_LOCK.locked()

    during: list[bool] = []

    def failing_save(obj, f):  # noqa: ANN001, ANN202
        during.append(ser.get_crc32_options())
        raise RuntimeError("pickling failed")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(RuntimeError, match="pickling failed"):
        _format.prepare({"w": torch.ones(3)}, "torch").write(io.BytesIO())
    assert during == [False]
    assert ser.get_crc32_options() and not _format._CRC_LOCK.locked()


def test_verify_file_without_sidecar_loads_but_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Checkpointer(tmp_path, format="pickle").save(_state(1), 1)
    rec.sidecar.unlink()
    from rgt.ckpt import _io

    def no_hash(*a):  # noqa: ANN002, ANN202 - nothing to compare a hash with: never read it
        pytest.fail("hashed a file that has no recorded sha256")

    monkeypatch.setattr(_io, "file_digest", no_hash)
    r = verify_file(rec.path)
    assert not r.ok and "no sidecar" in r.reason
    assert r.loads is True and r.sha256 is None and r.bytes == rec.bytes and r.step == 1
