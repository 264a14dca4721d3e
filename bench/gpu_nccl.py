"""A DistributedDataParallel job for torchrun: NCCL on a GPU (gloo without one), a few training
steps, an all_reduce whose sum is checked, and a checkpoint through rgt.ckpt from rank 0.

    torchrun --standalone --nproc-per-node 1 bench/gpu_nccl.py --ckpt-dir DIR

bench/gpu.sh runs it as an rgt job, so the runner starts torchrun, and torchrun its worker.
Prints `all_reduce ok backend=nccl world=1 sum=1.0` and `done step=N`; exits 1 on a wrong sum.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt-dir", required=True)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from rgt.ckpt import Checkpointer

    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    one = torch.ones(1, device=device)
    dist.all_reduce(one)
    if one.item() != world:
        print(f"all_reduce WRONG: sum {one.item()} over {world} ranks", flush=True)
        return 1
    print(f"all_reduce ok backend={dist.get_backend()} world={world} sum={one.item()}",
          flush=True)

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(256, 256).to(device),
                                    device_ids=[local] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ckpt = Checkpointer(args.ckpt_dir, keep_last=1, keep_best=0)
    loaded = ckpt.load_latest(map_location=device)
    step = 0
    if loaded is not None:
        model.module.load_state_dict(loaded.state["model"])
        step = loaded.state["step"]
        print(f"resumed step={step}", flush=True)
    while step < args.steps:
        x = torch.randn(64, 256, device=device)
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 10 == 0:
            print(f"step={step} loss={loss.item():.6f}", flush=True)
    if rank == 0:
        ckpt.save({"model": model.module.state_dict(), "step": step}, step)
    ckpt.close()
    dist.barrier()
    dist.destroy_process_group()
    print(f"done step={step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
