"""A training script's use of rgt.ckpt, run by the tests under an interpreter WITHOUT rgt
installed (Python 3.8, or `python -S`): `rgt.ckpt` must come from PYTHONPATH — the copy
`rgt run` ships to RUN_DIR/lib — import without torch, and save, load and verify a plain state.

Usage: python shipped_ckpt_job.py CKPT_DIR; prints one JSON line. Python 3.8, stdlib only.
"""

import importlib
import json
import os
import signal
import sys

import rgt
import rgt.ckpt as ckpt

ckpt_dir = sys.argv[1]
here = os.path.dirname(ckpt.__file__)
modules = sorted(n[:-3] for n in os.listdir(here)
                 if n.endswith(".py") and n not in ("__init__.py", "torch_state.py"))
for name in modules:  # each shipped module loads on this Python, not only those __init__ uses
    importlib.import_module("rgt.ckpt." + name)

saver = ckpt.Checkpointer(ckpt_dir, keep_last=2, keep_best=1, mode="min")
resumed = saver.load_latest()
start = resumed.step + 1 if resumed else 1
for step in range(start, start + 3):
    saver.save({"step": step, "w": [0.5] * step}, step, metric=1.0 / step)
saver.save_async({"step": start + 3, "w": [0.25]}, start + 3, metric=9.0).result()
saver.close()
loaded = ckpt.Checkpointer(ckpt_dir).load_latest()
listed = ckpt.list_checkpoints(ckpt_dir)

with ckpt.PreemptionFlag() as preempted:
    os.kill(os.getpid(), signal.SIGUSR1)
    caught = preempted.signal_name

sampler = ckpt.ResumableSampler(10, shuffle=False)
batches = sampler.batches(4)
next(batches)
position = sampler.state_dict()

print(json.dumps({
    "python": list(sys.version_info[:2]),
    "rgt_file": rgt.__file__,
    "ckpt_file": ckpt.__file__,
    "version": rgt.__version__,
    "torch_imported": "torch" in sys.modules,
    "resumed_from": resumed.step if resumed else None,
    "loaded_step": loaded.step,
    "loaded_state": loaded.state,
    "steps_kept": sorted(info.step for info in listed),
    "verified": [ckpt.verify_file(info.path).ok for info in listed],
    "preempted_by": caught,
    "sampler": position,
    "cadence_s": round(ckpt.young_daly_interval(3600.0, 2.0), 3),
    "pythonpath": os.environ.get("PYTHONPATH", ""),
}))
