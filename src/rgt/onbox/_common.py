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


def write_json_atomic(path: str, obj, indent=1) -> None:
    """Write JSON so that readers see the old document or the new one, never a torn one.
    INDENT None: one line, by the C encoder (a manifest of 300,000 entries)."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}{TMP_SUFFIX}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(obj, indent=indent, sort_keys=True))
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


def _walk_files(directory: str, files: list) -> None:
    """Append the files under DIRECTORY to FILES in os.walk's top-down order (a directory's own
    files, sorted, then its subdirectories, sorted), as os.walk + isfile would list them, but
    from the directory entries' types: no stat per regular file. A symlink to a file counts, a
    symlink to a directory is not followed."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    subdirs = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.path)
            elif entry.is_file():
                files.append(entry.path)
        except OSError:
            continue
    for sub in subdirs:
        _walk_files(sub, files)


def match_outputs(root: str, patterns, exclude=()):
    """([(absolute path, manifest path)], [patterns that matched no file]).

    Relative patterns are globs under ROOT (``**`` recursive), absolute ones are taken as they
    are; a matched directory is recursed. The manifest path is relative to ROOT with POSIX
    separators, or the absolute path for a file outside ROOT. Our own temp files are skipped.
    """
    root = os.path.abspath(root)
    prefix = root.rstrip(os.sep) + os.sep
    exclude = {os.path.abspath(p) for p in exclude}
    found, missing, seen = [], [], set()
    for pattern in patterns or []:
        full = pattern if os.path.isabs(pattern) else os.path.join(root, pattern)
        files = []
        for match in sorted(glob.glob(full, recursive=True)):
            match = os.path.abspath(match)
            if os.path.isdir(match):
                _walk_files(match, files)
            elif os.path.isfile(match):
                files.append(match)
        files = [f for f in files if f not in exclude and not f.endswith(TMP_SUFFIX)]
        if not files:
            missing.append(pattern)
            continue
        for path in files:
            if path.startswith(prefix):  # the common case, without relpath's cost per file
                rel = path[len(prefix):]
            else:
                rel = os.path.relpath(path, root)
                if rel == ".." or rel.startswith(".." + os.sep):
                    rel = path
            rel = rel.replace(os.sep, "/")
            if rel not in seen:
                seen.add(rel)
                found.append((path, rel))
    return found, missing


def proc_read(pid, name: str):
    """The bytes of /proc/PID/NAME; None when the process is gone or the file unreadable."""
    try:
        with open(f"/proc/{int(pid)}/{name}", "rb") as f:
            return f.read()
    except (OSError, ValueError):
        return None


def proc_stat_fields(pid):
    """Fields of /proc/PID/stat from field 3 (state) on; None if the process is gone."""
    data = proc_read(pid, "stat")
    if data is None:
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
    if out["cuda_available"]:
        # is_available() only says a driver answered: a torch built without this GPU's
        # architecture still says True and fails at the first kernel ("no kernel image")
        out["capability"] = "sm_%d%d" % torch.cuda.get_device_capability(0)
        out["arch_list"] = list(torch.cuda.get_arch_list())
        try:
            out["kernel_ok"] = float((torch.ones(8, device="cuda") * 2).sum().item()) == 16.0
        except Exception as exc:
            out["kernel_ok"] = False
            out["kernel_error"] = ("%s: %s" % (type(exc).__name__, exc)).splitlines()[0][:300]
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


# ----------------------------------------------------------------------------- process census
# Every live process of rgt's runs on this box, recorded or not. A job process is known by the
# RGT_RUN_DIR the runner put in its environment (inherited by everything it starts, torchrun's
# workers in their own sessions included); a runner by the name it gives itself (RUNNER_COMM)
# or by runner.pid + state.json in its run dir. /proc/PID/environ is the environment a process
# was started with, readable for our own user's processes (and every process as root).

RUNNER_COMM = "rgt-runner"  # the runner's /proc/PID/comm (prctl PR_SET_NAME, 15 bytes max)
CENSUS_VERSION = 1
CENSUS_ENV = ("RGT_RUN_DIR", "RGT_CKPT_DIR", "RGT_RUN_ID")


def process_table() -> dict:
    """{pid: {ppid, pgid, sid, start, state, comm}} of every process in /proc except zombies."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        data = proc_read(name, "stat")
        if data is None:
            continue
        close = data.rindex(b")")
        fields = data[close + 2 :].split()
        if fields[0] in (b"Z", b"X"):
            continue
        table[int(name)] = {
            "ppid": int(fields[1]),
            "pgid": int(fields[2]),
            "sid": int(fields[3]),
            "start": int(fields[19]),
            "state": fields[0].decode("ascii", "replace"),
            "comm": data[data.index(b"(") + 1 : close].decode("utf-8", "replace"),
        }
    return table


def proc_environ(pid):
    """The environment PID was started with, as {name: value}; None when it cannot be read."""
    data = proc_read(pid, "environ")
    if data is None:
        return None
    env = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return env


def proc_cmdline(pid) -> list:
    data = proc_read(pid, "cmdline")
    if data is None:
        return []
    return [a.decode("utf-8", "surrogateescape") for a in data.split(b"\0") if a]


def descendants(pid, table=None) -> list:
    """Live pids below PID in the ppid tree (children, grandchildren, ...)."""
    table = process_table() if table is None else table
    children = {}
    for child, info in table.items():
        children.setdefault(info["ppid"], []).append(child)
    found, todo = [], list(children.get(int(pid), ()))
    while todo:
        child = todo.pop()
        if child not in found:
            found.append(child)
            todo.extend(children.get(child, ()))
    return sorted(found)


def rgt_processes(table=None):
    """(processes, unreadable): every live process whose environment carries RGT_RUN_DIR (an
    rgt job or a descendant of one) as [{pid, start, ppid, pgid, sid, comm, env: {RGT_RUN_DIR,
    RGT_CKPT_DIR, RGT_RUN_ID}}], and how many live processes' environments could not be read
    (another user's: rgt's jobs run as the user that started the runner)."""
    table = process_table() if table is None else table
    found = []
    unreadable = 0
    me = os.getpid()
    for pid, info in table.items():
        if pid == me:
            continue
        env = proc_environ(pid)
        if env is None:
            kernel_thread = pid == 2 or info["ppid"] == 2
            unreadable += 0 if kernel_thread or not os.path.exists(f"/proc/{pid}") else 1
            continue
        if env.get("RGT_RUN_DIR"):
            found.append(dict(info, pid=pid, env={k: env.get(k) for k in CENSUS_ENV}))
    return found, unreadable


def run_processes(run_dir: str, runner_pid: int | None = None) -> dict:
    """{pid: start time} of every live process of the run in RUN_DIR: whatever is below
    RUNNER_PID in the ppid tree, and every process whose environment has RGT_RUN_DIR=RUN_DIR
    (what left the tree before the subreaper took it, or a job whose runner is gone)."""
    table = process_table()
    run_dir = os.path.normpath(run_dir)
    pids = set(descendants(runner_pid, table)) if runner_pid else set()
    for proc in rgt_processes(table)[0]:
        if os.path.normpath(proc["env"]["RGT_RUN_DIR"]) == run_dir:
            pids.add(proc["pid"])
    pids.discard(os.getpid())
    return {pid: table[pid]["start"] for pid in pids if pid in table}


def _under(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def _runner_run_dir(pid) -> str | None:
    """The RUN_DIR argument of runner PID (``python3 runner.py RUN_DIR`` or ``python3 - RUN_DIR
    [--detach]``), absolute."""
    args = [a for a in proc_cmdline(pid)[1:] if a != "--detach"]
    if not args:
        return None
    run_dir = args[-1]
    if not os.path.isabs(run_dir):
        try:
            run_dir = os.path.join(os.readlink(f"/proc/{int(pid)}/cwd"), run_dir)
        except OSError:
            return None
    return os.path.normpath(run_dir)


def census(roots) -> dict:
    """Every live runner and job process of the rgt runs under ROOTS (``<DATA_DIR>/rgt``),
    grouped by run dir; see probe.py's docstring for the document's shape."""
    roots = [os.path.normpath(os.path.abspath(r)) for r in roots]
    real_roots = roots + [os.path.realpath(r) for r in roots]
    procfs = os.path.isdir("/proc/self")
    table = process_table() if procfs else {}
    runs = {}

    def entry(run_dir):
        if run_dir not in runs:
            runs[run_dir] = {"run_id": os.path.basename(run_dir), "runner_pid": None,
                             "runner_pid_start": None, "runner_alive": False, "job_pids": [],
                             "job_processes": [], "ckpt_dirs": [], "status": None}
        return runs[run_dir]

    def mine(path):
        return any(_under(path, r) or _under(os.path.realpath(path), r) for r in real_roots)

    runner_pids = set()
    for pid, info in table.items():  # runners that named themselves
        if info["comm"] == RUNNER_COMM and pid != os.getpid():
            run_dir = _runner_run_dir(pid)
            if run_dir and mine(run_dir):
                e = entry(run_dir)
                e.update(runner_pid=pid, runner_pid_start=info["start"], runner_alive=True)
                runner_pids.add(pid)
    for root in roots:  # runners recorded in runner.pid / state.json (any runner version)
        try:
            names = sorted(os.listdir(root))
        except OSError:
            continue
        for name in names:
            run_dir = os.path.join(root, name)
            pid = int_or_none(read_text(os.path.join(run_dir, "runner.pid")))
            state = read_json(os.path.join(run_dir, "state.json"))
            state = state if isinstance(state, dict) else {}
            start = state.get("runner_pid_start") if state.get("runner_pid") == pid else None
            if not pid or pid in runner_pids or not pid_alive(pid, start):
                continue
            if procfs and run_dir not in proc_cmdline(pid) and \
                    table.get(pid, {}).get("comm") != RUNNER_COMM:
                continue  # a reused pid: some other program now
            e = entry(run_dir)
            e.update(runner_pid=pid, runner_pid_start=(table.get(pid) or {}).get("start"),
                     runner_alive=True)
            runner_pids.add(pid)
    found, unreadable = rgt_processes(table) if procfs else ([], 0)
    for proc in found:
        run_dir = os.path.normpath(proc["env"]["RGT_RUN_DIR"])
        if proc["pid"] in runner_pids or not mine(run_dir):
            continue
        e = entry(run_dir)
        e["job_pids"].append(proc["pid"])
        e["job_processes"].append({k: proc[k] for k in ("pid", "start", "ppid", "pgid", "comm")})
        ckpt = proc["env"].get("RGT_CKPT_DIR")
        if ckpt and ckpt not in e["ckpt_dirs"]:
            e["ckpt_dirs"].append(ckpt)
    for run_dir, e in runs.items():
        e["job_pids"].sort()
        e["job_processes"].sort(key=lambda p: p["pid"])
        state = read_json(os.path.join(run_dir, "state.json"))
        if isinstance(state, dict):
            e["status"] = state.get("status")
        spec = read_json(os.path.join(run_dir, "run.json"))  # a runner whose job has not begun
        home = (spec.get("env") or {}).get("RGT_CKPT_DIR") if isinstance(spec, dict) and \
            isinstance(spec.get("env"), dict) else None
        if isinstance(home, str) and home and home not in e["ckpt_dirs"]:
            e["ckpt_dirs"].append(home)
    return {
        "census_version": CENSUS_VERSION,
        "roots": roots,
        "boot_id": boot_id(),
        "procfs": procfs,
        "complete": procfs,
        "unreadable_environ": unreadable,
        "runs": runs,
    }
