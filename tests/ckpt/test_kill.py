"""SIGKILL a process that saves in a loop, at random moments, ≥ 100 times.

After every kill `load_latest()` must return a whole checkpoint (its payload is a function of
its step, checked byte for byte), never older than the last save the child reported done,
never a temp file.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from rgt.ckpt import Checkpointer, verify_file
from rgt.ckpt._io import TMP_PREFIX

CHILD = r"""
import hashlib, sys
from rgt.ckpt import Checkpointer

def payload(step):
    size = 100_000 + (step % 7) * 150_000
    return hashlib.sha256(str(step).encode()).digest() * (size // 32)

ck = Checkpointer(sys.argv[1], keep_last=2, keep_best=1, format="pickle")
loaded = ck.load_latest()
step = loaded.step + 1 if loaded else 0
# One write per line: under PYTHONUNBUFFERED=1 print() writes each argument separately, and a
# kill between "saved" and its step number would leave a line the parent cannot parse.
sys.stdout.write(f"ready {step}\n"); sys.stdout.flush()
while True:
    ck.save({"step": step, "payload": payload(step)}, step, metric=float(step * 7919 % 101))
    sys.stdout.write(f"saved {step}\n"); sys.stdout.flush()
    step += 1
"""

TRIALS = 120


def payload(step: int) -> bytes:
    size = 100_000 + (step % 7) * 150_000
    return hashlib.sha256(str(step).encode()).digest() * (size // 32)


def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    seed = int(os.environ.get("RGT_TEST_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    d = tmp_path / "ckpt"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    last_reported = -1
    trials_with_tmp = 0
    steps_seen = []
    for trial in range(TRIALS):
        p = subprocess.Popen([sys.executable, str(script), str(d)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        assert p.stdout is not None
        first = p.stdout.readline()
        assert first.startswith("ready"), f"child failed to start: {first!r}"
        time.sleep(rng.uniform(0, 0.06))
        p.send_signal(signal.SIGKILL)
        p.wait()
        saved = [int(line.split()[1]) for line in p.stdout.read().splitlines()
                 if line.startswith("saved")]
        p.stdout.close()
        if saved:
            last_reported = saved[-1]
        names = os.listdir(d)
        trials_with_tmp += any(n.startswith(TMP_PREFIX) for n in names)

        loaded = Checkpointer(d, keep_last=2, keep_best=1, format="pickle").load_latest(
            verify="sha256")
        ctx = f"seed={seed} trial={trial} files={sorted(names)}"
        if last_reported < 0:
            continue  # killed before its first save completed: a fresh start is right
        assert loaded is not None, ctx
        assert not loaded.path.name.startswith(TMP_PREFIX), ctx
        assert loaded.path.name == f"ckpt-{loaded.step:010d}.pt", ctx
        assert loaded.state["step"] == loaded.step, ctx
        assert loaded.state["payload"] == payload(loaded.step), ctx
        assert loaded.step >= last_reported, f"lost a reported save: {ctx}"
        assert verify_file(loaded.path).ok, ctx
        assert not any(n.startswith(TMP_PREFIX) for n in os.listdir(d)), "tmp not cleaned"
        steps_seen.append(loaded.step)
    assert steps_seen and steps_seen[-1] > TRIALS // 2, "the child barely made progress"
    # The kills must have landed mid-write some of the time, or this proved little.
    assert trials_with_tmp > 0, f"seed={seed}: no kill ever interrupted a write"
