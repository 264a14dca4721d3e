"""PreemptionFlag, ResumableSampler, and weights_only-safe full training state."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.ckpt import EXIT_PREEMPTED, Checkpointer, PreemptionFlag, ResumableSampler


def test_exit_code_is_documented() -> None:
    import rgt.ckpt
    import rgt.ckpt.preempt

    assert EXIT_PREEMPTED == 85
    assert "EXIT_PREEMPTED = 85" in rgt.ckpt.__doc__
    assert "85" in rgt.ckpt.preempt.__doc__


def test_flag_set_by_signals_and_handlers_restored() -> None:
    seen = []

    def mine(signum, frame):
        seen.append(signum)

    prev = signal.signal(signal.SIGUSR1, mine)
    try:
        with PreemptionFlag() as flag:
            assert not flag
            os.kill(os.getpid(), signal.SIGUSR1)
            assert flag and flag.signal_name == "SIGUSR1" and seen == []
            os.kill(os.getpid(), signal.SIGTERM)  # does not kill us: only sets the flag
            assert flag.signum == signal.SIGTERM and flag.count == 2
        assert signal.getsignal(signal.SIGUSR1) is mine
        os.kill(os.getpid(), signal.SIGUSR1)
        assert seen == [signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, prev)


def test_sigterm_without_flag_still_kills(tmp_path: Path) -> None:
    code = ("import os, signal, time\n"
            "from rgt.ckpt import PreemptionFlag\n"
            "f = PreemptionFlag(); f.close()\n"
            "os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)\n")
    r = subprocess.run([sys.executable, "-c", code], timeout=30)
    assert r.returncode == -signal.SIGTERM


def test_sampler_resume_neither_repeats_nor_skips() -> None:
    for drop_last in (False, True):
        full = ResumableSampler(103, seed=7, drop_last=drop_last)
        ref = [b for b, _ in zip(full.batches(10), range(40), strict=False)]
        s = ResumableSampler(103, seed=7, drop_last=drop_last)
        got, it = [], s.batches(10)
        rng = random.Random(3)
        while len(got) < 40:
            got.append(next(it))
            if rng.random() < 0.3:  # "crash": a new process resumes from state_dict
                st = s.state_dict()
                s = ResumableSampler(103, seed=7, drop_last=drop_last)
                s.load_state_dict(st)
                it = s.batches(10)
        assert got == ref
        epoch0 = [i for b in ref[: 103 // 10] for i in b]
        assert len(set(epoch0)) == len(epoch0)  # no repeats inside an epoch
    s = ResumableSampler(20, seed=1)
    first = [i for i, _ in zip(s, range(7), strict=False)]
    s2 = ResumableSampler(20, seed=1)
    s2.load_state_dict(s.state_dict(consumed=7))
    assert sorted(first + list(s2)) == list(range(20)) and s2.epoch == 1


def test_training_state_loads_with_weights_only(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    from rgt.ckpt import capture_training_state, restore_training_state

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 2)
    scaler = torch.amp.GradScaler("cpu")
    sampler = ResumableSampler(10, seed=3)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    sched.step()
    random.seed(5)
    np.random.seed(6)
    torch.manual_seed(7)
    state = capture_training_state(model=model, optimizer=opt, scheduler=sched, scaler=scaler,
                                   epoch=2, step=11, sampler=sampler, extra={"best": 0.5})
    expect = (random.random(), np.random.rand(), torch.rand(1))
    ck = Checkpointer(tmp_path)
    ck.save(state, 11)
    raw = torch.load(ck.latest_path, weights_only=True)  # plain types and tensors only
    random.random(), np.random.rand(), torch.rand(5)  # move every RNG on

    model2 = torch.nn.Linear(4, 2)
    opt2 = torch.optim.AdamW(model2.parameters(), lr=0.1)
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, 2)
    scaler2 = torch.amp.GradScaler("cpu")
    sampler2 = ResumableSampler(10, seed=0)
    prog = restore_training_state(raw, model=model2, optimizer=opt2, scheduler=sched2,
                                  scaler=scaler2, sampler=sampler2)
    assert prog == {"epoch": 2, "step": 11, "extra": {"best": 0.5}}
    assert (random.random(), np.random.rand()) == expect[:2]
    assert torch.equal(torch.rand(1), expect[2])
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(opt.state_dict()["state"][0]["exp_avg"],
                       opt2.state_dict()["state"][0]["exp_avg"])
    assert sched2.last_epoch == 1 and sampler2.seed == 3
