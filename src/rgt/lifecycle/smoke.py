"""`rgt smoke`: phase 2 on this machine, before renting anything.

Runs the job's `smoke` command on the CPU under a time limit. A non-zero exit or a Python
traceback anywhere in the output fails it: the cheap check that keeps import errors and shape
bugs from billing GPU-hours (principle 2).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

from rgt.errors import UserError
from rgt.spec import JobSpec


@dataclass
class SmokeResult:
    ok: bool
    exit_code: int | None
    seconds: float
    output: str
    reason: str


def smoke(spec: JobSpec, timeout: float | None = None) -> SmokeResult:
    if not spec.smoke:
        raise UserError(f"job {spec.name!r} has no `smoke` command; add one that runs 1–2 "
                        "batches on the CPU (e.g. `python train.py --steps 2`)")
    limit = timeout or spec.smoke_timeout
    env = {**os.environ, **spec.env, "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1",
           "RGT_SMOKE": "1"}
    started = time.monotonic()
    try:
        proc = subprocess.run(["bash", "-c", spec.smoke], cwd=spec.workdir, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=limit, start_new_session=True)
    except subprocess.TimeoutExpired as err:
        output = _text(err.stdout) + _text(err.stderr)
        return SmokeResult(False, None, limit, output, f"did not finish within {limit:.0f} s")
    seconds = time.monotonic() - started
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return SmokeResult(False, proc.returncode, seconds, output,
                           f"exited with {proc.returncode}")
    if "Traceback (most recent call last)" in output:
        return SmokeResult(False, 0, seconds, output, "printed a Python traceback")
    return SmokeResult(True, 0, seconds, output, "passed")


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
