"""A tiny DDP trainer under real torchrun (gloo, CPU), shared by the on-box and lifecycle
tests of issue 27: it resumes from $RGT_CKPT_DIR/snapshot.pt and writes worker<rank>.pid."""

from __future__ import annotations

import sys

# A tiny DDP trainer: resumes from $RGT_CKPT_DIR/snapshot.pt, saves it atomically every step.
DDP_JOB = """
import os, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
snap = os.path.join(os.environ["RGT_CKPT_DIR"], "snapshot.pt")
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
step = 0
if os.path.exists(snap):
    saved = torch.load(snap)
    model.load_state_dict(saved["model"])
    step = saved["step"]
    print(f"rank={rank} resumed step={step}", flush=True)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
open(f"worker{rank}.pid", "w").write(str(os.getpid()))
steps, pause = int(sys.argv[1]), float(sys.argv[2])
while step < steps:
    loss = ddp(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if rank == 0:
        torch.save({"model": model.state_dict(), "step": step}, snap + ".tmp")
        os.replace(snap + ".tmp", snap)
    print(f"rank={rank} step={step}", flush=True)
    time.sleep(pause)
dist.destroy_process_group()
"""
TORCHRUN = f"{sys.executable} -m torch.distributed.run --standalone --nproc_per_node=2"
