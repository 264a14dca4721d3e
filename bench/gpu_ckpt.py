"""rgt.ckpt on GPU-resident state, beside torch.save and DCP, with the disk's raw speed.

    python bench/gpu_ckpt.py [--size-gb 4] [--repeat 2] [--dir DIR] [--device cuda|cpu]
                             [--json FILE]

The state is a dict of float32 tensors of 64 MiB each, totalling --size-gb, living on
--device (default cuda; `--device cpu` runs the same code on a machine with no GPU, to test
the benchmark itself). One run measures, each a median of --repeat:

* raw disk: --size-gb written from host memory in 64 MiB writes, then fsync: the ceiling;
* sync saves: torch.save + fsync, rgt `save` (atomic: temp file, hash, fsync, rename), DCP save;
* async saves: the stall (until the call returns to the training loop) and the time until the
  checkpoint is on disk, for rgt `save_async` and DCP `async_save`; rgt again with a durable
  mirror (a `file://` folder): until the copy there was read back and hashed;
* rgt `save` by a Checkpointer that `save_async` used: it stages through the kept buffers;
* training stall: a GPU training loop (bf16 matrix products) runs through each async save; the
  stall is the loop's extra wall time over the same number of steps without a save, so it
  counts the snapshot and any slowdown of the steps while the write goes on;
* loads back onto the device: torch.load(map_location), rgt load_latest(map_location, crc32
  verified), DCP load into preallocated tensors; each checked equal to the saved state. The
  page cache is dropped before each load when this runs as root, so loads read the disk.

Prints a table and, with --json, writes the figures to FILE.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

CHUNK = 16 * 1024 * 1024  # float32 elements: 64 MiB per tensor


def drop_page_cache() -> bool:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except OSError:
        return False


def raw_write(directory: Path, nbytes: int) -> float:
    """Seconds to write nbytes of random bytes in 64 MiB writes and fsync them."""
    block = os.urandom(64 << 20)
    path = directory / "raw.bin"
    t = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = nbytes
        while left > 0:
            left -= os.write(fd, block[:min(left, len(block))])
        os.fsync(fd)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - t
    path.unlink()
    return seconds


class Trainer:
    """A stand-in training step on the device: bf16 matrix products, synchronised like a
    loop that reads its loss each step."""

    def __init__(self, torch, device: str) -> None:
        self.torch, self.device = torch, device
        n = 4096 if device == "cuda" else 256
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        self.a = torch.randn(n, n, device=device, dtype=dtype)
        self.b = torch.randn(n, n, device=device, dtype=dtype)

    def step(self) -> None:
        x = self.a
        for _ in range(8):
            x = x @ self.b
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def step_seconds(self, steps: int = 50) -> float:
        self.step()
        t = time.perf_counter()
        for _ in range(steps):
            self.step()
        return (time.perf_counter() - t) / steps

    def through(self, start) -> tuple[float, float, float, object]:
        """Train while a save runs: start() begins it and returns a future. Returns the
        call's stall, the training stall (the loop's wall time over what its steps took just
        before, without a save), the seconds from the call until the future was seen done,
        and the future."""
        base = self.step_seconds(20)
        t = time.perf_counter()
        self.step()
        t_call = time.perf_counter()
        future = start()
        stall = time.perf_counter() - t_call
        steps = 1
        while not future.done():
            self.step()
            steps += 1
        until_done = time.perf_counter() - t_call
        self.step()  # the step after the save ended
        return stall, time.perf_counter() - t - (steps + 1) * base, until_done, future


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-gb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--json", default=None)
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start no further repeat when it would end past this many seconds")
    args = ap.parse_args()
    if args.size_gb * (1 << 30) < 4 * 1024 or args.repeat < 1:
        ap.error("--size-gb must hold at least 4 KiB of tensors and --repeat be 1 or more")

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from rgt.ckpt import Checkpointer

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_ckpt: no CUDA GPU here: skipped (run with --device cpu to test the "
              "benchmark itself)")
        return 0
    device = args.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    root = Path(tempfile.mkdtemp(prefix="rgt-gpu-bench-", dir=args.dir))
    total = int(args.size_gb * (1 << 30)) // 4
    sizes = [CHUNK] * (total // CHUNK) + ([total % CHUNK] if total % CHUNK else [])
    g = torch.Generator(device=device).manual_seed(0)
    state = {f"layer{i}.weight": torch.randn(n, generator=g, device=device)
             for i, n in enumerate(sizes)}
    nbytes = sum(t.numel() * 4 for t in state.values())
    trainer = Trainer(torch, device)
    base_step = trainer.step_seconds()

    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        backend = "cpu:gloo,cuda:nccl" if device == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1)

    times: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    dropped = False

    def record(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    def attempt(name: str, fn) -> None:
        try:
            fn()
        except Exception as err:  # one method failing must not hide the others' figures
            errors[name] = f"{type(err).__name__}: {str(err)[:300]}"

    def same(loaded: dict) -> None:
        for key in (next(iter(state)), next(reversed(state))):
            if not torch.equal(loaded[key].to(device), state[key]):
                raise AssertionError(f"{key} differs after the load")
            if loaded[key].device.type != device:
                raise AssertionError(f"{key} loaded on {loaded[key].device}, not {device}")

    def settle(loading: bool = False) -> None:
        nonlocal dropped
        sync()
        os.sync()
        if loading:
            dropped = drop_page_cache()
        time.sleep(0.3)

    def one_repeat(rep: int) -> None:
        step = rep + 1
        settle()
        record("raw disk write + fsync", raw_write(root, nbytes))

        plain = root / "plain.pt"

        def torch_save() -> None:
            settle()
            t = time.perf_counter()
            with open(plain, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            record("torch.save + fsync", time.perf_counter() - t)
        attempt("torch.save + fsync", torch_save)

        def rgt_save() -> None:
            settle()
            t = time.perf_counter()
            ck.save(state, step)
            record("rgt save (atomic, sync)", time.perf_counter() - t)
            ck.wait()
        attempt("rgt save (atomic, sync)", rgt_save)

        def dcp_save() -> None:
            settle()
            d = root / f"dcp{rep}"
            shutil.rmtree(d, ignore_errors=True)
            t = time.perf_counter()
            dcp.save(state, checkpoint_id=str(d))
            record("DCP save", time.perf_counter() - t)
        attempt("DCP save", dcp_save)

        def saved_async(label: str, start, done_as: str = "on disk"):
            settle()
            stall, training, until_done, future = trainer.through(start)
            record(f"{label}: call returns", stall)
            record(f"{label}: training stall", training)
            record(f"{label}: {done_as}", until_done)
            return future.result()

        attempt("rgt save_async", lambda: saved_async(
            "rgt save_async", lambda: ck_async.save_async(state, step)))

        def rgt_staged_save() -> None:  # a sync save by a Checkpointer that save_async used
            settle()
            t = time.perf_counter()
            ck_async.save(state, 1000 + step)
            record("rgt save (sync, after a save_async)", time.perf_counter() - t)
            ck_async.wait()
        attempt("rgt save (sync, after a save_async)", rgt_staged_save)

        def rgt_mirrored() -> None:
            rec = saved_async("rgt save_async + mirror",
                              lambda: ck_mirror.save_async(state, step), "durable (read back)")
            if not rec.durable:
                raise AssertionError(f"mirror not confirmed: {rec.durable_error}")
        attempt("rgt save_async + mirror", rgt_mirrored)

        def dcp_async() -> None:
            d = root / f"dcp-async{rep}"
            shutil.rmtree(d, ignore_errors=True)
            saved_async("DCP async_save", lambda: dcp.async_save(state, checkpoint_id=str(d)))
        attempt("DCP async_save", dcp_async)

        def torch_load() -> None:
            settle(loading=True)
            t = time.perf_counter()
            loaded = torch.load(plain, map_location=device)
            sync()
            record("torch.load onto the device", time.perf_counter() - t)
            same(loaded)
        attempt("torch.load onto the device", torch_load)

        def rgt_load() -> None:
            settle(loading=True)
            t = time.perf_counter()
            got = ck.load_latest(map_location=device)
            sync()
            record("rgt load_latest onto the device (crc32)", time.perf_counter() - t)
            if got is None or got.step != step:
                raise AssertionError("load_latest found no checkpoint of this step")
            same(got.state)
        attempt("rgt load_latest onto the device (crc32)", rgt_load)

        def dcp_load() -> None:
            into = {k: torch.empty_like(v) for k, v in state.items()}
            settle(loading=True)
            t = time.perf_counter()
            dcp.load(into, checkpoint_id=str(root / f"dcp{rep}"))
            sync()
            record("DCP load into device tensors", time.perf_counter() - t)
            same(into)
        attempt("DCP load into device tensors", dcp_load)

        with contextlib.suppress(FileNotFoundError):
            plain.unlink()
        for d in root.glob("dcp*"):
            shutil.rmtree(d, ignore_errors=True)

    ck = Checkpointer(root / "rgt", keep_last=1, keep_best=0)
    ck_async = Checkpointer(root / "rgt-async", keep_last=1, keep_best=0)
    ck_mirror = Checkpointer(root / "rgt-mirrored", keep_last=1, keep_best=0,
                             durable=(root / "mirror").as_uri())
    try:
        t_bench = time.perf_counter()
        for rep in range(args.repeat):
            spent = time.perf_counter() - t_bench
            if rep and args.budget_s and spent / rep * (rep + 1) > args.budget_s:
                print(f"gpu_ckpt: stopped after {rep} repeat(s): another would pass "
                      f"--budget-s {args.budget_s:g}", file=sys.stderr, flush=True)
                break
            one_repeat(rep)
            print(f"gpu_ckpt: rep {rep + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    finally:
        for c in (ck, ck_async, ck_mirror):
            with contextlib.suppress(Exception):
                c.close()
        shutil.rmtree(root, ignore_errors=True)
        dist.destroy_process_group()

    med = {k: statistics.median(v) for k, v in times.items()}
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none"
    head = (f"state: {len(state)} tensors, {nbytes / 1e9:.2f} GB on {device} ({gpu}); torch "
            f"{torch.__version__}; dir {args.dir or tempfile.gettempdir()}; median of "
            f"{len(times.get('raw disk write + fsync', []))}; training step "
            f"{base_step * 1e3:.2f} ms; page cache "
            f"{'dropped' if dropped else 'NOT dropped (not root)'} before each load")
    print(head)
    width = max([len(k) for k in med] + [6])
    print(f"{'method':<{width}}  {'median s':>9}  {'GB/s':>6}  runs (s)")
    for name, value in med.items():
        rate = nbytes / 1e9 / value if value > 0 and "stall" not in name and "returns" \
            not in name else float("nan")
        runs = ", ".join(f"{x:.3f}" for x in times[name])
        print(f"{name:<{width}}  {value:9.3f}  {rate:6.2f}  {runs}")
    for name, err in errors.items():
        print(f"{name}: FAILED: {err}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"header": head, "bytes": nbytes, "device": device, "gpu": gpu,
             "torch": torch.__version__, "step_s": base_step, "median_s": med,
             "runs_s": times, "errors": errors}, indent=1) + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
