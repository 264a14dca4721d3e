"""Helpers shared by the on-box scripts; ``script_source()`` inlines this file into each of them.

Standard library only, Python >= 3.8. A script imports what it uses with one block,
``from rgt.onbox._common import (...)``, which works where ``rgt`` is installed (tests, local
imports); the text shipped to a box has that block replaced by everything below the
``from __future__`` line, so it stays one self-contained file. A script must not define a
top-level name that this module defines (the inlined copy would be shadowed).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import subprocess

HASH_BUF_SIZE = 1 << 20
TMP_SUFFIX = ".rgt.tmp"


def read_json(path: str):
    """The JSON document at PATH, or None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_text(path: str):
    """The stripped text of PATH, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: str, obj) -> None:
    """Write JSON so that readers see the old document or the new one, never a torn one."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}{TMP_SUFFIX}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def sha256_file(path: str):
    """(bytes, hex sha256) of PATH, read with one reused 1 MiB buffer."""
    h = hashlib.sha256()
    buf = bytearray(HASH_BUF_SIZE)
    view = memoryview(buf)
    size = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
            size += n
    return size, h.hexdigest()


def match_outputs(root: str, patterns, exclude=()):
    """([(absolute path, manifest path)], [patterns that matched no file]).

    Relative patterns are globs under ROOT (``**`` recursive), absolute ones are taken as they
    are; a matched directory is recursed. The manifest path is relative to ROOT with POSIX
    separators, or the absolute path for a file outside ROOT. Our own temp files are skipped.
    """
    root = os.path.abspath(root)
    exclude = {os.path.abspath(p) for p in exclude}
    found, missing, seen = [], [], set()
    for pattern in patterns or []:
        full = pattern if os.path.isabs(pattern) else os.path.join(root, pattern)
        files = []
        for match in sorted(glob.glob(full, recursive=True)):
            if os.path.isdir(match):
                for base, dirs, names in os.walk(match):
                    dirs.sort()
                    files.extend(os.path.join(base, n) for n in sorted(names))
            else:
                files.append(match)
        files = [os.path.abspath(f) for f in files if os.path.isfile(f)]
        files = [f for f in files if f not in exclude and not f.endswith(TMP_SUFFIX)]
        if not files:
            missing.append(pattern)
            continue
        for path in files:
            rel = os.path.relpath(path, root)
            if rel == ".." or rel.startswith(".." + os.sep):
                rel = path
            rel = rel.replace(os.sep, "/")
            if rel not in seen:
                seen.add(rel)
                found.append((path, rel))
    return found, missing


def proc_stat_fields(pid):
    """Fields of /proc/PID/stat from field 3 (state) on; None if the process is gone."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    return data[data.rindex(b")") + 2 :].split()


def pid_alive(pid, start=None) -> bool:
    """True if PID exists, is not a zombie, and (when given) started at START."""
    if not pid:
        return False
    fields = proc_stat_fields(pid)
    if fields is None:
        if os.path.isdir("/proc/self"):
            return False
        try:  # no procfs: best effort
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if fields[0] in (b"Z", b"X"):
        return False
    return start is None or int(fields[19]) == int(start)


def boot_id():
    return read_text("/proc/sys/kernel/random/boot_id") or None


def run_cmd(argv, timeout=10.0):
    """(returncode, stdout, stderr) or (None, '', reason) when the tool is absent or hangs."""
    if shutil.which(argv[0]) is None and not os.path.isabs(argv[0]):
        return None, "", f"{argv[0]} not found"
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            text=True,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        return None, "", f"{argv[0]} timed out after {timeout:g}s"
    except OSError as exc:
        return None, "", str(exc)
    return proc.returncode, proc.stdout, proc.stderr


def disk_facts(path: str) -> dict:
    """``df -h`` and ``df -i`` for PATH in one statvfs call (U6/U7: check both, always)."""
    out = {"path": path, "exists": os.path.exists(path)}
    try:
        st = os.statvfs(path)
    except OSError as exc:
        out["error"] = exc.strerror or str(exc)
        return out
    total = st.f_blocks * st.f_frsize
    free = st.f_bavail * st.f_frsize
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    inodes_used = st.f_files - st.f_ffree
    out.update(
        bytes_total=total,
        bytes_used=used,
        bytes_free=free,
        bytes_pct=round(100.0 * used / (used + free), 1) if used + free else None,
        inodes_total=st.f_files,
        inodes_used=inodes_used,
        inodes_free=st.f_favail,
        inodes_pct=round(100.0 * inodes_used / st.f_files, 1) if st.f_files else None,
    )
    return out


def cgroup_facts() -> dict:
    """This process's cgroup limits: v2 files, else v1 (memory + cpu controllers). U41."""
    paths = {}
    for line in (read_text("/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for ctrl in parts[1].split(",") if parts[1] else ["<v2>"]:
                paths[ctrl] = parts[2]
    facts = {
        "version": None,
        "memory_max": None,
        "memory_current": None,
        "oom_kill": None,
        "cpu_max": None,
        "cpu_quota_cores": None,
        "files": [],
    }

    def first(dirs, name):
        for d in dirs:
            path = os.path.join(d, name)
            value = read_text(path)
            if value is not None:
                facts["files"].append(path)
                return value
        return None

    events = ""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        facts["version"] = 2
        rel = paths.get("<v2>", "/").lstrip("/")
        dirs = [os.path.join("/sys/fs/cgroup", rel), "/sys/fs/cgroup"]
        mem_max = first(dirs, "memory.max")
        facts["memory_max"] = None if mem_max in (None, "max") else int_or_none(mem_max)
        facts["memory_current"] = int_or_none(first(dirs, "memory.current"))
        events = first(dirs, "memory.events") or ""
        cpu_max = first(dirs, "cpu.max")
        facts["cpu_max"] = cpu_max
        if cpu_max:
            quota, _, period = cpu_max.partition(" ")
            if quota != "max" and int_or_none(period):
                facts["cpu_quota_cores"] = round(int(quota) / int(period), 3)
    elif os.path.isdir("/sys/fs/cgroup/memory") or os.path.isdir("/sys/fs/cgroup/cpu"):
        facts["version"] = 1
        mem_rel = paths.get("memory", "/").lstrip("/")
        mem_dirs = [os.path.join("/sys/fs/cgroup/memory", mem_rel), "/sys/fs/cgroup/memory"]
        limit = int_or_none(first(mem_dirs, "memory.limit_in_bytes"))
        facts["memory_max"] = limit if limit is not None and limit < (1 << 60) else None
        facts["memory_current"] = int_or_none(first(mem_dirs, "memory.usage_in_bytes"))
        events = first(mem_dirs, "memory.oom_control") or ""
        cpu_rel = paths.get("cpu", "/").lstrip("/")
        bases = ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct")
        cpu_dirs = [os.path.join(b, cpu_rel) for b in bases] + list(bases)
        quota = int_or_none(first(cpu_dirs, "cpu.cfs_quota_us"))
        period = int_or_none(first(cpu_dirs, "cpu.cfs_period_us"))
        if quota is not None and period:
            facts["cpu_max"] = f"{'max' if quota < 0 else quota} {period}"
            if quota > 0:
                facts["cpu_quota_cores"] = round(quota / period, 3)
    for line in events.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            facts["oom_kill"] = int_or_none(value)
    return facts


PY_SNIPPET = r"""
import json, sys
out = {"python": sys.version.split()[0], "executable": sys.executable, "torch": None,
       "cuda_available": None, "torch_cuda": None, "device_count": None, "error": None}
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
except ImportError as exc:
    out["error"] = "torch not importable: %s" % exc
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


def python_facts(python: str, timeout: float = 90.0) -> dict:
    """PYTHON's version and its torch/CUDA view, asked in a child process with a timeout."""
    rc, out, err = run_cmd([python, "-c", PY_SNIPPET], timeout=timeout)
    if rc == 0:
        try:
            facts = json.loads(out.strip().splitlines()[-1])
            facts["ran"] = True
            return facts
        except (ValueError, IndexError):
            pass
    return {
        "ran": False,
        "python": None,
        "executable": python,
        "torch": None,
        "cuda_available": None,
        "error": (err or out or "").strip()[-300:] or f"exit {rc}",
    }
