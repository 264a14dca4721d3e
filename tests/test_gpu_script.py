"""bench/gpu.sh and its checkpoint benchmark, run here, on a machine with no GPU: the parts a
CPU can do run for real (up, audit, the example through the lifecycle, down), the GPU parts
are skipped with a line saying so, and the script exits 0. bench/gpu_ckpt.py runs its every
method on CPU tensors (`--device cpu`), so a broken method fails here, not on a rented GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_gpu_script_on_a_machine_without_a_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: bench/gpu.sh would run its GPU parts")
    figures = tmp_path / "figures.txt"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(["bash", str(REPO / "bench" / "gpu.sh"), str(figures)], env=env,
                          capture_output=True, text=True, timeout=300)
    text = figures.read_text()
    assert done.returncode == 0, text[-3000:]
    assert "no CUDA GPU visible to torch: the GPU parts below are skipped" in text
    assert "skipped: NCCL needs a CUDA GPU" in text
    assert "skipped: the checkpoint figures are for tensors in GPU memory" in text
    assert "ok   U28 torch" in text and "has no CUDA here" in text  # the audit's verdicts
    assert "status    succeeded" in text and "✓ verified 4 files" in text
    assert "✓ gpu is down" in text and "end: 0 step(s) failed" in text


def test_gpu_checkpoint_bench_runs_every_method(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_ckpt.py"), "--device", "cpu", "--size-gb",
         "0.07", "--repeat", "1", "--dir", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(out.read_text())
    assert figures["errors"] == {}
    for method in ("raw disk write + fsync", "torch.save + fsync", "rgt save (atomic, sync)",
                   "DCP save", "rgt save_async: training stall", "DCP async_save: on disk",
                   "rgt save_async + mirror: durable (read back)",
                   "rgt save (sync, after a save_async)", "torch.load onto the device",
                   "rgt load_latest onto the device (crc32)", "DCP load into device tensors"):
        assert len(figures["runs_s"][method]) == 1, method
    assert figures["bytes"] == 0.07 * (1 << 30) // 4 * 4
