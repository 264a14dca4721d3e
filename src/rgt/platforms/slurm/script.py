"""The batch script: `sbatch` replaces the detached runner; squeue/scontrol/sacct replace the probe.

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

This module renders the whole script: the step (`srun`, torchrun across nodes), the preamble
and epilogue above, a sweep's job array. The `#SBATCH` words come from `options`; nothing
here runs anything (`SlurmPlatform.launch` writes and submits what it returns).
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rgt.errors import UserError
from rgt.platforms.slurm.options import BatchOptions, array_range, environment_hook, grid_cells
from rgt.remote import node_env
from rgt.remote.launchers import (
    DEFAULT_RDZV_PORT,
    refuse_lone_launchers,
    torchrun_command,
)
from rgt.remote.layout import Layout
from rgt.spec import JobSpec

EXIT_PREEMPTED = 85          # rgt.ckpt.EXIT_PREEMPTED: "checkpointed on a signal, requeue me"

ENV_NPROC_PER_NODE = "RGT_NPROC_PER_NODE"        # torchrun workers per node
ENV_RDZV_PORT = "RGT_RDZV_PORT"                  # torchrun c10d rendezvous port


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
rgt_requeued() {  # has Slurm requeued this job itself (a node of it failed, a preemption)?
  local rec
  rec=" $(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | head -n 1) "
  case $rec in *" Restarts=$rgt_attempt "*) return 1 ;; *" Restarts="*) return 0 ;; esac
  return 1
}
"""

_EPILOGUE = r"""rgt_rc=$?
# Another node of the job died: Slurm requeues the job itself (NODE_FAIL) and signals this
# shell, sometimes just after the step has ended. Give it a moment to say so before taking
# the failure for the run's end (which removes the secrets the next attempt needs).
if [ "$rgt_rc" -ne 0 ] && [ -z "$rgt_signal" ] && [ "${{SLURM_NNODES:-1}}" -gt 1 ]; then
  for rgt_i in 1 2 3 4 5 6; do
    rgt_requeued && break
    sleep 0.5
    [ -n "$rgt_signal" ] && break
  done
fi
if [ "$rgt_rc" -eq {preempted} ] || {{ [ -n "$rgt_signal" ] && [ "$rgt_rc" -ne 0 ]; }} ||
    {{ [ "$rgt_rc" -ne 0 ] && rgt_requeued; }}; then
  if rgt_cancelled; then
    echo "[rgt] step exited $rgt_rc after SIG${{rgt_signal:-?}}: job $SLURM_JOB_ID was" \
      "cancelled, so it is not requeued; its checkpoints stay in $RGT_CKPT_DIR"
{forget}    trap '' TERM USR1
    scancel "$rgt_self" 2>/dev/null  # Slurm records CANCELLED, not a failed exit {preempted}
    exit "$rgt_rc"
  fi
  if rgt_requeued; then  # its next attempt still needs secrets.env: not removed
    echo "[rgt] step exited $rgt_rc: Slurm requeued job $SLURM_JOB_ID itself (a failed node," \
      "a preemption); the next attempt resumes from the latest checkpoint"
    exit {preempted}
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
