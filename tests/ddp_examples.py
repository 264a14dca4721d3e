"""PyTorch's multi-node DDP example (tests/data/pytorch_examples, unchanged there), made to run
on CPU: NCCL on CUDA becomes gloo on CPU and nothing else changes. Each substitution must match
exactly once, so a different multinode.py fails here instead of running something else."""

from __future__ import annotations

import shutil
from pathlib import Path

SOURCE = Path(__file__).parent / "data" / "pytorch_examples"

CPU_PATCH = (
    ('    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\n'
     '    init_process_group(backend="nccl")',
     '    init_process_group(backend="gloo")'),
    ("self.model = model.to(self.local_rank)", "self.model = model"),
    ('loc = f"cuda:{self.local_rank}"', 'loc = "cpu"'),
    ("DDP(self.model, device_ids=[self.local_rank])", "DDP(self.model)"),
    ("source = source.to(self.local_rank)", "source = source"),
    ("targets = targets.to(self.local_rank)", "targets = targets"),
    ("pin_memory=True", "pin_memory=False"),
)


def multinode_workdir(dest: Path) -> Path:
    """A workdir holding multinode.py (CPU/gloo) and datautils.py, as a user's project."""
    dest.mkdir(parents=True, exist_ok=True)
    text = (SOURCE / "multinode.py").read_text()
    for old, new in CPU_PATCH:
        if text.count(old) != 1:
            raise AssertionError(f"multinode.py changed: {old!r} found {text.count(old)} times")
        text = text.replace(old, new)
    (dest / "multinode.py").write_text(text)
    shutil.copy(SOURCE / "datautils.py", dest / "datautils.py")
    return dest
