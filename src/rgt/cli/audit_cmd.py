"""`rgt audit`: what the box measured, in words and one unit family (GiB, as the verdicts).

Every field of the report came from the box: it is shown as text (escaped), never as a Python
repr, and only the parts a user acts on (the cgroup's own file list is in --json).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from rgt import skycloud
from rgt.cli import app
from rgt.cli.args import BoxArg, InfraOpt, InstanceTypeOpt
from rgt.cli.console import console, duration, escape, print_json
from rgt.errors import UserError
from rgt.lifecycle import audit as audit_mod
from rgt.spec import load_spec
from rgt.store import Store


@app.command()
def audit(name: BoxArg,
          job: Annotated[Path | None, typer.Option(
              "--job", help="The job spec: check the python its `run` starts with (torch, "
                            "CUDA) instead of the box's own.")] = None,
          as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout "
                                                              "(README: JSON output).")] = False,
          infra: InfraOpt = None, instance_type: InstanceTypeOpt = None,
          ) -> None:
    """Measure the box (disks, inodes, memory, GPUs, Python/torch, tools) and judge it."""
    store = Store()
    box = store.box(name)
    if box.state == "down":  # its meter is stopped: nothing there to measure, nothing to reach
        ago = f" {duration(time.time() - box.down_at)} ago" if box.down_at else ""
        raise UserError(f"box {name!r} is down (torn down{ago}): there is nothing to audit; "
                        f"`rgt up {name} ...` registers a box under that name again")
    overrides = skycloud.overrides(infra, instance_type, f"box {name}", box.profile)
    if overrides is not None and job is None:
        raise UserError("--infra and --instance-type go with --job (they override the "
                        "SkyPilot task's placement)")
    report = audit_mod.audit(store, name, load_spec(job, overrides=overrides) if job else None)
    if as_json:
        print_json("audit", box=name, audit=report)
        if any(v.get("level") == "fail" for v in report.get("verdicts") or []):
            raise typer.Exit(1)
        return
    _render(name, report)
    if any(v.get("level") == "fail" for v in report.get("verdicts") or []):
        raise typer.Exit(1)


def _render(name: str, report: dict) -> None:
    if report.get("measured") is False:  # a notebook platform: nothing on it was measured
        _render_from_outside(name, report)
        return
    table = Table(title=f"{escape(name)}: disks", title_justify="left")
    table.add_column("path", overflow="fold")
    for column in ("size", "free", "used", "inodes used"):
        table.add_column(column, justify="right", no_wrap=True)
    for disk in report.get("dirs") or []:
        if "error" not in disk:
            table.add_row(escape(str(disk.get("path"))), size(disk.get("bytes_total")),
                          size(disk.get("bytes_free")), _pct(disk.get("bytes_pct")),
                          _pct(disk.get("inodes_pct")))
    console.print(table)
    console.print(f"cpus {escape(str(report.get('nproc') or '?'))}  ram "
                  f"{size(report.get('ram_total'))}  {escape(_cgroup(report.get('cgroup')))}")
    console.print(f"gpus {escape(_gpus(report.get('gpus')))}")
    python = report.get("python") or {}
    job_python = (report.get("job_python") or {}).get("command") or python.get("executable")
    cuda = {True: "CUDA available", False: "no CUDA"}.get(python.get("cuda_available"), "")
    torch = f"torch {python['torch']}" if python.get("torch") else "no torch"
    console.print(f"job python: {escape(_words(job_python, python.get('python')))} "
                  f"({escape(str(python.get('executable') or '?'))})  "
                  f"{escape(', '.join(x for x in (torch, cuda) if x))}")
    if interpreter := report.get("interpreter"):
        console.print(f"rgt's scripts: "
                      f"{escape(_words(interpreter.get('command'), interpreter.get('version')))} "
                      f"({escape(str(interpreter.get('executable') or '?'))})")
    if tools := report.get("tools"):
        order = ["python3", "python", "rsync", "tmux", "bash"]  # the JSON comes back sorted
        names = [t for t in order if t in tools] + sorted(set(tools) - set(order))
        console.print("tools: " + ", ".join(
            escape(f"{t} {tools[t].get('version') or '?'}" if tools[t].get("path")
                   else f"{t} missing") for t in names))
    if report.get("scheduler"):
        _render_scheduler(name, report["scheduler"])
    _render_verdicts(report)


def _render_from_outside(name: str, report: dict) -> None:
    """A notebook platform (Colab, Kaggle): what it shows from outside (the Drive folder, the
    account), as the lines its audit section lists under "shown": [[label, value], ...]."""
    console.print(f"[bold]{escape(name)}[/]: no disks, GPUs or Python measured (rgt runs no "
                  "command on a notebook runtime)")
    for section in report.values():
        shown = section.get("shown") if isinstance(section, dict) else None
        for line in shown if isinstance(shown, list) else []:
            if isinstance(line, list) and len(line) == 2 and line[1]:
                console.print(f"{escape(str(line[0]))}: {escape(str(line[1]))}")
    _render_verdicts(report)


def _render_verdicts(report: dict) -> None:
    for verdict in report.get("verdicts") or []:
        level = str(verdict.get("level") or "ok")
        color = {"fail": "red", "warn": "yellow", "note": "cyan"}.get(level, "green")
        console.print(f"[{color}]{escape(f'{level:4}')}[/] {escape(str(verdict.get('id') or ''))} "
                      f"{escape(str(verdict.get('message') or ''))}")


def size(value) -> str:
    """Bytes in binary units, the family the verdicts use (df -h's, too)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "?"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(amount) < 1024:
            return f"{int(amount)} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} TiB"


def _cgroup(cg) -> str:
    if not isinstance(cg, dict) or not cg.get("version"):
        return "cgroup: none found"
    memory = f"memory limit {size(cg['memory_max'])}" if cg.get("memory_max") is not None \
        else "no memory limit"
    cores = cg.get("cpu_quota_cores")
    cpu = f"CPU quota {cores:g} cores" if isinstance(cores, int | float) else "no CPU quota"
    parts = [memory, cpu]
    if cg.get("memory_current") is not None:
        parts.insert(1, f"{size(cg['memory_current'])} in use")
    if cg.get("oom_kill"):
        parts.append(f"{cg['oom_kill']} OOM kills so far")
    return f"cgroup v{cg['version']}: " + ", ".join(parts)


def _gpus(gpus) -> str:
    if not isinstance(gpus, dict):
        return "?"
    devices = [d for d in gpus.get("devices") or [] if isinstance(d, dict)]
    if not devices:
        return "none visible" + (f" ({gpus['error']})" if gpus.get("error") else "")
    kinds: dict[str, int] = {}
    for d in devices:
        memory = d.get("memory_total_mib")
        label = str(d.get("name") or "?") + (f" {size(memory * 1024 * 1024)}"
                                             if isinstance(memory, int) else "")
        kinds[label] = kinds.get(label, 0) + 1
    listed = ", ".join(f"{n} × {label}" for label, n in kinds.items())
    extra = [f"driver {gpus['driver']}" if gpus.get("driver") else "",
             f"CUDA {gpus['cuda']}" if gpus.get("cuda") else ""]
    return ", ".join([listed] + [x for x in extra if x])


def _words(*values) -> str:
    return " ".join(str(v) for v in values if v not in (None, "")) or "?"


def _render_scheduler(name: str, sched: dict) -> None:
    table = Table(title=f"{escape(name)}: partitions", title_justify="left")
    for column in ("partition", "state", "time limit", "nodes", "cpus/node", "mem/node",
                   "gpus/node", "limits"):
        table.add_column(column, overflow="fold")
    for p in sched.get("partitions") or []:
        table.add_row(escape(str(p["name"]) + (" (default)" if p.get("default") else "")),
                      escape(str(p.get("avail"))), escape(str(p.get("time_limit"))),
                      str(p.get("nodes") or "?"), escape(str(p.get("cpus_per_node"))),
                      _mib(p.get("mem_mb_per_node")), escape(str(p.get("gres") or "0")),
                      escape(_compact(p.get("limits"))))
    console.print(table)
    for assoc in sched.get("associations") or []:
        console.print(f"limits for you: {escape(_compact(assoc))}")
    for fs in sched.get("filesystems") or []:
        where = "[green]shared[/]" if fs.get("shared") else "[yellow]node-local[/]"
        console.print(f"{escape(str(fs.get('path')))}: {escape(str(fs.get('fstype')))} {where}")


def _mib(value) -> str:
    """A scheduler's "MB" (Slurm's RealMemory) are MiB: shown in GiB like everything else."""
    try:
        return size(float(str(value).rstrip("+")) * 1024 * 1024)
    except ValueError:
        return escape(str(value))


def _compact(value) -> str:
    """A flat key=value line for Slurm's limits; a list as its items, never a repr."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={_compact(v)}" for k, v in value.items()
                         if v not in (None, [], {}, "")) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(_compact(v) for v in value) or "none"
    return "none" if value is None else str(value)


def _pct(value) -> str:
    return f"{value:.0f}%" if isinstance(value, int | float) else "?"
