"""Slurm: `sbatch` replaces the detached runner; squeue/scontrol/sacct replace the probe.

`rgt run` on a Slurm box pushes the workdir to the login node (through the box's transport, so
a local login node and one behind SSH behave the same), writes a batch script into the run
directory and submits it. The script is *requeue-safe*: it starts again from its top after a
walltime warning or a preemption and the trainer resumes from its latest checkpoint on the
durable (shared) tier — never node-local ``$TMPDIR`` (SLURM5).

The preemption path, end to end:

1. ``#SBATCH --signal=B:TERM@LEAD`` (LEAD = checkpoint write time + Slurm's 60 s jitter,
   SLURM2; see `signal_lead`) signals the batch shell only.
2. The batch shell traps TERM and forwards it to the step with ``scancel --signal=TERM
   JOB.STEP`` (a TERM sent to ``srun`` itself would cancel the step; the fallback is USR1 to
   srun, which relays it). The trainer's `PreemptionFlag` checkpoints at a safe point (SLURM1)
   and exits 85 (`rgt.ckpt.EXIT_PREEMPTED`); the shell re-waits after the trap, so it sees 85.
3. The batch shell then runs ``scontrol requeue $SLURM_JOB_ID``: the same job ID goes back to
   the queue and the identical script resumes from the checkpoint. ``--open-mode=append`` keeps
   one log across attempts.

A cancel is not a preemption: a ``scancel`` also sends TERM to the batch shell, and Slurm
accepts ``scontrol requeue`` for a job it is still killing, so step 3 would bring a cancelled
job back as a new attempt. Before requeueing, the script asks Slurm (``rgt_cancelled``): a job
with ``Requeue=0`` (what `SlurmPlatform.cancel` and `release` set first) or one COMPLETING
with no reason and no restart Slurm made itself (a plain ``scancel``; a walltime kill says
``Reason=TimeLimit``) is left cancelled, and ends as CANCELLED. (A preemption that kills
outright, PreemptMode=CANCEL with no GraceTime, looks the same to the job and is not requeued
either; PreemptMode=REQUEUE is Slurm's own requeue, and a GraceTime leaves the job RUNNING
while the trainer checkpoints.)

Pure functions (`render_batch_script`, `render_array_script`, `signal_lead`, `grid_cells`,
`array_range`, `dependency_option`, `torchrun_command`, `parse_records`, `summarize_jobs`) build
and read the text; `SlurmPlatform` runs it through the transport.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
import string
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import Launched, Released, Request, asked_for, refuse_unsupported
from rgt.platforms.ssh import SshPlatform
from rgt.profiles import load_profile
from rgt.remote import node_env
from rgt.remote.calls import write_file
from rgt.remote.layout import Layout, job_environment
from rgt.remote.reach import transport_for
from rgt.spec import JobSpec
from rgt.store import TERMINAL, Box, Run, Store
from rgt.transport import Transport

EXIT_PREEMPTED = 85          # rgt.ckpt.EXIT_PREEMPTED: "checkpointed on a signal, requeue me"
SIGNAL_JITTER_S = 60         # Slurm may send the --signal warning up to 60 s early or late
DEFAULT_CKPT_WRITE_S = 30    # assumed checkpoint write time when the spec does not measure one
DEFAULT_RDZV_PORT = 29500
LOG_TAIL_LINES = 40

# Spec env knobs this module reads (documented in the report; none is required).
ENV_CKPT_WRITE_S = "RGT_CKPT_WRITE_S"            # measured checkpoint write time, seconds
ENV_SIGNAL_JITTER_S = "RGT_SLURM_SIGNAL_JITTER_S"  # override the 60 s jitter (tests)
ENV_SIGNAL_LEAD_S = "RGT_SLURM_SIGNAL_LEAD_S"    # override LEAD outright
ENV_SBATCH_ARGS = "RGT_SLURM_SBATCH_ARGS"        # extra #SBATCH words: "--partition=gpu -A x"
ENV_PROXY_HOOK = "RGT_SLURM_HOOK"                # e.g. "module load cuda" / apptainer setup
ENV_NPROC_PER_NODE = "RGT_NPROC_PER_NODE"        # torchrun workers per node
ENV_RDZV_PORT = "RGT_RDZV_PORT"                  # torchrun c10d rendezvous port

LIVE_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
               "RESIZING", "SUSPENDED", "RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT",
               "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "STOPPED"}
METRICS_LINE = re.compile(r"\bstep=\d+\b.*\b[A-Za-z_]\w*=[-+]?\d")
OOM_LINE = re.compile(r"exceeded memory limit \((\d+) > (\d+)\)|oom[-_ ]kill", re.IGNORECASE)


# ----------------------------------------------------------------------------- pure helpers


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


def mem_advice_mb(max_rss_kb: float) -> int:
    """SLURM4: raise --mem to MaxRSS × 1.2 (in MB, rounded up)."""
    return math.ceil(max_rss_kb * 1.2 / 1024)


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


# A line that starts torch's elastic launcher itself, and the words that make its nodes meet.
# A command position: a line's start or after ; & | ( then do else, past VAR=x words and the
# wrappers that run their arguments (uv run, srun, exec …); `command -v torchrun` is not one.
_OWN_LAUNCHER = re.compile(
    r"(?:^|[;&|(]|\b(?:then|do|else)\b)\s*(?:[A-Za-z_]\w*=\S*\s+)*"
    r"(?:(?:exec|nohup|time|env|srun|uv\s+run|poetry\s+run|conda\s+run(?:\s+-n\s+\S+)?)\s+)*"
    r"(?:torchrun|(?:\S*/)?python[0-9.]*\s+-m\s+torch\.distributed\.(?:run|launch))(?=\s|$)")
_RENDEZVOUS = re.compile(r"--(?:rdzv[-_]endpoint|master[-_]addr)\b")
_SHELL_SYNTAX = re.compile(r"[;&|<>`(){}\n]|\$\(")
_PYTHON_WORD = re.compile(r"^(?:\S*/)?python[0-9.]*(?:\s+-u)?\s+(?=\S)")


def own_launcher_lines(script: str) -> list[str]:
    """The logical lines (continuations joined, comments skipped) that start torchrun."""
    joined = re.sub(r"\\\r?\n", " ", script)
    return [line.strip() for line in joined.splitlines()
            if not line.lstrip().startswith("#") and _OWN_LAUNCHER.search(line)]


def refuse_lone_launchers(script: str, nodes: int) -> None:
    """A user's own torchrun line on several nodes must say where the nodes meet; without it
    each node starts a training of its own and the run still reads as a success."""
    if nodes < 2:
        return
    for line in own_launcher_lines(script):
        if not _RENDEZVOUS.search(line) or "--standalone" in line:
            raise UserError(
                f"`run` starts its own torchrun on {nodes} nodes without a rendezvous, so each "
                f"node would train alone: {line[:80]!r}; add --nnodes=$RGT_NUM_NODES "
                "--node-rank=$RGT_NODE_RANK --master-addr=$RGT_HEAD_NODE --master-port=29500 "
                "(or the SKYPILOT_/DSTACK_ names), or write `python train.py` and let rgt "
                "start torchrun")


def torchrun_command(command: str, nproc_per_node: int, *, port: int = DEFAULT_RDZV_PORT
                     ) -> str:
    """Turn ``python train.py ARGS`` into a torchrun launch that spans every node of the job.

    Run once per node (``srun --ntasks-per-node=1``); the c10d rendezvous meets on the first
    host of the allocation (``$RGT_HEAD_NODE``, set by the batch script). The user's text is
    never split into words and re-quoted (that broke quotes, `$VAR`s and `&&`): one plain
    line is put after the launcher as written; a script (several lines, or any shell syntax)
    runs whole as ``bash -c SCRIPT`` in each worker. A script that starts torchrun itself is
    left alone (`refuse_lone_launchers` has checked its rendezvous).
    """
    if own_launcher_lines(command):
        return command
    launcher = ["torchrun", "--nnodes=$SLURM_NNODES", f"--nproc-per-node={nproc_per_node}",
                "--rdzv-id=$SLURM_JOB_ID", "--rdzv-backend=c10d",
                f"--rdzv-endpoint=$RGT_HEAD_NODE:{port}"]
    line = command.strip()
    python = _PYTHON_WORD.match(line)
    if _SHELL_SYNTAX.search(line):
        args = "--no-python bash -c " + shlex.quote(command)
    elif python and (not line[python.end():].startswith("-")
                     or line[python.end():].startswith("-m ")):
        args = line[python.end():]  # torchrun takes the script (or -m module) itself
    else:
        args = "--no-python " + line
    # $SLURM_* and $RGT_HEAD_NODE must expand inside the step, so they stay unquoted.
    return " ".join(launcher) + " " + args


# ----------------------------------------------------------------------------- the script


@dataclass
class ScriptPaths:
    """Where a run's files live (the layout of `rgt.remote.layout.Layout`)."""

    run_dir: str
    code_dir: str
    ckpt_dir: str
    durable_run_dir: str
    log: str  # may contain %j / %A / %a
    lib_dir: str | None = None  # the rgt.ckpt shipped with the code, first on PYTHONPATH

    @classmethod
    def of(cls, layout: Layout, *, array: bool = False) -> ScriptPaths:
        log = f"{layout.run_dir}/slurm-%A_%a.out" if array else f"{layout.run_dir}/slurm-%j.out"
        return cls(layout.run_dir, layout.code, layout.ckpt, layout.durable_run_dir, log,
                   layout.lib)


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
        refuse_unsupported("slurm", SlurmPlatform.supports, r)
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


def step_command(command: str, opts: BatchOptions, *, nproc_per_node: int | None = None,
                 port: int = DEFAULT_RDZV_PORT, per_node: bool = False) -> str:
    """The ``srun`` line: CPUs and GPUs passed explicitly (SLURM3), torchrun when distributed.

    `per_node`: the command is a script that runs once on every node and starts its own
    workers (a SkyPilot or dstack task's `run`, as those tools run it), never wrapped in
    torchrun. Either way each node's shell first sets its rank from Slurm's node id."""
    refuse_lone_launchers(command, opts.nodes)
    srun = ["srun", "--kill-on-bad-exit=1"]
    if opts.nodes > 1:
        srun += ["--nodes=$SLURM_NNODES", "--ntasks-per-node=1"]
    else:
        srun.append("--ntasks=1")
    srun.append('-c "${SLURM_CPUS_PER_TASK:-1}"')
    if opts.gpus:
        srun.append(f"--gres=gpu:{opts.gpus}")
    if not per_node and (opts.nodes > 1 or nproc_per_node):
        command = torchrun_command(command, nproc_per_node or max(1, opts.gpus), port=port)
    # A trapped shell waits for its child, so the trainer's own exit code (85) is the step's;
    # the trainer itself gets the signal (srun relays it to every process of the step).
    inner = ("trap : TERM INT USR1\n" + node_env.allocation_rank_exports("SLURM_NODEID") + "\n"
             + command)
    return " ".join(srun) + f" bash -o pipefail -c {shlex.quote(inner)}"


def _exports(env: Mapping[str, str]) -> list[str]:
    return [f"export {k}={shlex.quote(str(v))}" for k, v in env.items()]


_PREAMBLE = r"""rgt_attempt=${SLURM_RESTART_COUNT:-0}
echo "[rgt] job ${SLURM_JOB_ID}${SLURM_ARRAY_TASK_ID:+ task $SLURM_ARRAY_TASK_ID}" \
  "attempt $rgt_attempt on $(hostname) at $(date -Is)"
rgt_pid=
rgt_signal=
# how scancel names this job: an array cell by ARRAYJOB_TASK (its own job id is refused)
rgt_self=${SLURM_ARRAY_TASK_ID:+${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID}
rgt_self=${rgt_self:-$SLURM_JOB_ID}
rgt_forward() {  # srun itself would cancel the step on TERM: signal the step's processes
  rgt_signal=$1
  echo "[rgt] SIG$1 received at $(date -Is); forwarding to the step so it checkpoints"
  local steps
  steps=$(squeue -h -s -j "$SLURM_JOB_ID" -o %i 2>/dev/null | grep -Ev '[.](batch|extern)$')
  if [ -n "$steps" ] && scancel --signal="$1" $steps; then return; fi
  [ -n "$rgt_pid" ] && kill -USR1 "$rgt_pid" 2>/dev/null  # srun relays USR1 to the tasks
}
trap 'rgt_forward TERM' TERM
trap 'rgt_forward USR1' USR1
rgt_wait() {  # wait for $1, re-waiting after a trapped signal interrupts `wait`
  local rc
  while :; do
    wait "$1"; rc=$?
    if [ "$rc" -gt 128 ] && kill -0 "$1" 2>/dev/null; then continue; fi
    if [ "$rc" -gt 128 ]; then
      wait "$1" 2>/dev/null; local again=$?
      [ "$again" -ne 127 ] && rc=$again
    fi
    return "$rc"
  done
}
rgt_cancelled() {  # is Slurm ending this job for good (a cancel), not warning it?
  local rec
  rec=" $(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | head -n 1) "
  case $rec in *" Requeue=0 "*) return 0 ;; esac  # `rgt cancel` turned requeueing off
  # Slurm requeued it itself (PreemptMode=REQUEUE, an admin's requeue): not a cancel
  case $rec in *" Restarts=$rgt_attempt "*) ;; *) return 1 ;; esac
  # a plain `scancel`: COMPLETING, no reason (a walltime kill says Reason=TimeLimit; the
  # walltime warning and a preemption's grace leave the job RUNNING)
  case $rec in *" JobState=CANCELLED "*) return 0 ;; esac
  case $rec in *" JobState=COMPLETING "*) case $rec in *" Reason=None "*) return 0 ;; esac ;; esac
  return 1
}
"""

_EPILOGUE = r"""rgt_rc=$?
if [ "$rgt_rc" -eq {preempted} ] || {{ [ -n "$rgt_signal" ] && [ "$rgt_rc" -ne 0 ]; }}; then
  if rgt_cancelled; then
    echo "[rgt] step exited $rgt_rc after SIG${{rgt_signal:-?}}: job $SLURM_JOB_ID was" \
      "cancelled, so it is not requeued; its checkpoints stay in $RGT_CKPT_DIR"
{forget}    trap '' TERM USR1
    scancel "$rgt_self" 2>/dev/null  # Slurm records CANCELLED, not a failed exit {preempted}
    exit "$rgt_rc"
  fi
  echo "[rgt] step exited $rgt_rc after SIG${{rgt_signal:-?}}: requeueing job $SLURM_JOB_ID"
  if scontrol requeue "$SLURM_JOB_ID"; then
    echo "[rgt] requeued: the next attempt resumes from the latest checkpoint"
  else
    echo "[rgt] requeue failed; resubmit this script to resume from the checkpoint" >&2
  fi
  exit {preempted}
fi
"""

_SAFE_GLOB = re.compile(r"^[A-Za-z0-9_./*?\-]+$")


def _body(paths: ScriptPaths, env: Mapping[str, str], setup: str, hook: str | None,
          outputs: Sequence[str], step: str, *, ckpt_sh: str, out_sh: str,
          delete_secrets: bool = True, gpus_per_node: int = 0) -> list[str]:
    """The script after the preamble; ckpt_sh/out_sh are shell words (quoted or expanding).
    An array's cells share one secrets.env, so a cell must not delete it (delete_secrets)."""
    secrets = shlex.quote(paths.run_dir + "/secrets.env")
    lines = _exports({**env, "PYTHONUNBUFFERED": "1"})
    lines += [
        f"export RGT_CKPT_DIR={ckpt_sh}",
        'export RGT_SCRATCH_DIR="${TMPDIR:-/tmp}"  # node-local, wiped at job end (SLURM5)',
        # Never `. secrets.env`: sourcing would run `$(...)` and strip quotes inside a value.
        # Each line is NAME=VALUE, VALUE byte for byte; `export "$n=$v"` expands once, never
        # re-parses.
        f"if [ -f {secrets} ]; then",
        "  while IFS= read -r rgt_l || [ -n \"$rgt_l\" ]; do",
        '    rgt_n=${rgt_l%%=*}',
        '    case $rgt_l in *=*) ;; *) continue ;; esac',
        '    case $rgt_n in ""|[0-9]*|*[!A-Za-z0-9_]*) continue ;; esac',
        '    export "$rgt_n=${rgt_l#*=}"',
        f"  done < {secrets}",
        "  unset rgt_l rgt_n",
        "fi",
    ]
    if paths.lib_dir:  # first, and the node's own PYTHONPATH stays (module loads set one)
        lib = shlex.quote(paths.lib_dir)
        lines.append(f'export PYTHONPATH={lib}"${{PYTHONPATH:+:$PYTHONPATH}}"')
    lines += [
        f"cd {shlex.quote(paths.code_dir)} || exit 1",
        'mkdir -p "$RGT_CKPT_DIR"',
    ]
    if hook and hook.strip():
        hook_lines = ["{", hook.strip(),
                      '} || echo "[rgt] warning: environment hook failed (exit $?); '
                      'continuing" >&2']
        if hook.split()[0] == "module":  # the profile default; not every node has modules
            note = shlex.quote(f"[rgt] note: no `module` command here; skipped: {hook.strip()}")
            hook_lines = ["if type module >/dev/null 2>&1; then",
                          *(f"  {line}" for line in hook_lines), "else",
                          f"  echo {note}",
                          "fi"]
        lines += hook_lines
    if setup and setup.strip():
        lines += ["{", setup.strip(),
                  '} || { rgt_rc=$?; echo "[rgt] setup failed (exit $rgt_rc)" >&2; '
                  "exit $rgt_rc; }"]
    lines += [
        'RGT_HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export RGT_HEAD_NODE",
        *node_env.allocation_exports(gpus_per_node, node_count="SLURM_NNODES",
                                     hosts='scontrol show hostnames "$SLURM_JOB_NODELIST"'),
        f"{step} &",
        "rgt_pid=$!",
        'rgt_wait "$rgt_pid"',
    ]
    forget = f"    rm -f {secrets}\n" if delete_secrets else ""
    lines += _EPILOGUE.format(preempted=EXIT_PREEMPTED, forget=forget).rstrip("\n").splitlines()
    if outputs:
        globs = " ".join(o if _SAFE_GLOB.match(o) else shlex.quote(o) for o in outputs)
        lines += [
            'if [ "$rgt_rc" -eq 0 ]; then',
            "  shopt -s nullglob globstar",
            f"  mkdir -p {out_sh}",
            f'  for rgt_o in {globs}; do cp -a --parents "$rgt_o" {out_sh}/ || rgt_rc=$?; done',
            "fi",
        ]
    if delete_secrets:
        # the run has ended (a requeue exited above and still needs them): off the cluster
        lines.append(f"rm -f {secrets}")
    lines += ['echo "[rgt] step exited $rgt_rc at $(date -Is)"', 'exit "$rgt_rc"']
    return lines


def render_batch_script(spec: JobSpec, *, run_id: str, paths: ScriptPaths,
                        env: Mapping[str, str] | None = None, hook: str | None = None,
                        dependency: str | None = None) -> str:
    """The whole sbatch script for one run (what `rgt run --dry-run` should print)."""
    env = dict(env if env is not None else spec.env)
    opts = BatchOptions.from_spec(spec, paths.log, dependency=dependency)
    hook = environment_hook(spec, hook)
    step = _step_for(spec, opts)
    lines = ["#!/bin/bash", *opts.header(),
             f"# rgt run {run_id}: requeue-safe — every attempt runs this identical script and",
             "# the trainer resumes from the latest checkpoint in $RGT_CKPT_DIR.",
             _PREAMBLE.rstrip("\n")]
    # a SkyPilot or dstack task's setup runs on every node, in the step (`_step_for`)
    setup = spec.setup if spec.dialect == "rgt" else ""
    lines += _body(paths, env, setup, hook, spec.outputs, step,
                   ckpt_sh=shlex.quote(paths.ckpt_dir),
                   out_sh=shlex.quote(f"{paths.durable_run_dir}/out"), gpus_per_node=opts.gpus)
    return "\n".join(lines) + "\n"


def render_array_script(spec: JobSpec, grid: Mapping[str, Sequence[Any]], *, run_id: str,
                        paths: ScriptPaths, max_parallel: int | None = None,
                        env: Mapping[str, str] | None = None, hook: str | None = None,
                        dependency: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """One job array for a parameter sweep; returns (script, cells).

    Cell i exports ``RGT_PARAM_<NAME>`` for each parameter, runs the command with ``{name}``
    placeholders filled in, and writes into its own ``<durable>/cells/<i>/`` (``RGT_CELL_DIR``,
    with ``ckpt/`` as its RGT_CKPT_DIR and ``out/`` as its RGT_OUT_DIR, where the spec's
    `outputs` are expected).
    """
    cells = grid_cells(grid)
    env = dict(env if env is not None else spec.env)
    opts = BatchOptions.from_spec(spec, paths.log, array=array_range(len(cells), max_parallel),
                                  dependency=dependency)
    hook = environment_hook(spec, hook)
    cases = ['case "$SLURM_ARRAY_TASK_ID" in']
    for i, cell in enumerate(cells):
        exports = " ".join(f"RGT_PARAM_{k.upper()}={shlex.quote(str(v))}" for k, v in cell.items())
        cases.append(f"  {i}) export {exports} ;;")
    # The same command for every cell: each value reaches it as data, through its variable.
    command = grid_command(spec.run, grid)
    # exported: the step's own shell (srun bash -c) evaluates it, not this script
    cases.insert(0, f"export rgt_command={shlex.quote(command)}")
    cases += ['  *) echo "[rgt] no cell $SLURM_ARRAY_TASK_ID in this sweep" >&2; exit 2 ;;',
              "esac"]
    step = _step_for(spec, opts, command='eval "$rgt_command"')
    lines = ["#!/bin/bash", *opts.header(),
             f"# rgt sweep {run_id}: {len(cells)} cells over {', '.join(grid)}; each cell",
             "# resumes from its own checkpoint dir after a requeue.",
             _PREAMBLE.rstrip("\n"), *cases,
             f'export RGT_CELL_DIR="{_dq(paths.durable_run_dir)}/cells/$SLURM_ARRAY_TASK_ID"',
             'export RGT_OUT_DIR="$RGT_CELL_DIR/out"',
             'mkdir -p "$RGT_OUT_DIR"']
    # Cells share one code dir, so a cell writes its outputs to $RGT_OUT_DIR itself; copying
    # relative paths out of the shared workdir would mix the cells up.
    lines += _body(paths, {k: v for k, v in env.items() if k != "RGT_OUT_DIR"}, spec.setup,
                   hook, [], step,
                   ckpt_sh='"$RGT_CELL_DIR/ckpt"', out_sh='"$RGT_CELL_DIR/out"',
                   delete_secrets=False, gpus_per_node=opts.gpus)
    return "\n".join(lines) + "\n", cells


def grid_command(run: str, grid: Mapping[str, Any]) -> str:
    """`run` with each ``{name}`` replaced by a reference to ``$RGT_PARAM_<NAME>`` that the
    shell expands exactly once, as one word, whatever quotes the placeholder sits in: unquoted
    → ``"$V"``; inside double quotes → ``${V}``; inside single quotes → the quote is closed
    around ``"$V"`` (``'…'"$V"'…'``). A value is never pasted into the command text, so
    ``$(…)``, quotes or spaces in it stay data. ``{{``/``}}`` are literal braces."""
    out: list[str] = []
    quote = ""  # "", "'", '"' or "$'" — the shell quoting in force at this point
    escaped = False
    for literal, name, spec, conversion in string.Formatter().parse(run):
        for ch in literal:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\" and quote != "'":
                escaped = True
            elif quote in ("'", "$'"):
                if ch == "'":
                    quote = ""
            elif quote == '"':
                if ch == '"':
                    quote = ""
            elif ch == "'":
                quote = "$'" if len(out) > 1 and out[-2] == "$" else "'"
            elif ch == '"':
                quote = '"'
        if name is None:
            continue
        if name not in grid or spec or conversion:
            raise UserError(f"the run command's placeholder {{{name}}} is not a grid parameter "
                            "(use {name} for a grid value, {{ }} for a literal brace)")
        var = f"RGT_PARAM_{name.upper()}"
        if quote == '"':
            out.append("${" + var + "}")
        elif quote:
            out.append(f"'\"${{{var}}}\"{quote}")
        else:
            out.append(f'"${{{var}}}"')
    return "".join(out)


def _dq(text: str) -> str:
    """Text safe inside double quotes."""
    return re.sub(r'([\\"$`])', r"\\\1", text)


def _step_for(spec: JobSpec, opts: BatchOptions, command: str | None = None) -> str:
    nproc = spec.env.get(ENV_NPROC_PER_NODE)
    port = int(spec.env.get(ENV_RDZV_PORT) or DEFAULT_RDZV_PORT)
    if command is not None and (opts.nodes > 1 or nproc):
        # an array cell's command is only known in the script; torchrun wraps it at run time
        raise UserError("a multi-node or torchrun sweep is not supported yet; sweep "
                        "single-node cells")
    per_node = spec.dialect != "rgt"
    run = command or spec.run
    if per_node and command is None and spec.setup.strip():
        # SkyPilot and dstack run setup on every node before its run, and a failed setup
        # fails the job: so each node's step does the same
        run = ("{\n" + spec.setup.strip() + "\n} || { rgt_rc=$?; echo \"[rgt] setup failed on "
               "node $SLURM_NODEID (exit $rgt_rc)\" >&2; exit $rgt_rc; }\n" + run)
    return step_command(run, opts, nproc_per_node=int(nproc) if nproc else None, port=port,
                        per_node=per_node)


# ----------------------------------------------------------------------------- reading state

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_records(text: str) -> list[dict[str, str]]:
    """``scontrol show job -o`` / jobcomp filetxt lines → one dict per line (Key=Value …)."""
    records = []
    for line in text.splitlines():
        keys = list(_KEY.finditer(line))
        if not keys:
            continue
        record = {}
        for here, after in zip(keys, [*keys[1:], None], strict=True):
            end = after.start() if after else len(line)
            record[here[1]] = line[here.end():end].strip()
        records.append(record)
    return records


def _epoch(text: str | None) -> float | None:
    if not text or text in ("Unknown", "None", "N/A", "0"):
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def _exit(text: str | None) -> tuple[int | None, int | None]:
    if not text or ":" not in text:
        return None, None
    code, sig = text.split(":", 1)
    try:
        return int(code), int(sig)
    except ValueError:
        return None, None


def _status_of(state: str, exit_code: int | None, signal: int | None, reason: str,
               restarts: int, log: str, job_id: str, max_rss_kb: float | None
               ) -> tuple[str, list[str], str]:
    """(rgt status, causes, advice) for one Slurm job state."""
    causes: list[str] = []
    advice = ""
    if state in ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                 "RESV_DEL_HOLD", "SPECIAL_EXIT"):
        note = f"PENDING ({reason or 'None'})"
        if restarts:
            note += f"; requeued {restarts}× — resumes from its latest checkpoint"
        return "starting", [note], ""
    if state in RUNNING_STATES or state == "SUSPENDED":
        if restarts:
            causes.append(f"attempt {restarts + 1}: requeued {restarts}× and resumed")
        if state == "SUSPENDED":
            causes.append("SUSPENDED by the scheduler")
        return "running", causes, ""
    if state == "COMPLETED":
        return "succeeded", causes, ""
    if state == "CANCELLED":
        return "cancelled", [f"CANCELLED ({reason})" if reason and reason != "None"
                             else "CANCELLED (scancel)"], ""
    if state == "OUT_OF_MEMORY" or (state == "FAILED" and OOM_LINE.search(log)):
        causes = ["OUT_OF_MEMORY: the job went over its --mem and was killed (SLURM4); "
                  "a host-RAM OOM is a job state, not a Python traceback"]
        rss = max_rss_kb
        if rss:
            advice = (f"raise --mem (resources.mem) to at least {mem_advice_mb(rss)}M "
                      f"(MaxRSS {rss / 1024:.0f}M × 1.2); do not shrink the batch — this is "
                      "host RAM (U9), not GPU memory (U10)")
        else:
            advice = (f"read `sacct -j {job_id} -o MaxRSS,ReqMem` and raise --mem "
                      "(resources.mem) to MaxRSS × 1.2; do not shrink the batch — this is host "
                      "RAM (U9), not GPU memory (U10)")
        return "failed", causes, advice
    if state in ("TIMEOUT", "DEADLINE"):
        saved = "preempted step=" in log
        causes = [f"{state}: killed at its walltime (--time)"
                  + ("" if saved else " with no checkpoint on signal in the log")]
        advice = (f"resume it: `scontrol requeue {job_id}` (the script restarts from the latest "
                  "checkpoint), or raise resources.time / RGT_CKPT_WRITE_S so the --signal "
                  "warning leaves room for a checkpoint (SLURM2)")
        return "preempted", causes, advice
    if state in ("PREEMPTED", "NODE_FAIL", "BOOT_FAIL"):
        causes = [f"{state}: the scheduler or the node ended the job, not the trainer"]
        advice = (f"requeue territory: `scontrol requeue {job_id}` resumes from the latest "
                  "checkpoint on the shared filesystem (never $TMPDIR, SLURM5)")
        return "preempted", causes, advice
    # FAILED and anything unknown
    if exit_code == EXIT_PREEMPTED:
        return "preempted", ["exited 85: checkpointed on a signal, but was not requeued"], (
            f"resume it: `scontrol requeue {job_id}` or run it again")
    if signal == 9:
        causes.append("killed by signal 9 (SIGKILL): the KillWait grace ran out before the "
                      "step exited — checkpoint earlier (SLURM2)")
    elif signal:
        causes.append(f"killed by signal {signal}")
    elif exit_code:
        causes.append(f"{state} with exit code {exit_code}")
    else:
        causes.append(state)
    return "failed", causes, advice


def last_metrics(log: str) -> str | None:
    for line in reversed(log.splitlines()):
        if METRICS_LINE.search(line):
            return line.strip()
    return None


def size_kb(text: str | None) -> float | None:
    """Slurm's ``300M`` / ``2G`` / ``512000K`` (MinMemoryNode, Tres mem=) in KB."""
    m = re.match(r"^(\d+(?:\.\d+)?)([KMGT]?)", (text or "").strip())
    if not m or not float(m[1]):
        return None
    return float(m[1]) * 1024 ** "KMGT".index(m[2] or "M")


def requested_mem_kb(record: Mapping[str, str]) -> float | None:
    if record.get("MinMemoryNode"):
        return size_kb(record["MinMemoryNode"])
    m = re.search(r"\bmem=([\d.]+[KMGT]?)", record.get("Tres") or record.get("TRES") or "")
    return size_kb(m[1]) if m else None


def max_rss_from_log(log: str, requested_kb: float | None = None) -> float | None:
    """KB of the largest ``exceeded memory limit (RSS > LIMIT)`` slurmstepd reported.

    Slurm 22.05 prints bytes (older releases printed KB); the limit, compared with the job's
    request, tells which.
    """
    pairs = [(float(m[1]), float(m[2])) for m in OOM_LINE.finditer(log) if m[1]]
    if not pairs:
        return None
    rss, limit = max(pairs)
    in_bytes = True
    if requested_kb:
        in_bytes = abs(limit / 1024 - requested_kb) <= abs(limit - requested_kb)
    return rss / 1024 if in_bytes else rss


def summarize_jobs(records: Sequence[Mapping[str, str]], log: str = "", *,
                   max_rss_kb: float | None = None) -> dict[str, Any]:
    """Flatten Slurm records of one job (or every task of an array) into the watch summary."""
    if not records:
        return _summary("unknown", causes=["Slurm no longer knows this job and no accounting "
                                           "or completion log has it"])
    rss = max_rss_kb or max_rss_from_log(log, requested_mem_kb(records[0]))
    per_task = []
    for rec in records:
        state = (rec.get("JobState") or rec.get("State") or "UNKNOWN").split()[0].rstrip("+")
        code, sig = _exit(rec.get("ExitCode"))
        job_id = rec.get("JobId") or rec.get("JobID") or "?"
        if rec.get("ArrayTaskId") == "4294967294":  # what is left of cells that never ran
            job_id = f"{rec.get('ArrayJobId', job_id)}_[cells not started]"
        elif rec.get("ArrayTaskId"):
            job_id = f"{rec.get('ArrayJobId', job_id)}_{rec['ArrayTaskId']}"
        status, causes, advice = _status_of(state, code, sig, rec.get("Reason", ""),
                                            int(rec.get("Restarts") or 0), log, job_id, rss)
        per_task.append((job_id, state, status, code, sig, causes, advice, rec))
    order = ["running", "starting", "failed", "preempted", "cancelled", "unknown", "succeeded"]
    worst = min(per_task, key=lambda t: order.index(t[2]) if t[2] in order else 5)
    status = worst[2]
    causes = []
    if len(per_task) > 1:
        counts: dict[str, int] = {}
        for t in per_task:
            counts[t[1]] = counts.get(t[1], 0) + 1
        causes.append("array: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        for t in per_task:
            if t[2] not in ("succeeded", "running"):
                causes += [f"{t[0]}: {c}" for c in t[5]]
    else:
        causes = worst[5]
    starts = [_epoch(t[7].get("StartTime")) for t in per_task]
    ends = [_epoch(t[7].get("EndTime")) for t in per_task]
    started = min((s for s in starts if s), default=None)
    live = status in ("running", "starting")
    ended = None if live else max((e for e in ends if e), default=None)
    if started and ended and ended < started:
        ended = None
    exit_code = worst[3] if not live else None
    now = time.time()
    walltime = sum(max(0.0, (end or now) - start) * int(t[7].get("NumNodes") or 1)
                   for start, end, t in zip(starts, ends, per_task, strict=True) if start)
    return _summary(status, exit_code=exit_code, signal=worst[4] or None, started=started,
                    ended=ended, causes=causes, advice=worst[6], log=log,
                    slurm={"states": {t[0]: t[1] for t in per_task},
                           "reason": worst[7].get("Reason"), "walltime_s": walltime})


def _summary(status: str, *, exit_code: int | None = None, signal: int | None = None,
             started: float | None = None, ended: float | None = None,
             causes: list[str] | None = None, advice: str = "", log: str = "",
             slurm: dict | None = None, error: str | None = None) -> dict[str, Any]:
    tail = log.splitlines()[-LOG_TAIL_LINES:]
    return {
        "status": status,
        "exit_code": exit_code,
        "signal": signal,
        "started": started,
        "ended": ended,
        "duration": ((ended or time.time()) - started) if started else None,
        "heartbeat_age": None,
        "causes": causes or [],
        "advice": advice,
        "probe_warnings": [],
        "sync": {},
        "error": error,
        "metrics": last_metrics(log),
        "log_tail": tail,
        "disks": {},
        "slurm": slurm or {},
    }


# ----------------------------------------------------------------------------- audit

# Filesystem types every node of a cluster sees; anything else is node-local (SLURM5).
SHARED_FS_TYPES = {"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cephfs", "ceph", "panfs",
                   "wekafs", "glusterfs", "fuse.glusterfs", "cifs", "smb3", "orangefs",
                   "fuse.juicefs", "fuse.beegfs", "vast"}

# One command, many sections: partitions, per-partition limits, the user's association limits
# (needs slurmdbd) and the filesystem type under each path that matters.
_AUDIT_SCRIPT = r"""
echo '## sinfo'; sinfo -h -o '%P|%a|%l|%D|%c|%m|%G' 2>&1
echo '## partitions'; scontrol show partition -o 2>&1
echo '## assoc'; sacctmgr -nP show assoc where user="$(id -un)" \
  format=Account,Partition,QOS,MaxJobs,MaxSubmit,MaxWall,MaxTRES,GrpTRES 2>&1
echo '## fs'
for p in "$HOME" /scratch "${TMPDIR:-/tmp}" "$@"; do
  [ -e "$p" ] || continue
  printf '%s|' "$p"; df -PT "$p" 2>/dev/null | awk 'NR==2 {print $2 "|" $7}'
done
"""


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            out[current] = []
        elif current and line.strip():
            out[current].append(line.rstrip())
    return out


def parse_sinfo(lines: Sequence[str]) -> list[dict[str, Any]]:
    """`sinfo -o '%P|%a|%l|%D|%c|%m|%G'` → one entry per partition (`*` marks the default)."""
    parts = []
    for line in lines:
        fields = line.split("|")
        if len(fields) != 7:
            continue
        name, avail, limit, nodes, cpus, mem, gres = fields
        parts.append({"name": name.rstrip("*"), "default": name.endswith("*"), "avail": avail,
                      "time_limit": limit, "nodes": int(nodes) if nodes.isdigit() else None,
                      "cpus_per_node": cpus, "mem_mb_per_node": mem,
                      "gres": "" if gres in ("(null)", "") else gres,
                      "gpus_per_node": gpus_in_gres(gres)})
    return parts


def gpus_in_gres(gres: str) -> int:
    """`gpu:a100:4(S:0-1),gpu:v100:2` → 4 (the most any node of the line has)."""
    counts = [int(m[1]) for m in re.finditer(r"gpu(?::[^:,(]+)?:(\d+)", gres or "")]
    return max(counts, default=0)


def classify_filesystems(lines: Sequence[str]) -> list[dict[str, Any]]:
    """`PATH|FSTYPE|MOUNT` lines → each path with its type and whether every node sees it."""
    seen, out = set(), []
    for line in lines:
        path, _, rest = line.partition("|")
        fstype, _, mount = rest.partition("|")
        if not fstype or path in seen:
            continue
        seen.add(path)
        out.append({"path": path, "fstype": fstype, "mount": mount,
                    "shared": fstype.lower() in SHARED_FS_TYPES})
    return out


def audit_verdicts(report: Mapping[str, Any], durable_dir: str) -> list[dict[str, str]]:
    """Judge what the scheduler audit found: where checkpoints go, GPUs, limits."""
    verdicts = []

    def add(level: str, gid: str, message: str) -> None:
        verdicts.append({"level": level, "id": gid, "message": message})

    parts = report.get("partitions") or []
    nodes = sum(p.get("nodes") or 0 for p in parts)
    durable = next((f for f in report.get("filesystems") or [] if f["path"] == durable_dir),
                   None)
    if not parts:
        add("fail", "SLURM", "sinfo listed no partitions: is this a Slurm login node "
                             f"(SLURM_CONF)? {report.get('sinfo_error') or ''}".strip())
    if durable is None:
        add("warn", "SLURM5", f"could not tell which filesystem holds {durable_dir}")
    elif durable["shared"]:
        add("ok", "SLURM5", f"checkpoints go to {durable_dir} on {durable['fstype']} "
                            "(shared by every node)")
    elif nodes <= 1:
        add("ok", "SLURM5", f"{durable_dir} is on {durable['fstype']}, node-local, but this "
                            "cluster has a single node, so the job sees it")
    else:
        add("warn", "SLURM5", f"{durable_dir} is on {durable['fstype']}, node-local: a job on "
                              "another node cannot see it and its checkpoints vanish with the "
                              "job; `rgt up` again with --durable-dir on a shared filesystem "
                              "($HOME, /scratch)")
    if parts and not any(p["gpus_per_node"] for p in parts):
        add("warn", "SLURM", "no partition offers GPUs in GRES: CPU-only cluster, or GPUs are "
                             "not declared (ask the admins which --gres/--gpus to use)")
    if report.get("assoc_error"):
        add("ok", "SLURM", "no accounting database: per-user limits unknown (sacct post-mortems "
                           "fall back to the job completion log)")
    return verdicts


def scheduler_audit(transport: Transport, box: Box) -> dict[str, Any]:
    """Partitions, GPUs per node, limits, shared vs node-local filesystems (SLURM5)."""
    dirs = " ".join(shlex.quote(d) for d in dict.fromkeys([box.data_dir, box.durable_dir]))
    out = transport.run(f"bash -s -- {dirs}", stdin=_AUDIT_SCRIPT.encode(), check=False,
                        timeout=60)
    sec = _sections(out.stdout)
    sinfo = sec.get("sinfo", [])
    report: dict[str, Any] = {"partitions": parse_sinfo(sinfo)}
    if not report["partitions"] and sinfo:
        report["sinfo_error"] = sinfo[0]
    limits = {}
    for rec in parse_records("\n".join(sec.get("partitions", []))):
        limits[rec.get("PartitionName", "?")] = {
            k: rec[k] for k in ("MaxTime", "DefaultTime", "MaxNodes", "MaxMemPerNode",
                                "DefMemPerCPU", "MaxCPUsPerNode", "PreemptMode", "QoS")
            if rec.get(k) not in (None, "", "UNLIMITED", "N/A")}
    for part in report["partitions"]:
        part["limits"] = limits.get(part["name"], {})
    assoc = sec.get("assoc", [])
    if any("|" in line for line in assoc):
        keys = ["account", "partition", "qos", "max_jobs", "max_submit", "max_wall",
                "max_tres", "grp_tres"]
        report["associations"] = [dict(zip(keys, line.split("|"), strict=False))
                                  for line in assoc if "|" in line]
    else:
        report["assoc_error"] = (assoc[0] if assoc else "sacctmgr printed nothing")[:200]
    report["filesystems"] = classify_filesystems(sec.get("fs", []))
    report["verdicts"] = audit_verdicts(report, box.durable_dir)
    return report


# ----------------------------------------------------------------------------- the platform


def submit(transport: Transport, script_path: str, *, cwd: str | None = None) -> str:
    """``sbatch --parsable SCRIPT`` → the job id (``123``; arrays too)."""
    where = f"cd {shlex.quote(cwd)} && " if cwd else ""
    result = transport.run(f"{where}sbatch --parsable {shlex.quote(script_path)}",
                           timeout=60, check=False)
    if not result.ok:
        raise UserError(f"sbatch refused the job: {(result.stderr or result.stdout).strip()}")
    return result.stdout.strip().splitlines()[-1].split(";")[0]


def live_states(transport: Transport, job_id: str) -> dict[str, str]:
    """{job or array cell: state} for what squeue still lists of the job ({}: it has left)."""
    out = transport.run(f"squeue -h -j {shlex.quote(job_id)} -o '%i %T'", check=False,
                        timeout=30)
    pairs = (line.split() for line in out.stdout.splitlines() if out.ok)
    return {words[0]: words[1] for words in pairs if len(words) == 2}


def job_records(transport: Transport, job_id: str) -> tuple[list[dict[str, str]], str]:
    """The job's records and where they came from: scontrol, then sacct, then jobcomp."""
    out = transport.run(f"scontrol show job -o {shlex.quote(job_id)}", check=False, timeout=30)
    if out.ok and out.stdout.strip():
        return parse_records(out.stdout), "scontrol"
    acct = transport.run(
        f"sacct -j {shlex.quote(job_id)} -n -P -X "
        "-o JobID,State,ExitCode,Start,End,Reason 2>/dev/null", check=False, timeout=30)
    if acct.ok and acct.stdout.strip():
        records = []
        for line in acct.stdout.strip().splitlines():
            jid, state, code, start, end, reason = (line.split("|") + [""] * 6)[:6]
            task = jid.split("_", 1)[1] if "_" in jid else ""
            records.append({"JobId": jid.split("_")[0], "ArrayTaskId": task,
                            "ArrayJobId": jid.split("_")[0] if task else "",
                            "JobState": state, "ExitCode": code, "StartTime": start,
                            "EndTime": end, "Reason": reason})
        return [r for r in records if r["JobState"]], "sacct"
    loc = transport.run("scontrol show config | sed -n 's/^JobCompLoc *= *//p'", check=False,
                        timeout=30).stdout.strip()
    if loc.startswith("/"):
        comp = transport.run(f"grep -E 'JobId={re.escape(job_id)}( |$)|ArrayJobId={job_id} ' "
                             f"{shlex.quote(loc)} 2>/dev/null", check=False, timeout=30)
        latest: dict[str, dict[str, str]] = {}
        for rec in parse_records(comp.stdout):
            latest[rec.get("JobId", "")] = rec  # the last line per job id wins (requeues)
        if latest:
            return list(latest.values()), "jobcomp"
    return [], "none"


def sacct_max_rss_kb(transport: Transport, job_id: str) -> float | None:
    out = transport.run(f"sacct -j {shlex.quote(job_id)} -n -P -o MaxRSS 2>/dev/null",
                        check=False, timeout=30)
    values = []
    for word in out.stdout.split():
        m = re.match(r"^(\d+(?:\.\d+)?)([KMGT]?)$", word.strip())
        if m:
            values.append(float(m[1]) * 1024 ** "KMGT".index(m[2] or "K"))
    return max(values) if out.ok and values else None


class SlurmPlatform(SshPlatform):
    """The login node is an SSH box (or this machine); `launch` = sbatch, `state` =
    scontrol/sacct/jobcomp, `release` = scancel, `audit_extras` = partitions and filesystems."""

    name = "slurm"
    supports = frozenset({"gpu", "cpus", "mem", "disk", "time", "nodes"})
    per_job_resources = True  # each job asks the scheduler for its own resources
    spec_sections = frozenset({"slurm"})

    def register(self, store: Store, request: Request) -> Box:
        """The login node, plus the resources `rgt up` named as every job's defaults (a
        spec's own `resources` win field by field)."""
        box = super().register(store, request)
        asked = asked_for(request.resources)
        if asked:
            defaults = request.resources.model_dump(include=set(asked))
            store.update_box(box.name, extra={**box.extra, "resources": defaults})
            box = store.box(box.name)
        return box

    @staticmethod
    def with_defaults(box: Box, spec: JobSpec) -> JobSpec:
        defaults = box.extra.get("resources") or {}
        if not defaults:
            return spec
        own = spec.resources.model_dump(exclude_defaults=True)
        return spec.model_copy(update={"resources": type(spec.resources).model_validate(
            {**defaults, **own})})

    def render(self, box: Box, spec: JobSpec, run_id: str, *,
               dependency: str | None = None) -> str:
        """The exact script `launch` would submit (for `rgt run --dry-run`); runs nothing."""
        return self._script(box, spec, run_id, dependency)[0]

    @staticmethod
    def _script(box: Box, spec: JobSpec, run_id: str, dependency: str | None
                ) -> tuple[str, list[dict[str, Any]], ScriptPaths]:
        """(script, sweep cells, paths): one batch job, or one array cell per grid point."""
        profile = load_profile(box.profile)
        spec = SlurmPlatform.with_defaults(box, spec)
        layout = Layout.of(box, run_id, spec)
        paths = ScriptPaths.of(layout, array=bool(spec.grid))
        env = job_environment(spec, profile, layout)
        hook = profile.network.proxy_hook
        if spec.grid:
            script, cells = render_array_script(spec, spec.grid, run_id=run_id, paths=paths,
                                                max_parallel=spec.max_parallel, env=env,
                                                hook=hook, dependency=dependency)
            return script, cells, paths
        script = render_batch_script(spec, run_id=run_id, paths=paths, env=env, hook=hook,
                                     dependency=dependency)
        return script, [], paths

    @staticmethod
    def dependency_on(earlier: Run) -> str:
        """`--dependency=afterok:<job>`: the next stage starts once `earlier` succeeded."""
        job_id = (earlier.spec.get("platform_run") or {}).get("job_id")
        if not job_id:
            raise UserError(f"run {earlier.id} was not submitted to Slurm; --after chains "
                            "Slurm jobs only")
        if earlier.status in ("failed", "cancelled", "vanished", "sync-failed"):
            raise UserError(f"run {earlier.id} ended {earlier.status}; a stage after it would "
                            "never start. Fix and rerun that stage first")
        return dependency_option(str(job_id))

    def launch(self, transport: Transport, box: Box, spec: JobSpec, layout: Layout, *,
               dependency: str | None = None) -> Launched:
        """Write the batch script beside the pushed code and sbatch it.

        Returns how the run is detached and the `platform_run` record watch, logs and pull
        read (job id, log path, script, number of sweep cells).
        """
        script, cells, paths = self._script(box, spec, layout.run_id, dependency)
        notes = deprecations(spec)
        script_path = f"{layout.run_dir}/job.sbatch"
        write_file(transport, script_path, script.encode(), mode="700")
        if cells:
            write_file(transport, f"{layout.run_dir}/cells.json", json.dumps(cells).encode(),
                       mode="644")
        transport.run(f"mkdir -p {shlex.quote(layout.ckpt)} {shlex.quote(layout.out)}",
                      timeout=30)
        job_id = submit(transport, script_path, cwd=layout.run_dir)
        log = paths.log.replace("%j", job_id).replace("%A", job_id)
        if not cells:  # `rgt logs` reads RUN_DIR/log
            transport.run(f"ln -sfn {shlex.quote(log)} {shlex.quote(layout.run_dir + '/log')}",
                          check=False, timeout=30)
        return Launched(f"sbatch:{job_id}", {"kind": "slurm", "job_id": job_id, "log": log,
                                             "script": script_path,
                                             "cells": len(cells) or None}, notes=notes)

    def state(self, store: Store, box: Box, run: Run, transport: Transport) -> dict[str, Any]:
        info = run.spec.get("platform_run") or {}
        if not info:  # not submitted by rgt's sbatch: the on-box runner's probe knows it
            return super().state(store, box, run, transport)
        job_id = str(info.get("job_id") or "")
        records, source = job_records(transport, job_id)
        log = self._log(transport, info, records)
        rss = None
        if records and any("OUT_OF_MEMORY" in (r.get("JobState") or "") for r in records):
            rss = sacct_max_rss_kb(transport, job_id)
        if not records:
            # Gone from squeue/scontrol and no accounting: keep what we last knew.
            return _summary(run.status, exit_code=run.exit_code, log=log,
                            causes=[f"job {job_id} is no longer known to Slurm "
                                    "(no accounting, no completion log); last known "
                                    f"status {run.status}"])
        summary = summarize_jobs(records, log, max_rss_kb=rss)
        summary["slurm"]["source"] = source
        summary["slurm"]["job_id"] = job_id
        # `rgt ls` shows walltime used where other platforms show dollars; a minute's drift
        # is worth a write, a poll's is not
        walltime = round(summary["slurm"]["walltime_s"], 1)
        if abs(walltime - (info.get("walltime_s") or 0)) >= 60 or summary["status"] in TERMINAL:
            run.spec = {**run.spec, "platform_run": {**info, "walltime_s": walltime}}
            store.update_run(run.id, spec=run.spec)
        return summary

    @staticmethod
    def _log(transport: Transport, info: Mapping[str, Any],
             records: Sequence[Mapping[str, str]]) -> str:
        paths = [r["StdOut"] for r in records if r.get("StdOut")] or [info.get("log") or ""]
        paths = [p for p in dict.fromkeys(paths) if p and "%" not in p]
        if not paths:
            return ""
        quoted = " ".join(shlex.quote(p) for p in paths[:16])
        out = transport.run(f"for f in {quoted}; do tail -n {LOG_TAIL_LINES} \"$f\" "
                            "2>/dev/null; done", check=False, timeout=30)
        return out.stdout

    def cancel(self, transport: Transport, box: Box, run: Run, grace_s: float
               ) -> dict[str, Any] | None:
        """Stop the job for good: its trainer checkpoints first, and nothing requeues it.

        1. ``scontrol update Requeue=0``: Slurm refuses ``scontrol requeue`` from now on, so the
           batch script's requeue-after-a-signal cannot bring the job back (the script reads
           Requeue=0 as "cancelled" and says so in the log).
        2. A running job: SIGTERM to its batch script (``scancel --batch --signal=TERM``), the
           walltime warning's path; the script forwards it to the step, the trainer
           checkpoints and exits, and the script ends the job as CANCELLED. Pending cells of
           an array are cancelled at once.
        3. Whatever is still queued or running after grace_s gets ``scancel``: SIGTERM to
           every process of the job, SIGKILL after the cluster's KillWait.

        A run rgt did not sbatch is the on-box runner's: None."""
        job_id = str((run.spec.get("platform_run") or {}).get("job_id") or "")
        if not job_id:
            return None
        job = shlex.quote(job_id)
        transport.run(f"scontrol update JobId={job} Requeue=0", check=False, timeout=30)
        sent: list[str] = []
        escalated = False
        states = live_states(transport, job_id)
        if "RUNNING" in states.values():
            transport.run(f"scancel --state=PENDING {job}", check=False, timeout=60)
            transport.run(f"scancel --batch --signal=TERM {job}", check=False, timeout=60)
            sent.append(f"scancel --batch --signal=TERM {job_id}: SIGTERM to the batch script, "
                        "which forwards it to the trainer")
            deadline = time.monotonic() + grace_s
            while "RUNNING" in (states := live_states(transport, job_id)).values():
                if time.monotonic() >= deadline:
                    escalated = True
                    break
                time.sleep(1)
        # what the script has not ended yet (COMPLETING: Slurm is already ending it), as
        # squeue last listed it
        if any(state != "COMPLETING" for state in states.values()):
            result = transport.run(f"scancel {job}", check=False, timeout=60)
            if not result.ok and any(state != "COMPLETING" for state in
                                     live_states(transport, job_id).values()):
                raise UserError(f"scancel {job_id} failed: "
                                f"{(result.stderr or result.stdout).strip()}")
            what = (f" after {grace_s:g} s: SIGTERM to every process, SIGKILL after KillWait"
                    if escalated else "")
            sent.append(f"scancel {job_id}{what}")
        return {"sent": sent, "escalated": escalated}

    def audit_extras(self, transport: Transport, box: Box) -> dict[str, Any]:
        return {"scheduler": scheduler_audit(transport, box)}

    def stops_meter(self, box: Box) -> bool:
        return True  # scancel: the allocation is the meter

    def release(self, store: Store, box: Box) -> Released:
        """scancel every live job of the box's runs; there is no box to destroy."""
        ids = [str((r.spec.get("platform_run") or {}).get("job_id") or "")
               for r in store.runs(box.name)]
        ids = [i for i in ids if i]
        transport = transport_for(box)
        try:
            live = []
            if ids:
                out = transport.run(f"squeue -h -o %F -j {','.join(ids)}", check=False,
                                    timeout=30)
                live = sorted(set(out.stdout.split()) & set(ids), key=int)
            if live:  # Requeue=0 first: the batch script must not requeue a released job
                transport.run(f"scontrol update JobId={','.join(live)} Requeue=0", check=False,
                              timeout=30)
                transport.run(f"scancel {' '.join(live)}", timeout=60)
        finally:
            transport.close()
        for run in store.runs(box.name):
            job = str((run.spec.get("platform_run") or {}).get("job_id") or "")
            if job in live and run.status in ("starting", "running"):
                store.update_run(run.id, status="cancelled")
        if live:
            return Released(f"scancel {' '.join(live)}: cancelled {len(live)} live job(s); "
                            "nothing to tear down (the nodes go back to the scheduler)")
        return Released("no live Slurm jobs to cancel; nothing to tear down")
