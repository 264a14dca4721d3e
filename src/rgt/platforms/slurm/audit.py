"""`rgt audit` on a Slurm login node: partitions, GPUs per node, limits, and whether the
durable tier is a filesystem every node sees (SLURM5), asked in one round trip."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from rgt.platforms.slurm.accounting import parse_records
from rgt.store import Box
from rgt.transport import Transport

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
