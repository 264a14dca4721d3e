"""Bitwise resume of the bundled train_mlp example through SIGKILL and through SIGTERM."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rgt.ckpt import EXIT_PREEMPTED

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

STEPS = 200
SLEEP = ["--sleep", "0.004"]


def train_cmd(ckpt_dir: Path, out: Path, *extra: str, steps: int) -> list[str]:
    return [sys.executable, "-m", "rgt.examples.train_mlp", "--steps", str(steps),
            "--ckpt-dir", str(ckpt_dir), "--out", str(out), "--save-every", "10",
            "--metrics-every", "1", *extra]


def _run_until(cmd: list[str], kill_at: int | None, sig: int) -> tuple[int, list[str]]:
    """Run; once it prints step >= kill_at, send `sig`. Returns (returncode, stdout lines)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    lines = []
    sent = False
    for line in p.stdout:
        lines.append(line.rstrip("\n"))
        if (not sent and kill_at is not None and line.startswith("step=")
                and int(line.split()[0].split("=")[1]) >= kill_at):
            p.send_signal(sig)
            sent = True
    rc = p.wait()
    err = p.stderr.read() if p.stderr else ""
    if rc not in (0, EXIT_PREEMPTED, -signal.SIGKILL):
        raise AssertionError(f"train_mlp failed rc={rc}\n{err}")
    return rc, lines


def _assert_same(a: object, b: object, where: str = "") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, where
        assert torch.equal(a, b), f"tensor differs at {where}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _tensors(final: dict) -> int:
    n = len(final["model"])
    n += sum(1 for st in final["optimizer"]["state"].values()
             for v in st.values() if isinstance(v, torch.Tensor))
    return n


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = tmp_path_factory.mktemp("ref")
    rc, lines = _run_until(train_cmd(d / "ckpt", d / "out", steps=STEPS), None, 0)
    assert rc == 0 and lines[-1] == f"done step={STEPS}"
    final = torch.load(d / "out" / "final.pt")
    assert final["step"] == STEPS and _tensors(final) >= 6 + 18
    return final


def test_bitwise_resume_after_sigkills(tmp_path: Path, reference: dict) -> None:
    seed = int(os.environ.get("RGT_TEST_SEED", time.time_ns() % 2**32))
    kills = sorted(random.Random(seed).sample(range(5, STEPS - 10), 3))
    cmd = train_cmd(tmp_path / "ckpt", tmp_path / "out", *SLEEP, steps=STEPS)
    resumed = []
    for at in [*kills, None]:
        rc, lines = _run_until(cmd, at, signal.SIGKILL)
        resumed.append(lines[0])
        if at is not None:
            assert rc == -signal.SIGKILL, f"seed={seed}: finished before the kill at {at}"
    assert rc == 0 and lines[-1] == f"done step={STEPS}", f"seed={seed}"
    assert sum(r.startswith("resumed step=") for r in resumed) >= 2, resumed
    final = torch.load(tmp_path / "out" / "final.pt")
    _assert_same(reference, final, f"final(seed={seed}, kills={kills})")


def test_bitwise_resume_after_sigterm_preemption(tmp_path: Path, reference: dict) -> None:
    seed = int(os.environ.get("RGT_TEST_SEED", time.time_ns() % 2**32)) + 1
    terms = sorted(random.Random(seed).sample(range(5, STEPS - 10), 2))
    cmd = train_cmd(tmp_path / "ckpt", tmp_path / "out", *SLEEP, steps=STEPS)
    for at in terms:
        rc, lines = _run_until(cmd, at, signal.SIGTERM)
        assert rc == EXIT_PREEMPTED, f"seed={seed} rc={rc}"
        pre = [ln for ln in lines if ln.startswith("preempted step=")]
        assert len(pre) == 1 and "signal=SIGTERM" in pre[0]
        step = int(pre[0].split()[1].split("=")[1])
        assert step >= at
        # The preemption checkpoint is exactly the step it stopped at, whatever the cadence.
        assert (tmp_path / "ckpt" / f"ckpt-{step:010d}.pt").exists()
        rc2, lines2 = _run_until(cmd, None, 0) if at == terms[-1] else (None, None)
        if rc2 is not None:
            assert lines2[0] == f"resumed step={step} from=ckpt-{step:010d}.pt"
            assert rc2 == 0 and lines2[-1] == f"done step={STEPS}"
    final = torch.load(tmp_path / "out" / "final.pt")
    _assert_same(reference, final, f"final(seed={seed}, terms={terms})")
