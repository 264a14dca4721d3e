#!/usr/bin/env python3
"""rgt on-box audit: what this box really gives a job, checked before the meter runs long.

Usage (standard library only, Python >= 3.8; ship it on stdin or as a file):

    python3 audit.py [--dirs D1 D2 ...] [--py PYTHON] [--hf-cache DIR] [--budget-s S]
    python3 - [ARGS] < audit.py

Prints one JSON document: bytes and inodes of each dir (``df -h`` and ``df -i`` from one statvfs;
U6/U7/AD4), the cgroup memory limit and CPU quota (what the job gets, not what ``free``/``nproc``
claim — U41/U40), nproc, total RAM, GPUs from ``nvidia-smi`` (name, memory, driver and the CUDA
version of its header), the given Python's version, ``torch.__version__`` and
``torch.cuda.is_available()`` (with a timeout; no torch ⇒ null), the 10 biggest entries of the
HF cache (du-style, time-bounded), the interpreter running this script (the one rgt's on-box
scripts get), the box's tools with their versions (python3, python, rsync, tmux, bash), and
``verdicts``: [{level: ok|note|warn|fail, id, message}]. Exit 0 whenever the report was printed;
the verdicts carry the judgement.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import stat
import sys
import time

from rgt.onbox._common import (
    cgroup_facts,
    disk_facts,
    int_or_none,
    python_facts,
    read_text,
    run_cmd,
)

AUDIT_VERSION = 2
GIB = 1 << 30
INODE_FAIL_PCT = 90.0
INODE_WARN_PCT = 80.0
BYTES_WARN_PCT = 90.0
BYTES_FAIL_PCT = 98.0
MIN_CGROUP_MEMORY = 8 * GIB


# ----------------------------------------------------------------------------- helpers


def human(n) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.1f} TiB"


# ----------------------------------------------------------------------------- facts


def ram_total() -> int | None:
    for line in (read_text("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) > 1 and parts[1].isdigit() else None
    return None


def gpu_facts() -> dict:
    out = {"present": False, "driver": None, "cuda": None, "devices": [], "error": None}
    rc, header, err = run_cmd(["nvidia-smi"], timeout=20)
    if rc is None or rc != 0:
        out["error"] = (err or header or "").strip()[:300] or f"nvidia-smi exit {rc}"
        return out
    m = re.search(r"Driver Version:\s*([\d.]+)", header)
    out["driver"] = m.group(1) if m else None
    m = re.search(r"CUDA Version:\s*([\d.]+)", header)
    out["cuda"] = m.group(1) if m else None
    rc, rows, err = run_cmd(
        [
            "nvidia-smi",
            "--query-gpu=index,name,memory.total,memory.used,driver_version",
            "--format=csv,noheader,nounits",
        ],
        timeout=20,
    )
    for line in (rows or "").strip().splitlines() if rc == 0 else []:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 4:
            out["devices"].append(
                {
                    "index": int_or_none(cells[0]),
                    "name": cells[1],
                    "memory_total_mib": int_or_none(cells[2]),
                    "memory_used_mib": int_or_none(cells[3]),
                }
            )
    out["present"] = bool(out["devices"]) or "MiB" in header
    return out


# name -> (argv after the tool, how its version shows in the output)
TOOLS = {
    "python3": (["--version"], r"Python (\d+\.\d+\.\d+)"),
    "python": (["--version"], r"Python (\d+\.\d+\.\d+)"),
    "rsync": (["--version"], r"version v?(\d+\.\d+\.\d+)"),
    "tmux": (["-V"], r"tmux (\S+)"),
    "bash": (["--version"], r"version (\d+\.\d+\.\d+)"),
}


def tool_facts(names=tuple(TOOLS)) -> dict:
    """Where each tool is on PATH and its version ({path: None} when missing)."""
    out = {}
    for name in names:
        path = shutil.which(name)
        facts = {"path": path, "version": None}
        if path:
            args, pattern = TOOLS[name]
            rc, stdout, stderr = run_cmd([path] + args, timeout=20)
            # Python 2 prints its version on stderr; a failing tool is listed, versionless.
            m = re.search(pattern, (stdout or "") + (stderr or ""))
            facts["version"] = m.group(1) if m else None
            facts["ran"] = rc == 0
        out[name] = facts
    return out


def _du(path: str, deadline: float, seen: set):
    """Allocated bytes under PATH (like ``du -s``; symlinks not followed, hard links once)."""
    total, complete = 0, True
    stack = [path]
    while stack:
        if time.monotonic() > deadline:
            return total, False
        current = stack.pop()
        try:
            st = os.lstat(current)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        total += getattr(st, "st_blocks", 0) * 512 or st.st_size
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(current) as it:
                    stack.extend(entry.path for entry in it)
            except OSError:
                complete = False
    return total, complete


def hf_cache_facts(directory: str, budget_s: float = 20.0, top: int = 10) -> dict:
    """The biggest entries of an HF cache (and of its hub/), du-style, within BUDGET_S (U7)."""
    out = {"dir": directory, "exists": os.path.isdir(directory), "top": [], "truncated": False}
    if not out["exists"]:
        return out
    started = time.monotonic()
    deadline = started + budget_s
    seen = set()
    sizes = []

    def children(d):
        try:
            with os.scandir(d) as it:
                return sorted(entry.path for entry in it)
        except OSError:
            return []

    hub = os.path.join(directory, "hub")
    for path in children(hub) + [p for p in children(directory) if p != hub]:
        size, complete = _du(path, deadline, seen)
        sizes.append({"path": path, "bytes": size, "human": human(size)})
        if not complete:
            out["truncated"] = True
        if time.monotonic() > deadline:
            out["truncated"] = True
            break
    sizes.sort(key=lambda e: e["bytes"], reverse=True)
    out["top"] = sizes[:top]
    out["total_bytes_seen"] = sum(e["bytes"] for e in sizes)
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


# ----------------------------------------------------------------------------- verdicts


def verdicts(report: dict) -> list:
    """Pure: the judgement over an audit REPORT, as [{level, id, message}]."""
    out = []

    def add(level, gid, message):
        out.append({"level": level, "id": gid, "message": message})

    for d in report.get("dirs") or []:
        path = d.get("path")
        if d.get("error") or not d.get("exists"):
            add("warn", "U6", f"{path}: cannot stat ({d.get('error') or 'does not exist'})")
            continue
        ipct, bpct = d.get("inodes_pct"), d.get("bytes_pct")
        if ipct is not None and ipct >= INODE_FAIL_PCT:
            add(
                "fail",
                "AD4/U7",
                f"{path}: inodes {ipct:.0f}% used ({d.get('inodes_free')} free of "
                f"{d.get('inodes_total')}) — writes fail with 'No space left on device' while "
                "df -h looks fine; delete small files by value or shard them (U25)",
            )
        elif ipct is not None and ipct >= INODE_WARN_PCT:
            add("warn", "AD4/U7", f"{path}: inodes {ipct:.0f}% used; cap per-sample outputs")
        else:
            add("ok", "AD4/U7", f"{path}: inodes {ipct}% used")
        if bpct is not None and bpct >= BYTES_FAIL_PCT:
            add(
                "fail",
                "U6",
                f"{path}: {bpct:.0f}% of bytes used, {human(d.get('bytes_free'))} "
                "free — the next checkpoint save will fail mid-write",
            )
        elif bpct is not None and bpct >= BYTES_WARN_PCT:
            add(
                "warn",
                "U6",
                f"{path}: {bpct:.0f}% of bytes used, {human(d.get('bytes_free'))} "
                "free; budget ckpt_size × keep + latest before launching",
            )
        else:
            add("ok", "U6", f"{path}: {bpct}% of bytes used, {human(d.get('bytes_free'))} free")

    cg = report.get("cgroup") or {}
    mem = cg.get("memory_max")
    if mem is not None and mem < MIN_CGROUP_MEMORY:
        add(
            "warn",
            "U9/U41",
            f"cgroup memory limit {human(mem)} < 8 GiB: size DataLoader "
            "num_workers by it and per-worker RSS, not by host RAM",
        )
    elif mem is not None:
        add("ok", "U9/U41", f"cgroup memory limit {human(mem)}")
    else:
        add("ok", "U9/U41", f"no cgroup memory limit; host RAM {human(report.get('ram_total'))}")
    cores, nproc = cg.get("cpu_quota_cores"), report.get("nproc")
    if cores is not None and nproc and cores < nproc:
        add(
            "warn",
            "U40",
            f"cgroup CPU quota {cores:g} cores < nproc {nproc}: set "
            f"OMP_NUM_THREADS/MKL_NUM_THREADS to {max(1, int(cores))}",
        )

    gpus = report.get("gpus") or {}
    if not gpus.get("present"):
        add(
            "warn",
            "U31",
            "no GPU visible (nvidia-smi missing or failing): " + str(gpus.get("error")),
        )
    else:
        names = ", ".join(sorted({g.get("name") or "?" for g in gpus.get("devices") or []}))
        add(
            "ok",
            "U31",
            f"{len(gpus.get('devices') or [])} GPU(s): {names}; driver "
            f"{gpus.get('driver')}, driver CUDA {gpus.get('cuda')}",
        )

    tools = report.get("tools")
    if tools is not None:
        if not (tools.get("bash") or {}).get("path"):
            add("fail", "tools", "no bash on the box, which rgt runs every command and the job "
                "under: install it (`apk add bash` on Alpine, `apt-get install bash` on "
                "Debian/Ubuntu) or use an image that has bash")
        if not (tools.get("rsync") or {}).get("path"):
            add("note", "tools", "no rsync on the box: files move over rgt's own engine, "
                "which needs only Python there")
        if not (tools.get("tmux") or {}).get("path"):
            add("note", "U18", "no tmux on the box: runs detach with setsid instead (they "
                "outlive the connection all the same)")

    py = report.get("python")
    if py is not None:
        if not py.get("ran"):
            here = (report.get("interpreter") or {}).get("executable")
            add("fail", "U28", f"the job's python {py.get('executable')} did not run "
                f"({py.get('error')})" + (f"; {here} does: start the job with it" if here else ""))
        elif py.get("torch") is None:
            add("warn", "U28", f"torch not importable in {py.get('executable')}: {py.get('error')}")
        elif gpus.get("present") and not py.get("cuda_available"):
            add(
                "fail",
                "U28/U31",
                f"torch {py.get('torch')} (CUDA {py.get('torch_cuda')}) sees "
                "no GPU though nvidia-smi does: driver/toolkit/torch-build mismatch",
            )
        elif py.get("kernel_ok") is False:
            add(*kernel_verdict(py))
        else:
            sees = "sees CUDA" if py.get("cuda_available") else "has no CUDA here"
            if py.get("kernel_ok"):
                sees += f", and a kernel ran on its {py.get('capability')}"
            add("ok", "U28", f"torch {py.get('torch')} {sees}")
    return out


def kernel_verdict(py: dict) -> tuple:
    """(level, id, message) when torch sees the GPU but could not run a kernel on it."""
    error = py.get("kernel_error") or "the kernel's result was wrong"
    cap, archs = py.get("capability") or "?", py.get("arch_list") or []
    lowered = error.lower()
    # CUDA's own words for code built for other architectures
    if "no kernel image" in lowered or "invalid device function" in lowered:
        return ("fail", "U28/U31", f"torch {py.get('torch')} (CUDA {py.get('torch_cuda')}) "
                f"has no kernels for this GPU's {cap} (it was built for "
                f"{' '.join(archs) or 'no GPU architecture'}): install a torch build whose "
                f"arch list has {cap} ({error})")
    if "busy or unavailable" in lowered or "out of memory" in lowered:
        return ("warn", "U11", f"torch sees the GPU but could not run a kernel on it now: "
                f"{error}. Another process may hold it (a running job, exclusive compute mode)")
    return ("fail", "U28/U31", f"torch {py.get('torch')} sees the GPU but a kernel failed "
            f"on its {cap}: {error}")


def audit(dirs=(), python=None, hf_cache=None, budget_s=20.0, py_timeout=90.0) -> dict:
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    report = {
        "audit_version": AUDIT_VERSION,
        "time": round(time.time(), 3),
        "host": socket.gethostname(),
        "dirs": [disk_facts(d) for d in dirs],
        "cgroup": cgroup_facts(),
        "nproc": affinity or os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "ram_total": ram_total(),
        "gpus": gpu_facts(),
        "python": python_facts(python, py_timeout) if python else None,
        "hf_cache": hf_cache_facts(hf_cache, budget_s) if hf_cache else None,
        # this very process is what rgt's on-box scripts run with
        "interpreter": {"executable": sys.executable, "version": platform.python_version()},
        "tools": tool_facts(),
    }
    report["verdicts"] = verdicts(report)
    levels = [v["level"] for v in report["verdicts"]]
    report["overall"] = "fail" if "fail" in levels else "warn" if "warn" in levels else "ok"
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="audit.py", description="rgt on-box audit")
    parser.add_argument("--dirs", nargs="*", default=[], help="dirs to check (df -h and df -i)")
    parser.add_argument("--py", default=None, help="the job's Python: torch/CUDA to report")
    parser.add_argument("--hf-cache", default=None, help="HF cache dir to size (du-style)")
    parser.add_argument("--budget-s", type=float, default=20.0, help="time for HF cache sizing")
    parser.add_argument("--py-timeout", type=float, default=90.0, help="timeout for --py")
    args = parser.parse_args(argv)
    report = audit(args.dirs, args.py, args.hf_cache, args.budget_s, args.py_timeout)
    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
