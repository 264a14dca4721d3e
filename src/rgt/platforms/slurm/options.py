"""The job's resources and the spec's `slurm:` section as `#SBATCH` words, and the values
they take: walltimes and sizes in Slurm's forms, the signal lead (SLURM2), array ranges,
dependencies, a sweep's grid. Pure functions; `script` puts them at the top of the script."""

from __future__ import annotations

import itertools
import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import refuse_unsupported
from rgt.spec import JobSpec

SIGNAL_JITTER_S = 60         # Slurm may send the --signal warning up to 60 s early or late
DEFAULT_CKPT_WRITE_S = 30    # assumed checkpoint write time when the spec does not measure one

# Spec env knobs this module reads (documented in the report; none is required).
ENV_CKPT_WRITE_S = "RGT_CKPT_WRITE_S"            # measured checkpoint write time, seconds
ENV_SIGNAL_JITTER_S = "RGT_SLURM_SIGNAL_JITTER_S"  # override the 60 s jitter (tests)
ENV_SIGNAL_LEAD_S = "RGT_SLURM_SIGNAL_LEAD_S"    # override LEAD outright
ENV_SBATCH_ARGS = "RGT_SLURM_SBATCH_ARGS"        # extra #SBATCH words: "--partition=gpu -A x"
ENV_PROXY_HOOK = "RGT_SLURM_HOOK"                # e.g. "module load cuda" / apptainer setup

# The resources vocabulary Slurm honours (`SlurmPlatform.supports`); the rest is refused by name.
SUPPORTS = frozenset({"gpu", "cpus", "mem", "disk", "time", "nodes"})


def signal_lead(ckpt_write_s: float = DEFAULT_CKPT_WRITE_S,
                jitter_s: float = SIGNAL_JITTER_S) -> int:
    """Seconds before the walltime to send the warning: a full checkpoint + the jitter (SLURM2).

    Slurm may deliver ``--signal`` up to 60 s early or late, so the checkpoint must fit in the
    lead even when the signal comes 60 s late.
    """
    if ckpt_write_s < 0 or jitter_s < 0:
        raise ValueError("checkpoint time and jitter are non-negative seconds")
    return max(1, math.ceil(ckpt_write_s + jitter_s))


def lead_for(env: Mapping[str, str]) -> int:
    """`signal_lead` from the spec's env: RGT_SLURM_SIGNAL_LEAD_S wins, else the two parts."""
    try:
        if env.get(ENV_SIGNAL_LEAD_S):
            return max(1, math.ceil(float(env[ENV_SIGNAL_LEAD_S])))
        return signal_lead(float(env.get(ENV_CKPT_WRITE_S) or DEFAULT_CKPT_WRITE_S),
                           float(env.get(ENV_SIGNAL_JITTER_S) or SIGNAL_JITTER_S))
    except ValueError as err:
        raise UserError(f"spec env: signal lead settings must be seconds ({err})") from None


_SLURM_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
_UNIT_TIME = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$", re.IGNORECASE)


def slurm_time(value: str) -> str:
    """A walltime Slurm accepts: its own formats pass through; 90m / 2h / 1d / 45s convert."""
    value = str(value).strip()
    if _SLURM_TIME.match(value):
        return value
    match = _UNIT_TIME.match(value)
    if match:
        seconds = float(match[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[2].lower()]
        minutes = max(1, math.ceil(seconds / 60))  # Slurm's granularity is one minute
        return f"{minutes // 60:02d}:{minutes % 60:02d}:00"
    raise UserError(f"resources.time {value!r}: expected HH:MM:SS, D-HH:MM:SS, minutes, or "
                    "a number with s/m/h/d")


def slurm_mem(value: str, field: str = "resources.mem") -> str:
    """`--mem` (and `--tmp`) in Slurm's integer-with-suffix form: 16G, 512M, 1.5G → 1536M."""
    match = re.match(r"^(\d+(?:\.\d+)?)\s*([KMGT])i?B?$", str(value).strip(), re.IGNORECASE)
    if not match:
        raise UserError(f"{field} {value!r}: expected a size such as 16G or 512M")
    number, unit = float(match[1]), match[2].upper()
    if number.is_integer():
        return f"{int(number)}{unit}"
    units = "KMGT"
    mb = number * 1024 ** (units.index(unit) - 1)
    return f"{max(1, math.ceil(mb))}M"



def grid_cells(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of a parameter grid, in a stable order (keys as given)."""
    if not grid:
        raise UserError("a sweep needs at least one parameter with values")
    for key, values in grid.items():
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)):
            raise UserError(f"grid parameter {key!r} must be an identifier")
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise UserError(f"grid parameter {key!r} needs a non-empty list of values")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(grid[k] for k in keys))]


def array_range(cells: int, max_parallel: int | None = None) -> str:
    """``--array`` value: ``0-(N-1)`` with ``%K`` to cap how many run at once."""
    if cells < 1:
        raise UserError("a job array needs at least one cell")
    text = f"0-{cells - 1}"
    if max_parallel:
        if max_parallel < 1:
            raise UserError("max_parallel must be >= 1")
        text += f"%{max_parallel}"
    return text


def dependency_option(job_ids: str | Iterable[str], kind: str = "afterok") -> str:
    """``--dependency=afterok:1:2`` — run only once every listed job exited 0."""
    ids = [job_ids] if isinstance(job_ids, str | int) else list(job_ids)
    ids = [str(i).strip() for i in ids if str(i).strip()]
    if not ids or not all(re.match(r"^\d+(_\d+)?$", i) for i in ids):
        raise UserError(f"dependency needs numeric job ids, got {ids!r}")
    if kind not in ("afterok", "afterany", "afternotok", "after", "aftercorr"):
        raise UserError(f"unknown dependency kind {kind!r}")
    return f"--dependency={kind}:{':'.join(ids)}"


@dataclass
class BatchOptions:
    job_name: str
    log: str
    time: str | None = None
    mem: str | None = None
    tmp: str | None = None  # node-local disk the job needs (resources.disk)
    cpus: int | None = None
    gpus: int = 0
    nodes: int = 1
    lead_s: int = DEFAULT_CKPT_WRITE_S + SIGNAL_JITTER_S
    requeue: bool = True
    array: str | None = None
    dependency: str | None = None
    extra: list[str] = field(default_factory=list)

    @classmethod
    def from_spec(cls, spec: JobSpec, log: str, **more: Any) -> BatchOptions:
        """The resources vocabulary as sbatch words: gpu → --gres=gpu:N, cpus →
        --cpus-per-task, mem → --mem, disk → --tmp (the least temporary disk a node must
        have: Slurm's TmpDisk), time → --time, nodes → --nodes; the spec's `slurm:`
        section → --partition/--account/--qos/--constraint and its sbatch_args. The GPU
        model is not put in the GRES: its type names are each cluster's own (a100,
        nvidia_a100_80gb …), so a model goes in `slurm: {constraint: …}` or sbatch_args."""
        r = spec.resources
        refuse_unsupported("slurm", SUPPORTS, r)
        return cls(job_name=spec.name, log=log, time=slurm_time(r.time) if r.time else None,
                   mem=slurm_mem(r.mem) if r.mem else None,
                   tmp=slurm_mem(r.disk, "resources.disk") if r.disk else None,
                   cpus=r.cpus, gpus=r.gpu_count,
                   nodes=r.nodes, lead_s=lead_for(spec.env),
                   extra=settings_words(spec), **more)

    def header(self) -> list[str]:
        lines = [f"--job-name={self.job_name}", f"--output={self.log}", "--open-mode=append"]
        if self.time:
            lines.append(f"--time={self.time}")
        if self.nodes > 1:
            lines += [f"--nodes={self.nodes}", "--ntasks-per-node=1"]
        else:
            lines.append("--ntasks=1")
        if self.cpus:
            lines.append(f"--cpus-per-task={self.cpus}")
        if self.mem:
            lines.append(f"--mem={self.mem}")
        if self.tmp:
            lines.append(f"--tmp={self.tmp}")
        if self.gpus:
            lines.append(f"--gres=gpu:{self.gpus}")
        if self.requeue:
            lines.append("--requeue")
        lines.append(f"--signal=B:TERM@{self.lead_s}")
        if self.array:
            lines.append(f"--array={self.array}")
        if self.dependency:
            lines.append(self.dependency if self.dependency.startswith("--")
                         else f"--dependency={self.dependency}")
        lines += self.extra
        return [f"#SBATCH {line}" for line in lines]


def settings_words(spec: JobSpec) -> list[str]:
    """#SBATCH words from the spec's `slurm:` section, then the old RGT_SLURM_SBATCH_ARGS env
    knob (still read; `deprecations` tells the user to move it)."""
    s = spec.slurm
    words = []
    if s is not None:
        words += [f"--{k}={getattr(s, k)}" for k in ("partition", "account", "qos", "constraint")
                  if getattr(s, k)]
        words += s.sbatch_args
    return words + shlex.split(spec.env.get(ENV_SBATCH_ARGS, ""))


def environment_hook(spec: JobSpec, profile_hook: str | None) -> str | None:
    """What runs before setup: `module load` of the spec's slurm.modules, else the old
    RGT_SLURM_HOOK env knob, else the profile's hook."""
    if spec.slurm is not None and spec.slurm.modules:
        return "module load " + " ".join(shlex.quote(m) for m in spec.slurm.modules)
    return spec.env.get(ENV_PROXY_HOOK) or profile_hook


def deprecations(spec: JobSpec) -> list[str]:
    """One note per old environment knob the spec still uses, with its new home."""
    notes = []
    for env, key in ((ENV_SBATCH_ARGS, "sbatch_args"), (ENV_PROXY_HOOK, "modules")):
        if spec.env.get(env):
            notes.append(f"env {env} is deprecated: write it as `slurm: {{{key}: …}}` in the "
                         "spec (it still works for now)")
    return notes
