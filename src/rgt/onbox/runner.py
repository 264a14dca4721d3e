#!/usr/bin/env python3
"""rgt on-box job runner: run one job detached, record the truth about it in state.json.

Usage (standard library only, Python >= 3.8; ship it on stdin or as a file):

    python3 runner.py RUN_DIR [--detach]
    python3 - RUN_DIR [--detach] < runner.py

RUN_DIR (``<DATA_DIR>/rgt/<run-id>/``) holds ``run.json`` written by the launcher:
``run_id``, ``command`` (shell), optional ``setup`` (shell, run first), ``workdir``
(default RUN_DIR/code), ``env`` {…}, optional ``proxy_hook`` (e.g. ``source
/etc/network_turbo``), ``outputs`` [globs relative to workdir, or absolute], optional
``durable_dir``, ``heartbeat_s`` (default 10), ``kill_grace_s`` (default 10), ``pythonpath``
[directories put before the box's PYTHONPATH: the ``rgt.ckpt`` shipped with the code].
Optional ``secrets.env`` (NAME=VALUE lines, VALUE taken byte for byte, mode 0600): exported
into the job's environment only — never into argv, the log or state.json — and deleted when
the run ends (a relaunch mid-run still finds it).

What the runner does, and why:
- ``state.json`` is rewritten atomically (tmp + fsync + rename) at every transition and on every
  heartbeat, so a reader never sees half a document; ``pid_start`` (/proc start time) and
  ``boot_id`` let ``probe.py`` tell a live job from a reused pid or a rebooted box (U3).
- the job runs as ``bash -c`` in its own session/process group, cwd=workdir, stdout+stderr
  appended unbuffered to RUN_DIR/log, with PYTHONUNBUFFERED=1 (U43).
- the job's ``python`` and ``python3`` (and ``pip``/``pip3``, when it has pip) are the
  interpreter running the runner — the one `rgt up` found and `rgt audit` measured — through
  small ``/bin/sh`` scripts in RUN_DIR/bin put first on PATH: a stock box has no ``python``,
  and a ``python`` earlier on the box's PATH may be another Python without torch. A command
  that activates its own venv or conda env puts that env first again.
- SIGTERM/SIGINT/SIGUSR1 sent to the runner are forwarded to the job's process group, so a
  preemption notice reaches the trainer; the job shell traps them and waits, so the trainer's own
  exit code (85 = checkpointed and preempted) is what gets recorded.
- the runner owns the job's whole process tree: it names itself ``rgt-runner`` and is a child
  subreaper (prctl, Linux >= 3.4; said in the log where unavailable), so a descendant orphaned
  by its parent's death (torchrun's workers, which live in sessions of their own, when the agent
  dies) stays below it. Once the job's leader exits (or a stop was forwarded and its grace is
  over) every process below the runner or with this RGT_RUN_DIR in its environment gets
  SIGTERM, then SIGKILL; adopted zombies are reaped. ``leftovers`` in state.json is how many had
  to be ended (orphans that hold a CUDA context are U11), ``survivors`` those that outlived
  SIGKILL; ``recover:`` never restarts while one lives.
- one live run per RUN_DIR and per job: a launch is refused while any process with this
  RGT_RUN_DIR lives (an earlier launch whose runner died), while another runner holds the job
  lock ``.<home>.rgt-job.lock`` beside the job's checkpoint home (``env.RGT_CKPT_DIR``), or
  while a job process of another run dir with the same RGT_CKPT_DIR lives.
- on exit 0 the declared outputs are copied to ``durable_dir`` and every copy is re-read and
  sha256-compared; success is claimed only when that verification passes (U33). Copies are
  written under short temp names (any legal output name works) and flushed in batches (one
  syncfs per batch where the libc has it), verified, then renamed: a final name never holds a
  partial copy, and many small outputs copy at thousands of files/s, not one fsync each. A
  full disk or inode cap (ENOSPC/EDQUOT) yields status ``sync-failed`` with the errno, the path
  and the AD4/U7 hint.
- the log ends with ``[rgt] exit=N status=...``.
- running it again in the same RUN_DIR (vast.ai's onstart after a container restart or a
  preemption) is a relaunch: refused while a recorded pid lives, else ``launch`` counts up,
  state.json is rewritten, the log is appended to (never truncated) and setup runs again, so
  keep setup idempotent (it may export what the command needs); the job resumes from its
  checkpoint.

Runner exit code: 0 succeeded; the job's exit code when it failed (128+N when killed by signal
N); 75 sync-failed; 3 launch refused (this run or another run of its job is live: JSON
``{"refused": true, "run_dir": ..., "reason": ...}`` on stderr); 70 runner error.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

from rgt.onbox._common import (
    HASH_BUF_SIZE,
    RUNNER_COMM,
    TMP_SUFFIX,
    boot_id,
    cgroup_facts,
    disk_facts,
    fsync_dir,
    match_outputs,
    pid_alive,
    proc_stat_fields,
    read_json,
    read_text,
    rgt_processes,
    run_processes,
    sha256_file,
    write_json_atomic,
)

RUNNER_VERSION = 1
DISK_HINT = "disk or inode cap full on the durable tier — see AD4/U7 (df -h and df -i)"
OTHER_SYNC_HINT = (
    "the durable copy failed; the data-disk copy stays authoritative until a pull is verified (U33)"
)
DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
LIVE_STATUSES = ("starting", "running")
EXIT_REFUSED = 3
PREEMPTED_EXIT = 85  # rgt.ckpt.EXIT_PREEMPTED
EXIT_SYNC_FAILED = 75
EXIT_RUNNER_ERROR = 70
SYNC_MANIFEST = "SYNC_MANIFEST.json"


# ----------------------------------------------------------------------------- small helpers


def now() -> float:
    return round(time.time(), 3)


def proc_start_time(pid) -> int | None:
    """Field 22 of /proc/PID/stat: start time in clock ticks since boot (defeats pid reuse)."""
    if not pid:
        return None
    fields = proc_stat_fields(pid)
    return int(fields[19]) if fields else None


def still_live(state: dict):
    """Why a run whose state.json is STATE must not be launched again (None when it may be)."""
    if state.get("status") not in LIVE_STATUSES:
        return None
    if pid_alive(state.get("runner_pid"), state.get("runner_pid_start")):
        return f"runner pid {state.get('runner_pid')} of this run is alive"
    if pid_alive(state.get("pid"), state.get("pid_start")):
        return (
            f"job pid {state.get('pid')} of this run is still alive (its runner is gone); "
            "stop it first"
        )
    return None


PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> str | None:
    """Name this process RUNNER_COMM (the census finds runners by it) and make it the child
    subreaper of its descendants: a process of the job orphaned by its parent's death (torchrun's
    workers when the agent dies) is re-parented to the runner, not to init, so it stays in the
    runner's ppid tree. Returns why not, or None when both took effect (Linux >= 3.4)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError) as exc:
        return f"no prctl on this system ({exc})"
    prctl(PR_SET_NAME, RUNNER_COMM.encode(), 0, 0, 0)
    if prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}"
    return None


def job_home_processes(ckpt_dir: str, run_dir: str) -> dict:
    """{run dir: [pids]} of live job processes of OTHER run dirs that share the checkpoint home
    CKPT_DIR (RGT_CKPT_DIR in their environment): another run of the same job."""
    found = {}
    home = os.path.normpath(ckpt_dir)
    for proc in rgt_processes()[0]:
        other = os.path.normpath(proc["env"]["RGT_RUN_DIR"])
        ckpt = proc["env"].get("RGT_CKPT_DIR")
        if other != run_dir and ckpt and os.path.normpath(ckpt) == home:
            found.setdefault(other, []).append(proc["pid"])
    return found


def reap_adopted(skip=()) -> None:
    """Collect the exit status of orphans the subreaper adopted (zombies whose parent is now this
    runner), never the job leader's: Popen.wait must get that one."""
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit() or int(name) in skip:
            continue
        fields = proc_stat_fields(name)
        if fields and fields[0] == b"Z" and int(fields[1]) == me:
            with contextlib.suppress(OSError):
                os.waitpid(int(name), os.WNOHANG)


def group_members(pgid: int) -> list:
    """Live (non-zombie) pids whose process group is PGID."""
    members = []
    try:
        names = os.listdir("/proc")
    except OSError:
        names = []
    for name in names:
        if not name.isdigit():
            continue
        fields = proc_stat_fields(name)
        if fields and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid:
            members.append(int(name))
    return members


def prepend_pythonpath(entries, current):
    """``{"PYTHONPATH": ...}`` with `entries` first, keeping what the box or the spec set (an
    image's own PYTHONPATH must keep working); ``{}`` when there is nothing to add."""
    entries = [str(e) for e in entries or () if e]
    if not entries:
        return {}
    return {"PYTHONPATH": os.pathsep.join(entries + ([current] if current else []))}


def parse_secrets(text: str) -> dict:
    """``NAME=VALUE`` lines, exactly as the launcher writes them: NAME is an identifier, VALUE
    is everything after the first ``=`` up to the newline, byte for byte (no stripping, no
    unquoting: a secret may begin with a space or a quote). Lines split only on ``\\n`` —
    ``splitlines`` would also cut a value at ``\\r`` or U+2028. Anything else is skipped."""
    out = {}
    for line in text.split("\n"):
        key, sep, value = line.partition("=")
        if sep and key and key.replace("_", "a").isalnum() and key.isascii() \
                and not key[0].isdigit():
            out[key] = value
    return out


def restart_cause(exit_code: int, recover, restarts: int, stopped: bool):
    """Why the runner should start the job again (None: it should not).

    A stop someone asked for (a signal the runner received and forwarded: rgt cancel, a
    scheduler's notice, a shutdown) is never undone; exit 85 is rgt.ckpt's "checkpointed on a
    notice"; any other failure, a kill included, is a crash.
    """
    if not recover or exit_code == 0 or stopped:
        return None
    if restarts >= int(recover.get("max_restarts") or 0):
        return None
    cause = "preempted" if exit_code == PREEMPTED_EXIT else "crashed"
    return cause if cause in (recover.get("on") or ()) else None


def restart_delay(recover, restarts: int) -> float:
    """Exponential backoff from ``backoff_s``, capped at five minutes: a job that dies at once
    (bad data, a broken node) must not spin."""
    base = float(recover.get("backoff_s") or 0)
    return min(300.0, base * (2 ** restarts))


JOB_BIN = "bin"  # RUN_DIR/bin: first on the job's PATH


def interpreter_shims(python: str, has_pip: bool) -> dict:
    """{name: script} for RUN_DIR/bin: ``python`` and ``python3`` run PYTHON (the interpreter
    `rgt up` found, which runs this runner), ``pip``/``pip3`` its own pip when it has one.

    Scripts that ``exec`` the interpreter by its path, not symlinks: a venv's ``python``
    reached through a symlink elsewhere loses its venv (pyvenv.cfg is looked for beside the
    name it was started by). ``/bin/sh``: no bash needed. A job that activates its own
    venv or conda env puts that env's ``bin`` before this one, so its own ``python`` wins.
    """
    run = "exec " + shlex.quote(python)
    shims = {"python": f'#!/bin/sh\n{run} "$@"\n', "python3": f'#!/bin/sh\n{run} "$@"\n'}
    if has_pip:
        shims.update({name: f'#!/bin/sh\n{run} -m pip "$@"\n' for name in ("pip", "pip3")})
    return shims


def write_shims(bin_dir: str, shims: dict) -> None:
    """Write each shim atomically (tmp + rename), mode 0755; stale ones are replaced."""
    os.makedirs(bin_dir, exist_ok=True)
    for name, text in shims.items():
        path = os.path.join(bin_dir, name)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    for name in ("pip", "pip3"):
        if name not in shims:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(bin_dir, name))


def prepend_path(directory: str, current) -> dict:
    """``{"PATH": ...}`` with DIRECTORY first, the rest as it was (the box's or the spec's)."""
    rest = [p for p in (current or "").split(os.pathsep) if p and p != directory]
    return {"PATH": os.pathsep.join([directory] + (rest or ["/usr/bin", "/bin"]))}


SEEN_FILE = "job.signals"
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGUSR1")
SEEN_TRAPS = "".join(
    f"trap '[ -n \"$RGT_RUN_DIR\" ] && echo {name} >> \"$RGT_RUN_DIR/{SEEN_FILE}\"' {name[3:]}\n"
    for name in STOP_SIGNALS
)


def stop_signal(received, seen_text: str, exit_code: int):
    """The signal that stopped the job, or None when it ended on its own.

    A stop is a signal the runner delivered (received and forwarded) or the job's shell saw,
    whatever exit code the job chose after it: 0 (Lightning, without its outputs), 1 (torchrun
    and accelerate), 128+N (a trainer with no handler), 137 (killed after the grace). Exit 85
    stays rgt.ckpt's "preempted, saved".
    """
    if exit_code == PREEMPTED_EXIT:
        return None
    names = [r.get("signal") for r in received] + seen_text.split()
    for name in names:
        if name in STOP_SIGNALS:
            return name
    return None


def build_job_argv(command: str, setup: str | None = None, proxy_hook: str | None = None) -> list:
    """argv for the job: ``bash -c`` wrapper running proxy hook, setup, then the command.

    The proxy hook may fail (warned, not fatal: the file only exists on some platforms); a failed
    setup ends the job with its exit code; the command runs in a fresh ``bash -o pipefail -c`` so
    compound commands keep their meaning. Both shells trap TERM/INT/USR1: a trapped shell waits
    for its foreground child, so the trainer's exit code (e.g. 85) is the job's. The command's
    shell leads the job's process group, so its trap also notes a signal sent to the group by
    someone other than the runner (a scheduler, `kill -- -PGID`) in RUN_DIR/job.signals.
    """
    lines = ["set -o pipefail", "trap : TERM INT USR1"]
    if proxy_hook and proxy_hook.strip():
        lines += [
            "{",
            proxy_hook,
            '} || echo "[rgt] warning: proxy hook failed (exit $?); continuing without it" >&2',
        ]
    if setup and setup.strip():
        lines += [
            "{",
            setup,
            '} || { __rgt_rc=$?; echo "[rgt] setup failed (exit $__rgt_rc)" >&2; exit $__rgt_rc; }',
        ]
    lines.append(f"exec bash -o pipefail -c {shlex.quote(SEEN_TRAPS + command)} rgt-job")
    return ["bash", "-c", "\n".join(lines), "rgt-job"]


# ----------------------------------------------------------------------------- outputs + sync


class VerifyError(Exception):
    pass


O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
UTIME_FD = os.utime in os.supports_fd  # futimens: no second path lookup per file
BATCH_FILES = 2000  # files written before one flush: a sync per batch, not per file
BATCH_BYTES = 512 << 20  # and at most this much dirty data waiting for it


def syncfs_call():
    """libc's syncfs(2) (Linux >= 2.6.39: flush one filesystem, reporting its write-back errors
    since 5.8), or None where there is none."""
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


def read_back(path: str, size: int):
    """(bytes, sha256) of PATH as read back now; one read when it is the SIZE it should be."""
    if size > HASH_BUF_SIZE:
        return sha256_file(path)
    fd = os.open(path, os.O_RDONLY | O_CLOEXEC)
    try:
        data = os.read(fd, size + 1)
        while len(data) <= size:  # a short read; the copy may also really be short
            more = os.read(fd, size + 1 - len(data))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    if len(data) > size:
        return sha256_file(path)  # longer than written: hash all of it for the message
    return len(data), hashlib.sha256(data).hexdigest()


_ZERO_BLOCK = bytes(HASH_BUF_SIZE)  # compared with, never written: holes stay holes


class BatchCopier:
    """Copy files into ROOT durably and verified, many at a time.

    Each file is written to a short temp name in its destination directory (a 255-byte final
    name plus a suffix would pass NAME_MAX), hashed on the way. Every BATCH_FILES files (or
    BATCH_BYTES) the batch is flushed once — syncfs on ROOT's filesystem where the libc has it,
    else an fsync per file — then every temp file is re-read and its sha256 compared, only then
    renamed to its final name, and the renames made durable (syncfs again, or one fsync per
    directory). A final name therefore only ever holds a complete, verified, flushed copy; one
    flush per batch instead of per file is what makes 300,000 small outputs take seconds.
    """

    def __init__(self, root: str):
        self.root = root
        self.syncfs = syncfs_call()
        self.flush_kind = "syncfs" if self.syncfs else "fsync"
        self.pending = []  # (tmp, dst, rel, size, digest)
        self.pending_bytes = 0
        self.entries = []  # verified and renamed: {path, bytes, sha256}
        self.bytes = 0
        self.batches = 0
        self.made_dirs = set()
        self.counter = 0
        self.pid = os.getpid()
        self.failed_path = None

    def add(self, src: str, dst: str, rel: str) -> None:
        directory = os.path.dirname(dst)
        if directory not in self.made_dirs:
            os.makedirs(directory, exist_ok=True)
            self.made_dirs.add(directory)
        self.counter += 1
        tmp = os.path.join(directory, f".{self.counter}.{self.pid}{TMP_SUFFIX}")
        self.failed_path = dst
        h = hashlib.sha256()
        size = 0
        self.pending.append((tmp, dst, rel, None, None))  # removed on failure from here on
        # plain descriptors, reads sized to the file: a small output costs one read and one
        # write, not a file object and a 1 MiB buffer each
        fin = os.open(src, os.O_RDONLY | O_CLOEXEC)
        try:
            st = os.fstat(fin)
            # O_TRUNC, not O_EXCL: a crashed earlier runner with this pid may have left it
            fout = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_CLOEXEC, 0o666)
            try:
                while True:
                    block = os.read(fin, min(HASH_BUF_SIZE, max(st.st_size - size, 0) + 1))
                    if not block:
                        break
                    h.update(block)
                    size += len(block)
                    if len(block) >= 4096 and _ZERO_BLOCK.startswith(block):
                        os.lseek(fout, len(block), os.SEEK_CUR)  # a hole stays a hole
                        continue  # (issue 28: a sparse 5 GB output was copied dense)
                    view = memoryview(block)
                    while view:
                        view = view[os.write(fout, view):]
                if os.lseek(fout, 0, os.SEEK_CUR) != os.fstat(fout).st_size:
                    os.ftruncate(fout, size)  # it ended in a hole
                with contextlib.suppress(OSError, NotImplementedError):
                    os.utime(fout if UTIME_FD else tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(fout)
        finally:
            os.close(fin)
        self.pending[-1] = (tmp, dst, rel, size, h.hexdigest())
        self.pending_bytes += size
        if len(self.pending) >= BATCH_FILES or self.pending_bytes >= BATCH_BYTES:
            self.flush()

    def _flush_data(self, paths) -> None:
        if self.syncfs is not None:
            fd = os.open(self.root, os.O_RDONLY)
            try:
                if self.syncfs(fd) == 0:
                    return
                code = ctypes.get_errno()
            finally:
                os.close(fd)
            raise OSError(code, os.strerror(code), self.root)
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def flush(self) -> None:
        """Make the pending batch durable, verify it, give it its final names."""
        if not self.pending:
            return
        batch = self.pending
        self._flush_data([tmp for tmp, *_ in batch])
        for tmp, dst, _rel, size, digest in batch:
            self.failed_path = dst
            got_size, got_digest = read_back(tmp, size)
            if got_size != size or got_digest != digest:
                raise VerifyError(
                    f"verification failed for {dst}: wrote {size} bytes sha256 {digest}, "
                    f"read back {got_size} bytes sha256 {got_digest}"
                )
        for tmp, dst, rel, size, digest in batch:
            self.failed_path = dst
            os.replace(tmp, dst)
            self.entries.append({"path": rel, "bytes": size, "sha256": digest})
            self.bytes += size
        self.pending, self.pending_bytes = [], 0
        self.batches += 1
        if self.syncfs is not None:
            self._flush_data(())
        else:
            for directory in sorted({os.path.dirname(dst) for _t, dst, *_ in batch}):
                fsync_dir(directory)

    def discard(self) -> None:
        """After a failure: remove the temp files not yet renamed."""
        for tmp, *_ in self.pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.pending, self.pending_bytes = [], 0


def sync_outputs(patterns, workdir: str, durable_dir: str) -> dict:
    """Copy declared outputs to DURABLE_DIR with verification; returns the ``sync`` record."""
    started = now()
    record = {
        "dest": durable_dir,
        "status": "failed",
        "verified": False,
        "files": 0,
        "bytes": 0,
        "missing": [],
        "error": None,
        "errno": None,
        "failed_path": None,
        "hint": None,
        "started": started,
        "ended": None,
    }
    entries = []
    try:
        found, missing = match_outputs(workdir, patterns)
        # a file outside the workdir keeps its absolute path under _abs/ of the durable dir
        files = [(src, "_abs" + rel if rel.startswith("/") else rel) for src, rel in found]
        record["missing"] = missing
        if missing:
            record["error"] = (
                f"declared outputs matched nothing under {workdir}: {', '.join(missing)}"
            )
            record["hint"] = (
                "the job exited 0 without writing its declared outputs; check the job and the "
                "outputs patterns (relative to the workdir)"
            )
            return record
        os.makedirs(durable_dir, exist_ok=True)
        copier = BatchCopier(durable_dir)
        record["flush"] = copier.flush_kind
        try:
            for src, rel in files:
                copier.add(src, os.path.join(durable_dir, *rel.split("/")), rel)
            copier.flush()
        except BaseException as exc:
            record["failed_path"] = copier.failed_path
            if isinstance(exc, OSError) and str(exc.filename or "").endswith(TMP_SUFFIX):
                exc.filename = copier.failed_path  # name the output, not our temp file
            copier.discard()
            raise
        finally:
            entries = copier.entries
            record.update(files=len(entries), bytes=copier.bytes, batches=copier.batches)
        record["failed_path"] = os.path.join(durable_dir, SYNC_MANIFEST)
        write_json_atomic(
            record["failed_path"],
            {
                "created": now(),
                "host": socket.gethostname(),
                "root": durable_dir,
                "source_root": os.path.abspath(workdir),
                "files": entries,
                "missing": [],
            },
            indent=None,
        )
        record.update(status="ok", verified=True, failed_path=None)
    except OSError as exc:
        code = exc.errno
        name = errno.errorcode.get(code, str(code)) if code else "unknown"
        path = exc.filename or record["failed_path"] or durable_dir
        record["errno"] = name
        record["failed_path"] = path
        record["hint"] = DISK_HINT if code in DISK_FULL_ERRNOS else OTHER_SYNC_HINT
        record["df"] = disk_facts(durable_dir) if os.path.isdir(durable_dir) else None
        record["error"] = (
            f"{name} ({exc.strerror or exc}) at {path} after {record['files']} file(s) "
            f"copied: {record['hint']}"
        )
    except VerifyError as exc:
        record["errno"] = "EIO"
        record["hint"] = OTHER_SYNC_HINT
        record["error"] = f"{exc}: {record['hint']}"
    finally:
        record["ended"] = now()
    return record


# ----------------------------------------------------------------------------- the runner


class Refused(Exception):
    pass


class Runner:
    def __init__(self, run_dir: str):
        self.run_dir = os.path.abspath(run_dir)
        self.state_path = os.path.join(self.run_dir, "state.json")
        self.log_path = os.path.join(self.run_dir, "log")
        self.state_lock = threading.Lock()
        self.state = {}
        self.proc = None
        self.log_fd = None
        self.lock_fd = None
        self.pending = []
        self.received = []
        self.stop = threading.Event()
        self.save_error = None
        self.previous = {}
        self.job_lock_fd = None
        # held while a job leader is being started: until self.proc names it, a zombie child
        # of ours could be that leader, which only Popen.wait may reap
        self.spawn_lock = threading.Lock()
        self.notes = []  # said in the log once it is open
        self._seen_path = os.path.join(self.run_dir, SEEN_FILE)

    # -- state + log

    def save(self, **changes) -> None:
        with self.state_lock:
            self.state.update(changes)
            self.state["signals_received"] = list(self.received)
            try:
                write_json_atomic(self.state_path, self.state)
                self.save_error = None
            except OSError as exc:  # full data disk: keep running, say so in the log
                if self.save_error is None:
                    self.log(f"!! cannot write state.json: {exc} (check df -h / df -i)")
                self.save_error = str(exc)

    def log(self, message: str) -> None:
        if self.log_fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(self.log_fd, (f"[rgt] {message}\n").encode("utf-8", "replace"))

    def _heartbeat(self, interval: float) -> None:
        while not self.stop.wait(interval):
            with self.spawn_lock:
                proc = self.proc
                reap_adopted(skip=(proc.pid,) if proc is not None else ())
            self.save(heartbeat=now())

    # -- launch guard

    def _acquire(self) -> None:
        """One runner per RUN_DIR: an flock held for life, plus a check of the recorded pids."""
        lock_path = os.path.join(self.run_dir, "runner.lock")
        self.lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise Refused(f"another runner holds {self.run_dir}/runner.lock") from None
        previous = read_json(self.state_path) or {}
        reason = still_live(previous)
        if reason:
            raise Refused(reason)
        earlier = run_processes(self.run_dir)  # escaped the last runner, or it left no record
        if earlier:
            raise Refused(
                f"processes of an earlier launch of this run still live (pids "
                f"{', '.join(map(str, sorted(earlier)))}, RGT_RUN_DIR={self.run_dir}); stop them "
                "first (rgt cancel), a second trainer would share its checkpoints"
            )
        self.previous = previous
        spec = read_json(os.path.join(self.run_dir, "run.json"))
        env = spec.get("env") if isinstance(spec, dict) else None
        home = env.get("RGT_CKPT_DIR") if isinstance(env, dict) else None
        if home:
            self._lock_job(os.path.normpath(str(home)))

    def _lock_job(self, home: str) -> None:
        """One live run per job: every run of a job shares its checkpoint home, and two
        trainers writing one home corrupt each other's resume. An flock beside the home (not in
        it: the home is pulled) held for the runner's life, plus a look for job processes of
        other run dirs with this RGT_CKPT_DIR (their runner may be dead, its lock released)."""
        lock = os.path.join(os.path.dirname(home), f".{os.path.basename(home)}.rgt-job.lock")
        try:
            os.makedirs(os.path.dirname(lock), exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            self.notes.append(f"cannot open the job lock {lock} ({exc.strerror}); only live "
                              "processes of other runs of this job are looked for")
            fd = None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = read_text(lock) or "another runner"
                os.close(fd)
                raise Refused(
                    f"another run of this job is live ({holder} holds {lock}; checkpoint home "
                    f"{home}); stop it first (rgt cancel) or wait for it to end"
                ) from None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.write(fd, f"run {self.run_dir} (runner pid {os.getpid()} on "
                             f"{socket.gethostname()})\n".encode())
            self.job_lock_fd = fd
        others = job_home_processes(home, self.run_dir)
        if others:
            named = "; ".join(f"{d}: pids {', '.join(map(str, sorted(p)))}"
                              for d, p in sorted(others.items()))
            raise Refused(
                f"processes of another run of this job still live ({named}); they share its "
                f"checkpoint home {home}: stop them first (rgt cancel)"
            )

    # -- signals

    def _on_signal(self, signum, _frame) -> None:
        # Only forward and remember: the main thread may hold state_lock right now.
        name = signal.Signals(signum).name
        self.received.append({"signal": name, "at": now()})
        proc = self.proc
        if proc is not None and proc.returncode is None:
            self.log(f"received {name}; forwarding it to the job's process group {proc.pid}")
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signum)
        elif proc is None:
            self.log(f"received {name} before the job started; delivering it at start")
            self.pending.append(signum)
        else:
            self.log(f"received {name} after the job ended; finishing the record")

    # -- main

    def run(self) -> int:
        detach = {
            "setsid": os.getsid(0) == os.getpid(),
            "tmux": bool(os.environ.get("TMUX")),
            "sighup_ignored": signal.getsignal(signal.SIGHUP) == signal.SIG_IGN,
        }
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a hang-up must not end a detached run
        no_subreaper = become_subreaper()
        self._acquire()
        write_json_atomic(os.path.join(self.run_dir, "runner.pid"), os.getpid())
        self.log_fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if no_subreaper:
            self.log(f"child subreaper unavailable: {no_subreaper}; processes that leave the "
                     "job's tree are still found by RGT_RUN_DIR in their environment")
        for note in self.notes:
            self.log(note)

        spec = read_json(os.path.join(self.run_dir, "run.json"))
        heartbeat_s = 10.0
        if isinstance(spec, dict):
            try:
                heartbeat_s = max(0.2, float(spec.get("heartbeat_s") or 10))
            except (TypeError, ValueError):
                heartbeat_s = 10.0
        self.state = {
            "runner_version": RUNNER_VERSION,
            "run_id": (spec or {}).get("run_id") if isinstance(spec, dict) else None,
            "status": "starting",
            "launch": int(self.previous.get("launch") or 0) + 1,
            "runner_pid": os.getpid(),
            "runner_pid_start": proc_start_time(os.getpid()),
            "pid": None,
            "pid_start": None,
            "exit_code": None,
            "signal": None,
            "created": now(),
            "started": None,
            "ended": None,
            "heartbeat": now(),
            "heartbeat_s": heartbeat_s,
            "host": socket.gethostname(),
            "boot_id": boot_id(),
            "detach": detach,
            "oom_kill_at_start": cgroup_facts()["oom_kill"],
            "log": self.log_path,
            "sync": None,
            "error": None,
        }
        self.save()
        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, self._on_signal)
        beat = threading.Thread(target=self._heartbeat, args=(heartbeat_s,), daemon=True)
        beat.start()
        try:
            return self._run_job(spec)
        finally:
            self._forget_secrets()
            self.stop.set()
            beat.join(timeout=5)

    def _forget_secrets(self) -> None:
        """The run has ended: the secrets have no further use on this stranger's disk. Done
        before the final state is saved, so a reader that sees the end sees them gone; a
        runner killed mid-run leaves them for its relaunch."""
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.run_dir, "secrets.env"))

    def _fail(self, message: str, code: int = EXIT_RUNNER_ERROR) -> int:
        self.log(f"!! {message}")
        self._forget_secrets()
        self.save(status="failed", error=message, ended=now(), heartbeat=now())
        self.log("exit=none status=failed")
        return code

    def _run_job(self, spec) -> int:
        if not isinstance(spec, dict) or not str(spec.get("command") or "").strip():
            return self._fail("run.json missing, unreadable, or without a 'command'")
        workdir = os.path.abspath(
            os.path.join(self.run_dir, spec.get("workdir") or os.path.join(self.run_dir, "code"))
        )
        if not os.path.isdir(workdir):
            return self._fail(f"workdir {workdir} does not exist (was the code pushed?)")
        st = self.state
        if self.previous.get("status") in LIVE_STATUSES:  # passed _acquire: its pids are gone
            self.log(
                f"relaunch: launch {self.previous.get('launch')} ended without a record "
                f"(status {self.previous.get('status')}, its processes gone: a container "
                "restart, preemption or kill); the log and checkpoints are kept"
            )
        self.log(
            f"run={st.get('run_id')} launch={st['launch']} host={st['host']} "
            f"runner_pid={os.getpid()} starting in {workdir}"
        )

        env = dict(os.environ)
        for key, value in (spec.get("env") or {}).items():
            if value is not None:
                env[str(key)] = str(value)
        secrets_path = os.path.join(self.run_dir, "secrets.env")
        if os.path.exists(secrets_path):
            try:
                if os.stat(secrets_path).st_mode & 0o077:
                    os.chmod(secrets_path, 0o600)
                    self.log("secrets.env was readable by others; tightened to 0600 (U34)")
                # surrogateescape: bytes that are not UTF-8 reach the job's env unchanged
                with open(secrets_path, encoding="utf-8", errors="surrogateescape",
                          newline="") as f:
                    secrets = parse_secrets(f.read())
            except OSError as exc:
                return self._fail(f"cannot read secrets.env: {exc.strerror}")
            env.update(secrets)
            self.log(f"exported {len(secrets)} secret(s) from secrets.env into the job env")
        env["PYTHONUNBUFFERED"] = "1"
        env["RGT_RUN_ID"] = str(self.state.get("run_id") or "")
        env["RGT_RUN_DIR"] = self.run_dir
        env.update(prepend_pythonpath(spec.get("pythonpath"), env.get("PYTHONPATH")))
        env.update(self._python_first(env.get("PATH")))

        argv = build_job_argv(str(spec["command"]), spec.get("setup"), spec.get("proxy_hook"))
        recover = spec.get("recover") if isinstance(spec.get("recover"), dict) else None
        restarts = []
        while True:
            with contextlib.suppress(OSError):  # what an earlier attempt's shell saw
                os.unlink(self._seen_path)
            try:
                self.spawn_lock.acquire()
                self.proc = subprocess.Popen(
                    argv,
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=self.log_fd,
                    stderr=self.log_fd,
                    start_new_session=True,
                )
            except OSError as exc:
                return self._fail(f"cannot start the job: {exc}")
            finally:
                self.spawn_lock.release()
            pid = self.proc.pid
            self.save(
                status="running",
                pid=pid,
                pgid=pid,
                pid_start=proc_start_time(pid),
                started=self.state.get("started") or now(),
                attempt_started=now(),
            )
            while self.pending:
                with contextlib.suppress(OSError):
                    os.killpg(pid, self.pending.pop(0))

            returncode = self.proc.wait()
            leader_ended = now()
            leftovers, survivors = self._end_tree(float(spec.get("kill_grace_s") or 10))
            if returncode < 0:
                signum = -returncode
                exit_code, sig_name = 128 + signum, signal.Signals(signum).name
            else:
                exit_code, sig_name = returncode, None
            # a stop is a signal the runner forwarded or one sent to the job's group directly
            asked = bool(self.received) or bool(read_text(self._seen_path))
            cause = restart_cause(exit_code, recover, len(restarts), asked)
            if cause is not None and survivors:
                self.log(f"!! not restarting: processes of this attempt survive (pids "
                         f"{', '.join(map(str, survivors))}); two trainers would share a home")
                cause = None
            if cause is None:
                break
            delay = restart_delay(recover, len(restarts))
            restarts.append(
                {"at": now(), "exit_code": exit_code, "signal": sig_name, "cause": cause}
            )
            self.log(
                f"exit={exit_code}{f' signal={sig_name}' if sig_name else ''}: restart "
                f"{len(restarts)}/{recover.get('max_restarts')} in {delay:g} s (recover on "
                f"{cause}); the job resumes from its checkpoint home"
            )
            self.save(restarts=restarts, pid=None, pid_start=None)
            deadline = time.time() + delay
            while time.time() < deadline and not self.received:
                time.sleep(0.2)
            if self.received:  # a stop arrived during the pause: no attempt follows, a stop
                leader_ended = now()
                break
            self.proc = None
        status = "succeeded" if exit_code == 0 else "failed"
        changes = {"exit_code": exit_code, "signal": sig_name, "leftovers": leftovers,
                   "survivors": survivors}
        # only a signal that reached the job counts: one that came after it ended on its own
        # (a cancel racing a finished run) does not turn its result into a stop
        before = [r for r in self.received if r.get("at", 0) <= leader_ended]
        stop = stop_signal(before, read_text(self._seen_path) or "", exit_code)
        if stop:
            # asked to stop, and it did: its outputs are not expected (no sync), its
            # checkpoints and log are its results
            status, changes["stop_signal"] = "stopped", stop
            changes["error"] = f"stopped by {stop} (exit {exit_code})"
        elif status == "succeeded" and spec.get("durable_dir"):
            self.save(**changes)
            sync = sync_outputs(spec.get("outputs") or [], workdir, str(spec["durable_dir"]))
            changes["sync"] = sync
            if sync["status"] == "ok":
                self.log(
                    f"synced {sync['files']} file(s), {sync['bytes']} bytes to {sync['dest']}; "
                    "every copy re-read and sha256-verified"
                )
            else:
                status = "sync-failed"
                changes["error"] = sync["error"]
                self.log(f"!! SYNC FAILED: {sync['error']}")
        elif status == "failed":
            changes["error"] = (
                f"job killed by {sig_name}" if sig_name else f"job exited with code {exit_code}"
            )
        self._forget_secrets()
        # the log's last line first: a reader that sees the final state finds it there
        self.log(f"exit={exit_code}{f' signal={sig_name}' if sig_name else ''} status={status}")
        self.save(status=status, ended=now(), heartbeat=now(), **changes)
        if status == "succeeded":
            return 0
        if status == "sync-failed":
            return EXIT_SYNC_FAILED
        if status == "stopped":
            return 128 + signal.Signals[stop].value
        return exit_code if 0 < exit_code < 256 else 1

    def _python_first(self, path) -> dict:
        """The job's ``python``/``python3`` are the interpreter running this runner (the one
        `rgt up` found and audited), whatever the box's PATH holds: RUN_DIR/bin first."""
        python = sys.executable
        if not python or not os.path.isabs(python):
            self.log("!! cannot tell this runner's interpreter; the job's `python` is the "
                     "box's own")
            return {}
        bin_dir = os.path.join(self.run_dir, JOB_BIN)
        try:
            write_shims(bin_dir, interpreter_shims(
                python, importlib.util.find_spec("pip") is not None))
        except OSError as exc:
            self.log(f"!! cannot write {bin_dir} ({exc.strerror}); the job's `python` is the "
                     "box's own")
            return {}
        self.log(f"the job's python and python3 are {python} ({bin_dir} first on PATH)")
        return prepend_path(bin_dir, path)

    def _end_tree(self, grace: float):
        """Once the job's leader has exited, end every process of the run still alive: below
        the runner (the subreaper adopts orphans), or carrying this RGT_RUN_DIR. SIGTERM, SIGKILL
        after a grace. Returns (how many were alive, pids that outlived SIGKILL)."""
        def live():
            reap_adopted()
            return run_processes(self.run_dir, os.getpid())

        left = live()
        # what the signal that ended the leader also hit (a kill of the whole group) may take a
        # moment to exit: a process that goes by itself is no leftover
        settle = time.time() + (grace if self.received else 0.5)
        while left and time.time() < settle:  # a forwarded stop: let them finish checkpointing
            time.sleep(0.05)
            left = live()
        if not left:
            return 0, []
        seen = dict(left)
        self.log(f"terminating {len(left)} leftover process(es) of the job (pids "
                 f"{', '.join(map(str, sorted(left)))}; U11)")
        for sig, wait in ((signal.SIGTERM, min(grace, 5.0)), (signal.SIGKILL, 2.0)):
            sent = set()
            deadline = time.time() + wait
            while left and time.time() < deadline:
                for pid, start in left.items():
                    if (pid, start) not in sent and pid_alive(pid, start):
                        with contextlib.suppress(OSError):
                            os.kill(pid, sig)
                        sent.add((pid, start))
                time.sleep(0.05)
                left = live()
                seen.update(left)  # one started meanwhile (an agent restarting its workers)
            if not left:
                break
        if left:
            self.log(f"!! {len(left)} process(es) of the job outlived SIGKILL (pids "
                     f"{', '.join(map(str, sorted(left)))}): uninterruptible, or not ours to kill")
        return len(seen), sorted(left)


# ----------------------------------------------------------------------------- entry points


def _refusal(run_dir: str, reason: str) -> int:
    sys.stderr.write(json.dumps({"refused": True, "run_dir": run_dir, "reason": reason}) + "\n")
    return EXIT_REFUSED


def run(run_dir: str) -> int:
    runner = Runner(run_dir)
    try:
        return runner.run()
    except Refused as exc:
        return _refusal(runner.run_dir, str(exc))
    except Exception:  # the runner's own bug: leave a trace a reader can act on
        message = "runner error: " + traceback.format_exc(limit=5)
        try:
            runner.log("!! " + message)
            runner.save(status="failed", error=message, ended=now())
        except Exception:
            pass
        sys.stderr.write(message)
        return EXIT_RUNNER_ERROR


def detach(run_dir: str, wait_s: float = 15.0) -> int:
    """Fork a detached runner (own session, stdio on /dev/null); report its pid as JSON.

    Lets ``ssh box 'python3 - RUN_DIR --detach' < runner.py`` return at once with the pid.
    """
    run_dir = os.path.abspath(run_dir)
    state_path = os.path.join(run_dir, "state.json")
    before = read_json(state_path) or {}
    if still_live(before):
        print(json.dumps({"refused": True, "run_dir": run_dir, "state": before}))
        return EXIT_REFUSED
    sys.stdout.flush()
    child = os.fork()
    if child == 0:  # the runner
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            code = run(run_dir)
        except BaseException:
            code = EXIT_RUNNER_ERROR
        os._exit(code)
    deadline = time.time() + wait_s
    report = {"run_dir": run_dir, "runner_pid": child, "refused": False}
    while time.time() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            code = (
                os.waitstatus_to_exitcode(status)  # novm: 3.9+, guarded on the next line
                if hasattr(os, "waitstatus_to_exitcode")
                else (status >> 8)
            )
            report.update(exited=code, refused=code == EXIT_REFUSED, state=read_json(state_path))
            print(json.dumps(report))
            return code or 0
        state = read_json(state_path) or {}
        if state.get("runner_pid") == child and state.get("status") != "starting":
            report.update(status=state.get("status"), run_id=state.get("run_id"))
            print(json.dumps(report))
            return 0
        time.sleep(0.05)
    report.update(status=(read_json(state_path) or {}).get("status"), note="still starting")
    print(json.dumps(report))
    return 0


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    want_detach = "--detach" in args
    args = [a for a in args if a != "--detach"]
    if len(args) != 1 or args[0] in ("-h", "--help"):
        sys.stderr.write("usage: python3 runner.py RUN_DIR [--detach]\n")
        return 2
    if not os.path.isfile(os.path.join(args[0], "run.json")):
        sys.stderr.write(f"runner: {args[0]}/run.json not found\n")
        return 2
    return detach(args[0]) if want_detach else run(args[0])


if __name__ == "__main__":
    sys.exit(main())
