"""Slurm: the login node is an SSH box (or this machine); a run is a batch job.

`launch` writes the batch script (`script`, with its `#SBATCH` words from `options`) beside
the pushed code and submits it; `state` reads the job's records (`accounting`); `cancel` and
`release` scancel, turning requeueing off first so the script cannot bring a job back;
`audit_extras` asks the scheduler (`audit`). The preemption path end to end is told in
`rgt.platforms.slurm.script`.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import Launched, Released, Request, asked_for
from rgt.platforms.slurm.accounting import (
    LOG_TAIL_LINES,
    job_records,
    sacct_max_rss_kb,
    state_summary,
    summarize_jobs,
)
from rgt.platforms.slurm.audit import scheduler_audit
from rgt.platforms.slurm.options import SUPPORTS, dependency_option, deprecations
from rgt.platforms.slurm.script import ScriptPaths, render_array_script, render_batch_script
from rgt.platforms.ssh import SshPlatform
from rgt.profiles import load_profile
from rgt.remote.calls import write_file
from rgt.remote.layout import Layout, job_environment
from rgt.remote.reach import transport_for
from rgt.spec import JobSpec
from rgt.store import TERMINAL, Box, Run, Store
from rgt.transport import Transport


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


class SlurmPlatform(SshPlatform):
    """The login node is an SSH box (or this machine); `launch` = sbatch, `state` =
    scontrol/sacct/jobcomp, `release` = scancel, `audit_extras` = partitions and filesystems."""

    name = "slurm"
    supports = SUPPORTS
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
            return state_summary(run.status, exit_code=run.exit_code, log=log,
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
