"""A tiny CPU training run that survives any kill: the reference loop for `rgt.ckpt`.

    python -m rgt.examples.train_mlp --ckpt-dir DIR --out DIR [--steps 200] [--save-every 20]
        [--metrics-every 10] [--seed 0] [--batch-size 32] [--sleep 0] [--keep-last 2]
        [--durable URL] [--device cpu|cuda|auto]

An MLP regresses a fixed function of synthetic data generated from `--seed`; batches come
shuffled from a `ResumableSampler`, with dropout, AdamW and a warmup + cosine LR schedule.

Contract (kept stable: `rgt demo` and the Slurm tests run this exact script):

* On start it loads the newest intact checkpoint in `--ckpt-dir` unconditionally and prints
  ``resumed step=N`` (or ``fresh start``). Run the identical command again after any kill.
* Every `--metrics-every` steps it prints ``step=120 loss=0.431200 lr=0.00291`` (flushed).
* It checkpoints every `--save-every` steps — full state: model, optimizer, scheduler, data
  position, all RNGs — into `--ckpt-dir` (mirrored to `--durable`, an fsspec URL, if given).
* SIGTERM or SIGUSR1 only raise a flag; after the current step it saves, prints
  ``preempted step=N signal=SIGTERM`` and exits with 85 (`rgt.ckpt.EXIT_PREEMPTED`).
* On completion it writes `--out/final.pt` (``{"model", "optimizer", "step"}`` state dicts)
  and `--out/metrics.json`, prints ``done step=N``, and exits 0. Running it again after
  completion rewrites the same files.
* An uninterrupted run and any killed-and-restarted run end with bitwise-identical
  `final.pt` tensors. `--sleep S` adds S seconds per step (to demo or test kills).
* `--device cuda` trains on the GPU (`auto`: the GPU when torch sees one); checkpoints and
  `final.pt` hold the tensors where they trained, and load back onto any device.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="train_mlp", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="optimizer steps in total")
    p.add_argument("--ckpt-dir", required=True, help="checkpoint directory (resumed from)")
    p.add_argument("--out", required=True, help="where final.pt and metrics.json go")
    p.add_argument("--save-every", type=int, default=20, help="checkpoint every K steps")
    p.add_argument("--metrics-every", type=int, default=10, help="print metrics every M steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--sleep", type=float, default=0.0, help="extra seconds per step")
    p.add_argument("--keep-last", type=int, default=2)
    p.add_argument("--durable", default=None, help="fsspec URL to mirror checkpoints to")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"],
                   help="where to train (auto: the GPU when torch sees one)")
    args = p.parse_args(argv)
    if args.steps < 0 or args.save_every < 1 or args.metrics_every < 1 or args.batch_size < 1:
        p.error("--steps must be >= 0; --save-every, --metrics-every, --batch-size >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    from torch import nn

    from rgt.ckpt import EXIT_PREEMPTED, Checkpointer, PreemptionFlag, ResumableSampler
    from rgt.ckpt.torch_state import capture_training_state, restore_training_state

    torch.set_num_threads(1)  # tiny model: one thread is fastest and reproducible
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        print("train_mlp: --device cuda, but torch sees no CUDA GPU "
              f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})", flush=True)
        return 2
    t_start = time.perf_counter()

    # Data: a fixed function of fixed inputs, from a private generator (not the global RNG).
    n, d = 2048, 16
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g)
    y = torch.sin(x @ w) + 0.1 * torch.randn(n, 1, generator=g)
    x, y = x.to(device), y.to(device)

    torch.manual_seed(args.seed)
    model = nn.Sequential(
        nn.Linear(d, 64), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(64, 1),
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    warmup = max(1, min(10, args.steps // 10))

    def lr_lambda(i: int) -> float:
        if i < warmup:
            return (i + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (i - warmup) / max(1, args.steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    sampler = ResumableSampler(n, seed=args.seed, shuffle=True, drop_last=True)

    ckpt = Checkpointer(args.ckpt_dir, keep_last=args.keep_last, keep_best=0,
                        durable=args.durable)
    step = 0
    loaded = ckpt.load_latest()
    if loaded is not None:
        step = restore_training_state(loaded.state, model=model, optimizer=opt,
                                      scheduler=sched, sampler=sampler)["step"]
        print(f"resumed step={step} from={loaded.path.name}", flush=True)
    else:
        print("fresh start", flush=True)
    if device != "cpu":
        print(f"device {device}: {torch.cuda.get_device_name()}", flush=True)
    resumed_from = step

    def save(at: int) -> None:
        state = capture_training_state(model=model, optimizer=opt, scheduler=sched,
                                       epoch=sampler.epoch, step=at, sampler=sampler)
        ckpt.save(state, at)

    loss_v = float("nan")
    model.train()
    with PreemptionFlag() as preempted:
        batches = sampler.batches(args.batch_size)
        while step < args.steps:
            idx = torch.tensor(next(batches), device=device)
            loss = nn.functional.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            loss_v = loss.item()
            if args.sleep:
                time.sleep(args.sleep)
            if step % args.metrics_every == 0 or step == args.steps:
                print(f"step={step} loss={loss_v:.6f} lr={sched.get_last_lr()[0]:.6g}",
                      flush=True)
            if step % args.save_every == 0 or preempted:
                save(step)
            if preempted:
                print(f"preempted step={step} signal={preempted.signal_name}", flush=True)
                ckpt.close()
                return EXIT_PREEMPTED
        latest = ckpt.latest_path
        if latest is None or latest.name != f"ckpt-{step:010d}.pt":
            save(step)
    ckpt.close()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    final = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
    tmp = out / f".tmp-final-{os.getpid()}.pt"
    torch.save(final, tmp)
    os.replace(tmp, out / "final.pt")
    metrics = {"steps": step, "final_loss": loss_v, "resumed_from": resumed_from,
               "wall_s": round(time.perf_counter() - t_start, 3)}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    print(f"done step={step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
