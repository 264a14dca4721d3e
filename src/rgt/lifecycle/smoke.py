"""`rgt smoke`: phase 2 on this machine, before renting anything.

Runs the job's `smoke` command on the CPU under a time limit. A non-zero exit or a Python
traceback anywhere in the output fails it: the cheap check that keeps import errors and shape
bugs from billing GPU-hours (principle 2).

It runs in a scratch copy of the workdir, made with the push's own list of what to leave out
(`rgt.lifecycle.pushlist`), never in the workdir itself: what a smoke writes (outputs,
checkpoints, a `wandb/` dir) must not be pushed with the next `rgt run`. `$RGT_CKPT_DIR`,
`$RGT_OUT_DIR` and `$RGT_RUN_DIR` point into the scratch tree, as they point into the run's
directories on a box. What the user left out (a local `data/`, `.venv`) and files over
LINK_OVER bytes are symlinked, not copied: the smoke reads them where they are. Pulled results
and bytecode caches are not there at all, and no bytecode is written (PYTHONDONTWRITEBYTECODE).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rgt.errors import UserError
from rgt.lifecycle.pushlist import results_excludes, user_excludes
from rgt.onbox.xfer import compile_excludes, excluded, link_stays_inside
from rgt.spec import JobSpec
from rgt.store import Store

LINK_OVER = 16 << 20  # a file this big is data the smoke reads: linked, not copied


@dataclass
class SmokeResult:
    ok: bool
    exit_code: int | None
    seconds: float
    output: str
    reason: str


def smoke(spec: JobSpec, timeout: float | None = None, store: Store | None = None
          ) -> SmokeResult:
    if not spec.smoke:
        raise UserError(f"job {spec.name!r} has no `smoke` command; add one that runs 1–2 "
                        "batches on the CPU (e.g. `python train.py --steps 2`)")
    limit = timeout or spec.smoke_timeout
    with tempfile.TemporaryDirectory(prefix="rgt-smoke-", ignore_cleanup_errors=True) as scratch:
        code = Path(scratch) / "code"
        skip = results_excludes(spec, store or Store()) + ["__pycache__/", "*.pyc"]
        scratch_copy(Path(spec.workdir), code, skip=skip, link=user_excludes(spec))
        env = {**os.environ, **spec.env, "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1",
               "PYTHONDONTWRITEBYTECODE": "1",
               "RGT_SMOKE": "1", "RGT_RUN_DIR": scratch, "RGT_OUT_DIR": f"{scratch}/out",
               "RGT_CKPT_DIR": f"{scratch}/ckpt", "RGT_DURABLE_DIR": scratch}
        for name in ("out", "ckpt"):
            os.mkdir(f"{scratch}/{name}")
        return _run(spec.smoke, code, env, limit)


def _run(command: str, cwd: Path, env: dict, limit: float) -> SmokeResult:
    started = time.monotonic()
    try:
        proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env,
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


def scratch_copy(workdir: Path, into: Path, *, skip: list[str], link: list[str]) -> None:
    """WORKDIR into INTO: files copied, symlinks kept as links; what matches SKIP left out, what
    matches LINK (and any big file) a link to the original."""
    skipped, rules = compile_excludes(skip), compile_excludes(link)
    into.mkdir()
    for current, dirs, files in os.walk(workdir):
        rel = os.path.relpath(current, workdir)
        rel = "" if rel == "." else rel + "/"
        target = into / rel
        for name in list(dirs):
            source = os.path.join(current, name)
            if excluded(skipped, rel + name, True):
                dirs.remove(name)
            elif os.path.islink(source) or excluded(rules, rel + name, True):
                dirs.remove(name)
                _link(source, target / name, rel + name)
            else:
                (target / name).mkdir()
        for name in files:
            source = os.path.join(current, name)
            if excluded(skipped, rel + name, False):
                continue
            if excluded(rules, rel + name, False) or os.path.islink(source) or \
                    os.lstat(source).st_size > LINK_OVER:
                _link(source, target / name, rel + name)
            else:
                shutil.copy2(source, target / name)


def _link(source: str, dest: Path, rel: str) -> None:
    """A symlink at DEST (REL in the tree): a link that stays inside the workdir is copied as
    it is; anything else points at the original (its real path, for a link)."""
    if os.path.islink(source):
        target = os.readlink(source)
        os.symlink(target if link_stays_inside(rel, target) else os.path.realpath(source), dest)
    else:
        os.symlink(os.path.abspath(source), dest)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
