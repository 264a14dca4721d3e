"""What really runs on the box, whatever the laptop's record says.

`rgt run` records every run before it starts (rgt.lifecycle.intent), yet a box can still hold
a live job the record does not name: started from another laptop, from a record restored from
an older backup, or by an rgt older than that rule. `down` would delete it under its trainer and
a new launch would start a second copy beside it, so before either, the on-box census
(`probe.py --census`: every live runner and job process under the box's rgt directories, found
by the RGT_RUN_DIR in their environment, torchrun's workers in their own sessions included) is
compared with the record. What the record does not name blocks the verb, named with its pids
and what to do; nothing of it is ever deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rgt.errors import UserError
from rgt.remote.calls import run_json
from rgt.store import Box, Store

MAX_RUNS = 1000  # a census answer naming more run dirs than this is garbage, not a box
MAX_PIDS = 64  # pids named per run in a message (the count is always whole)


@dataclass
class Stray:
    """A run directory with live processes that the laptop's record does not name."""

    run_dir: str
    runner_pid: int | None
    job_pids: list[int] = field(default_factory=list)
    ckpt_dirs: list[str] = field(default_factory=list)

    def pids(self) -> list[int]:
        return ([self.runner_pid] if self.runner_pid else []) + self.job_pids

    def reason(self, box: str) -> str:
        pids = self.pids()
        shown = " ".join(str(p) for p in pids[:8]) + (" …" if len(pids) > 8 else "")
        return (f"{self.run_dir} is alive on {box} (pid {shown}) but not in this laptop's "
                "record (started from another machine, or a record restored from an older "
                "backup): watch it from where it was started, or stop it on the box "
                f"(kill -TERM {pids[0]}), then run this again")


def on_box(transport, box: Box) -> dict[str, Stray]:
    """Every run dir under the box's rgt directory with a live process, by path."""
    answer = run_json(transport, "probe", "--census", f"{box.data_dir}/rgt", timeout=60)
    runs = answer.get("runs") if isinstance(answer, dict) else None
    if not isinstance(runs, dict) or len(runs) > MAX_RUNS:
        raise UserError(f"{box.name}: the on-box census answered something that is not a "
                        "list of runs; cannot tell what runs there")
    found = {}
    for run_dir, info in runs.items():
        if not isinstance(run_dir, str) or not isinstance(info, dict):
            raise UserError(f"{box.name}: the on-box census named a run in a shape rgt "
                            "does not read; cannot tell what runs there")
        found[run_dir] = Stray(run_dir, _pid(info.get("runner_pid")) if info.get(
            "runner_alive") else None, _pids(info.get("job_pids")),
            [d for d in info.get("ckpt_dirs") or [] if isinstance(d, str)][:MAX_PIDS])
    return found


def unrecorded(store: Store, box: Box, transport) -> list[Stray]:
    """Live run dirs on the box that no run of this box's record names (any status: a
    recorded run, even one the record calls ended, is the probe's to reconcile)."""
    recorded = {run.remote_dir.rstrip("/") for run in store.runs(box.name)}
    return [stray for path, stray in sorted(on_box(transport, box).items())
            if path.rstrip("/") not in recorded and stray.pids()]


def refuse_strays(store: Store, box: Box, transport, platform, verb: str, *,
                  ckpt_home: str | None = None) -> None:
    """Raise a one-line UserError naming every unrecorded live run (with `ckpt_home`: those
    whose job writes there, or whose home the census could not read), where the platform's box
    runs rgt's runner in its own shell (`census`); nothing where it does not."""
    if not getattr(platform, "census", False):
        return
    strays = [s for s in unrecorded(store, box, transport)
              if ckpt_home is None or not s.ckpt_dirs or ckpt_home in s.ckpt_dirs]
    if strays:
        raise UserError(f"{verb} refused: " + " | ".join(s.reason(box.name) for s in strays))


def _pid(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def _pids(values: Any) -> list[int]:
    if not isinstance(values, list):
        return []
    return [p for p in map(_pid, values[:100_000]) if p is not None]
