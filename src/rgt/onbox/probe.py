#!/usr/bin/env python3
"""rgt on-box probe: reconcile a run's state.json with the real process, in one round-trip.

Usage (standard library only, Python >= 3.8; ship it on stdin or as a file):

    python3 probe.py RUN_DIR [--dirs D1 D2 ...] [--gpu-python PY] [--tail N] [--no-dmesg]
    python3 - RUN_DIR [...] < probe.py
    python3 - --census RGT_ROOT [RGT_ROOT ...] < probe.py

Prints one JSON document: the state.json content; whether the job process is alive (pid exists,
its /proc start time equals ``pid_start``, not a zombie, same boot); whether the runner is alive;
the tmux session ``rgt-<run_id>``; heartbeat age; uptime and boot_id (a changed boot_id means a
reboot); cgroup memory limit, ``oom_kill`` counter and CPU quota (v2, v1 fallback — U41); recent
kernel-log OOM lines when ``dmesg`` is allowed; bytes and inodes for each ``--dirs`` entry (U6/U7;
default: the run dir and the durable dir); the last metrics-looking log line, the log tail, size
and mtime; an ``nvidia-smi`` summary; the given Python's torch/CUDA view when ``--gpu-python``.

``processes`` lists every live process of the run as ``[pid, start]`` pairs: those below a live
runner and those with RGT_RUN_DIR=RUN_DIR in their environment (a job whose runner was killed).

``verdict`` (pure, importable) turns state + facts into running / succeeded / failed /
sync-failed / vanished / starting. A log line is a claim; state.json is a claim too until the
process agrees with it. For a vanished run it walks the U3 ladder: OOM kill → reboot → hang-up →
manual kill / unknown, with the gotcha ids and what to do.

``--census RGT_ROOT ...`` (each root a ``<DATA_DIR>/rgt``) lists every LIVE process of the rgt
runs under those roots, recorded or not, and prints one JSON document (exit 0; 2 without a
root)::

    {"census_version": 1, "roots": ["/data/rgt"], "boot_id": "...",
     "procfs": true,            # false: no /proc (a macOS local box): runners only, by pid file
     "complete": true,          # every process was looked at (procfs)
     "unreadable_environ": 0,   # live processes whose environment could not be read (others')
     "runs": {"/data/rgt/r1": {
         "run_id": "r1",                 # the run dir's name
         "runner_pid": 123, "runner_pid_start": 456789, "runner_alive": true,  # null/false:
                                         # no runner of this run lives
         "job_pids": [130, 131, 140],    # every live process whose env has this RGT_RUN_DIR
         "job_processes": [{"pid": 130, "start": 456801, "ppid": 123, "pgid": 130,
                            "comm": "bash"}, ...],
         "ckpt_dirs": ["/durable/rgt/jobs/mlp/ckpt"],   # RGT_CKPT_DIR: job envs + run.json
         "status": "running"}}}         # state.json's status (a claim), null if unreadable

A run appears only while a process of it lives: its runner (named ``rgt-runner`` in
/proc/PID/comm, or the pid in RUN_DIR/runner.pid with the start time state.json recorded and
RUN_DIR in its command line) or a job process (RGT_RUN_DIR in /proc/PID/environ; torchrun's
workers in their own sessions included). ``start`` is /proc/PID/stat field 22 (clock ticks since
boot): the same pid with another start is another process. A run with ``runner_alive`` false
and job pids is an orphaned job: its runner died and its processes still run.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import time

from rgt.onbox._common import (
    boot_id,
    census,
    cgroup_facts,
    disk_facts,
    int_or_none,
    proc_stat_fields,
    python_facts,
    read_json,
    read_text,
    run_cmd,
    run_processes,
)

PROBE_VERSION = 1
TERMINAL = ("succeeded", "failed", "sync-failed", "stopped")
OOM_RE = re.compile(r"killed process|out of memory", re.IGNORECASE)
XID_RE = re.compile(r"NVRM: Xid", re.IGNORECASE)
DMESG_TS_RE = re.compile(r"^\[\s*(\d+(?:\.\d+)?)\]")
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
# key, then `=`, `:` or spaces, then a number that ends the token (not `3-step`, `1000.ckpt`;
# `5/100` is step 5 of 100)
KEY_VALUE_RE = re.compile(
    r"(?<![\w./-])([A-Za-z_][\w/.]*?)\s*(?:=|:\s*|\s+)(" + NUMBER + r")(?=[\s,;:|)\]}%]|/\d|$)"
)
METRIC_KEY_RE = re.compile(
    r"loss|acc|ppl|perplex|reward|score|f1|auc|bleu|rouge|mse|mae|error|wer|cer|return", re.I
)
STEP_KEYS = ("step", "global_step", "iter", "iteration", "it", "steps", "Step", "Iter")
LOSS_KEYS = ("loss", "train_loss", "train/loss", "Loss", "eval_loss", "val_loss")
EPOCH_KEYS = ("epoch", "ep", "Epoch", "EPOCH")  # progress, never a metric to plot
# PyTorch's DDP example: `[GPU0] Epoch 3 | Batchsize: 32 | Steps: 63` (steps of each epoch,
# printed as the epoch starts); no metric on it, yet it says how far the run is
EPOCH_LINE_RE = re.compile(r"\bEpoch\s+(\d+)(?:\s*/\s*(\d+))?\s*\|.*?\bSteps:\s*(\d+)\b")
TRAIN_BARS = ("epoch", "train", "step", "iter")
SKIP_DIRS = ("__pycache__", "node_modules", "data", "datasets", "wandb", "venv")
TQDM_RE = re.compile(
    r"(\d+)/(\d+) \[(\d+:\d\d(?::\d\d)?)<(\d+:\d\d(?::\d\d)?|\?),\s*([\d.]+)(it/s|s/it)"
)
TAIL_BYTES = 256 * 1024
PREEMPTED_EXIT = 85
LOG_QUIET_S = 900


# ----------------------------------------------------------------------------- processes


def process_facts(pid, start=None, same_boot=True) -> dict:
    """Is PID our process? exists, not a zombie, /proc start time == START, and same boot."""
    facts = {"pid": pid, "exists": False, "state": None, "start_matches": None, "alive": False}
    if not pid:
        return facts
    fields = proc_stat_fields(pid)
    if fields is None:
        return facts
    facts["exists"] = True
    facts["state"] = fields[0].decode("ascii", "replace")
    if start is not None:
        facts["start_matches"] = int(fields[19]) == int(start)
    facts["alive"] = bool(
        same_boot and facts["state"] not in ("Z", "X") and facts["start_matches"] is not False
    )
    return facts


# ----------------------------------------------------------------------------- box facts


def boot_facts() -> dict:
    facts = {"uptime_s": None, "boot_id": None}
    try:
        with open("/proc/uptime", encoding="ascii") as f:
            facts["uptime_s"] = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    facts["boot_id"] = boot_id()
    return facts


def scan_kernel_log(text: str, since_boot_s=None, limit: int = 10) -> dict:
    """OOM and Xid lines of a kernel log. With SINCE_BOOT_S (the run's start, in seconds since
    boot) lines stamped earlier are only counted: an OOM before this run says nothing about it."""
    recent, older = [], 0
    for line in text.splitlines():
        if not (OOM_RE.search(line) or XID_RE.search(line)):
            continue
        stamp = DMESG_TS_RE.match(line)
        if since_boot_s is not None and stamp and float(stamp.group(1)) < since_boot_s - 1:
            older += 1
        else:
            recent.append(line)
    return {
        "oom_lines": [ln for ln in recent if OOM_RE.search(ln)][-limit:],
        "xid_lines": [ln for ln in recent if XID_RE.search(ln)][-limit:],
        "older_matches": older,
    }


def dmesg_facts(since_boot_s=None, limit: int = 10) -> dict:
    """The kernel log's OOM/Xid lines; containers often forbid dmesg — say so, don't fail."""
    rc, out, err = run_cmd(["dmesg"], timeout=5)
    if rc != 0:
        reason = (err or "").strip().splitlines()
        return {
            "readable": False,
            "error": reason[0] if reason else f"dmesg exit {rc}",
            "oom_lines": [],
            "xid_lines": [],
            "older_matches": 0,
        }
    return dict(scan_kernel_log(out, since_boot_s, limit), readable=True, error=None)


def nvidia_facts():
    rc, out, err = run_cmd(
        [
            "nvidia-smi",
            "--query-gpu=index,name,memory.used,memory.total,utilization.gpu",
            "--format=csv,noheader,nounits",
        ],
        timeout=15,
    )
    if rc is None or rc != 0:
        return {"present": False, "error": (err or out or "").strip()[:300] or None, "gpus": []}
    gpus = []
    for line in out.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 5:
            continue

        def num(text):
            try:
                return float(text)
            except ValueError:
                return None

        gpus.append(
            {
                "index": int_or_none(cells[0]),
                "name": cells[1],
                "memory_used_mib": num(cells[2]),
                "memory_total_mib": num(cells[3]),
                "utilization_pct": num(cells[4]),
            }
        )
    return {"present": bool(gpus), "error": None, "gpus": gpus}


def tmux_facts(run_id) -> dict:
    session = f"rgt-{run_id}" if run_id else None
    if shutil.which("tmux") is None:
        return {"available": False, "session": session, "exists": None}
    if not session:
        return {"available": True, "session": None, "exists": None}
    rc, _, _ = run_cmd(["tmux", "has-session", "-t", "=" + session], timeout=5)
    return {"available": True, "session": session, "exists": None if rc is None else rc == 0}


# ----------------------------------------------------------------------------- the log


def _clean(line: str) -> str:
    """A progress bar rewrites its line with CR; keep what a terminal would show."""
    parts = [p for p in line.rstrip("\r").split("\r") if p.strip()]
    return parts[-1] if parts else ""


def _number(value):
    """A metric value: a number, or a numeric string (transformers 5 logs '2.136')."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return int(value) if value.strip().lstrip("-").isdigit() else float(value)
        except ValueError:
            return None
    return None


def _metrics_of(pairs) -> dict:
    """{step, loss, epoch, values} from (key, value) pairs; None unless one is a metric."""
    values = {}
    for key, raw in pairs:
        value = _number(raw)
        if value is not None and isinstance(key, str) and value == value:  # not NaN
            values[key] = value
    if not any(METRIC_KEY_RE.search(k) for k in values):
        return None
    out = {"values": values}
    for key in STEP_KEYS:
        if isinstance(values.get(key), int) or (
            isinstance(values.get(key), float) and float(values[key]).is_integer()
        ):
            out["step"], out["step_key"] = int(values[key]), key
            break
    loss = next((k for k in LOSS_KEYS if k in values), None)
    loss = loss or next((k for k in values if "loss" in k.lower()), None)
    if loss is not None:
        out["loss"] = values[loss]
        out["loss_key"] = loss
    for key in EPOCH_KEYS:
        if key in values:
            out["epoch"], out["epoch_key"] = values[key], key
            break
    return out


def parse_metrics(line: str):
    """The metrics a log line reports, or None when it reports none.

    Forms: Hugging Face's dict lines (``{'loss': '2.136', 'epoch': 0.5}``), JSON lines, and
    key/value text (``step=120 loss=0.43``, ``iter 100: loss 2.1234``, ``Step 5 | loss: 1.2``).
    A line is a metric only with a metric-like key (loss, acc, ppl, reward, ...) whose value
    ends at a word boundary, so file names (``epoch=3-step=1000.ckpt``) and settings
    (``lr=3e-4 batch_size=32``) are not metrics.
    """
    text = line.strip()
    if not text or text.startswith("[rgt]"):
        return None
    if text.startswith("{") and text.endswith("}") and len(text) < 10000:
        obj = None
        try:
            obj = json.loads(text)
        except ValueError:
            try:  # a Python dict repr (HF Trainer's log lines): literals only, nothing runs
                obj = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                obj = None
        if isinstance(obj, dict):
            return _metrics_of(obj.items())
    found = _metrics_of((m.group(1), m.group(2)) for m in KEY_VALUE_RE.finditer(text))
    if found is not None:
        # `it 80/200`, `epoch 2/10`: the count's end, for an ETA
        for key, name in ((found.get("step_key"), "total"), (found.get("epoch_key"), "epochs")):
            if key is not None:
                of = re.search(r"(?<![\w./-])" + re.escape(key) + r"\s*(?:=|:\s*|\s+)"
                               + NUMBER + r"\s*/\s*(\d+)\b", text)
                if of is not None and int(of.group(1)) > 0:
                    found[name] = int(of.group(1))
    return found


def is_metrics_line(line: str) -> bool:
    return parse_metrics(line) is not None


def parse_progress(line: str):
    """A tqdm bar (``4/6 [00:01<00:00,  5.02it/s]``): step, total, steps/s, seconds left.

    Lightning's bar counts batches of the current epoch, not steps: only its rate is kept.
    """
    bars = list(TQDM_RE.finditer(line))
    if not bars:
        epoch = EPOCH_LINE_RE.search(line)
        if epoch is None:
            return None
        out = {"epoch": int(epoch.group(1)), "epoch_steps": int(epoch.group(3))}
        if epoch.group(2):
            out["epochs"] = int(epoch.group(2))
        return out
    found = bars[-1]
    head = re.match(r"\s*(.*?)\s*\d+%\|", line[: found.start()])
    desc = head.group(1).strip(" :") if head else ""
    if desc and not desc.lower().startswith(TRAIN_BARS):
        return None  # another bar: "Writing model shards", "Map", "Loading checkpoint shards"
    rate = float(found.group(5))
    if found.group(6) == "s/it":
        rate = 1.0 / rate if rate else 0.0
    out = {"rate": rate}
    if not line.lstrip().startswith("Epoch"):
        out.update(step=int(found.group(1)), total=int(found.group(2)),
                   eta_s=_clock(found.group(4)))
    return out


def _clock(text: str):
    seconds = 0
    try:
        for part in text.split(":"):
            seconds = seconds * 60 + int(part)
    except ValueError:
        return None
    return seconds


def csv_metrics(roots, depth: int = 4, max_dirs: int = 2000):
    """The last row holding a metric of the newest ``metrics.csv`` under ROOTS (Lightning's
    CSVLogger writes lightning_logs/version_N/metrics.csv); None when there is none. The walk
    is bounded (depth, directory count, no data/hidden dirs): it runs on every probe."""
    newest, newest_mtime, seen, workdir = None, -1.0, 0, roots[0] if roots else ""
    walks = [(root, os.walk(root)) for root in roots if root and os.path.isdir(root)]
    for root, walk in walks:
        base = root.rstrip("/").count("/")
        for current, dirs, files in walk:
            seen += 1
            if current.count("/") - base >= depth or seen > max_dirs:
                dirs[:] = []
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS]
            if "metrics.csv" not in files:
                continue
            path = os.path.join(current, "metrics.csv")
            with contextlib.suppress(OSError):
                mtime = os.stat(path).st_mtime
                if mtime > newest_mtime:
                    newest, newest_mtime, workdir = path, mtime, root
    if newest is None:
        return None
    try:
        with open(newest, "rb") as f:
            header = f.readline().decode("utf-8", "replace").strip().split(",")
            size = os.fstat(f.fileno()).st_size
            f.seek(max(f.tell(), size - 65536))
            rows = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for row in reversed(rows):
        cells = row.split(",")
        if len(cells) != len(header):
            continue
        found = _metrics_of((k, cells[i]) for i, k in enumerate(header) if cells[i] != "")
        if found:
            found["source"] = os.path.relpath(newest, workdir)
            return found
    return None


def checkpoint_entries(home: str, limit: int = 20) -> list:
    """The newest entries of the checkpoint home and of its subdirectories (name, mtime, dir):
    enough for the laptop to name the last checkpoint and its step."""
    entries = []
    for current, dirs, files in os.walk(home):
        depth = os.path.relpath(current, home).count(os.sep) + (current != home)
        for name in dirs + files:
            if name.startswith("."):
                continue
            path = os.path.join(current, name)
            with contextlib.suppress(OSError):
                entries.append(
                    {"name": os.path.relpath(path, home), "mtime": os.stat(path).st_mtime,
                     "dir": name in dirs}
                )
        if depth >= 1:
            dirs[:] = []
        if len(entries) > 5000:
            break
    entries.sort(key=lambda e: e["mtime"], reverse=True)
    return entries[:limit]


def log_facts(path: str, tail: int = 20) -> dict:
    out = {
        "path": path,
        "exists": False,
        "bytes": None,
        "mtime": None,
        "age_s": None,
        "last_metrics": None,
        "metrics": None,
        "progress": None,
        "tail": [],
    }
    try:
        st = os.stat(path)
    except OSError:
        return out
    out.update(
        exists=True,
        bytes=st.st_size,
        mtime=round(st.st_mtime, 3),
        age_s=round(time.time() - st.st_mtime, 1),
    )
    try:
        with open(path, "rb") as f:
            f.seek(max(0, st.st_size - TAIL_BYTES))
            chunk = f.read(TAIL_BYTES)
    except OSError:
        return out
    lines = chunk.decode("utf-8", "replace").split("\n")
    if st.st_size > TAIL_BYTES:
        lines = lines[1:]  # first line is probably cut
    lines = [_clean(ln) for ln in lines]
    lines = [ln for ln in lines if ln]
    out["tail"] = lines[-tail:] if tail > 0 else []
    for line in reversed(lines):
        metrics = parse_metrics(line)
        if metrics is not None:
            out["last_metrics"], out["metrics"] = line, metrics
            break
    for line in reversed(lines):
        progress = parse_progress(line)
        if progress is not None:
            out["progress"] = progress
            break
    return out


# ----------------------------------------------------------------------------- verdict


def _ladder(state: dict, facts: dict) -> list:
    """U3's four candidate causes, in order, each with its evidence."""
    now = facts.get("now") or time.time()
    boot_now, boot_then = facts.get("boot_id"), state.get("boot_id")
    started = state.get("started") or state.get("created")
    uptime = facts.get("uptime_s")
    rebooted_by_id = bool(boot_now and boot_then and boot_now != boot_then)
    rebooted_by_uptime = bool(started and uptime is not None and uptime < now - started)
    rebooted = rebooted_by_id or rebooted_by_uptime

    # 1. OOM kill
    oom_now = facts.get("oom_kill")
    oom_base = state.get("oom_kill_at_start")
    oom_lines = facts.get("dmesg_oom_lines") or []
    if rebooted:
        oom = {
            "matched": False,
            "evidence": "not applicable: the box rebooted since the start, so "
            "the kernel log and cgroup counters no longer describe this run",
        }
    else:
        evidence, matched = [], False
        if oom_now is not None:
            delta = oom_now - oom_base if oom_base is not None else oom_now
            matched = delta > 0
            evidence.append(
                f"cgroup oom_kill={oom_now}"
                + (f" (was {oom_base} at start)" if oom_base is not None else "")
            )
        if oom_lines:
            matched = True
            evidence.append(f"{len(oom_lines)} dmesg OOM line(s), last: {oom_lines[-1].strip()}")
        elif facts.get("dmesg_readable"):
            evidence.append("no OOM lines in dmesg")
        else:
            evidence.append("dmesg not readable here")
        if oom_now is None and not facts.get("dmesg_readable"):
            matched = None
        oom = {"matched": matched, "evidence": "; ".join(evidence)}
    oom.update(
        check="oom-kill",
        gotchas=["U3", "U9", "U41"],
        action="Host-RAM OOM kill (exit 137, no traceback). Size DataLoader num_workers by the "
        "cgroup memory.max and per-worker RSS, share big arrays (memmap), then relaunch to resume. "
        "Do not shrink the batch for an unproven OOM.",
    )

    # 2. reboot
    bits = []
    if boot_now and boot_then:
        bits.append(f"boot_id {'changed' if rebooted_by_id else 'unchanged'}")
    if uptime is not None and started:
        bits.append(f"uptime {uptime:.0f}s vs {now - started:.0f}s since start")
    reboot = {
        "check": "reboot",
        "matched": rebooted if bits else None,
        "evidence": "; ".join(bits) or "no boot_id/uptime to compare",
        "gotchas": ["U3"],
        "action": "The box rebooted (the most missed cause: nothing in the log). Nothing on it "
        "survives a reboot except disk; check the platform console for maintenance or a restart, "
        "then relaunch the same command to resume from the last checkpoint.",
    }

    # 3. hang-up
    detach = state.get("detach") or {}
    tmux = facts.get("tmux") or {}
    detached = bool(detach.get("setsid") or detach.get("tmux") or detach.get("sighup_ignored"))
    hup_signal = state.get("signal") == "SIGHUP"
    hang = {
        "check": "hang-up",
        "matched": bool(hup_signal or (detach and not detached)),
        "evidence": (
            "job died by SIGHUP"
            if hup_signal
            else "runner was not detached (no setsid, tmux or nohup)"
            if detach and not detached
            else "runner was detached ("
            + ", ".join(k for k, v in sorted(detach.items()) if v)
            + f"); tmux session {tmux.get('session')} exists={tmux.get('exists')}"
            if detach
            else "no launch facts recorded"
        ),
        "gotchas": ["U3", "U18"],
        "action": "The SSH hang-up took the job with it. Launch under setsid/nohup or tmux "
        "(rgt's runner launch does), then relaunch to resume.",
    }

    # 4. manual kill / unknown
    manual = {
        "check": "manual-kill-or-unknown",
        "matched": True,
        "evidence": "no OOM, reboot or hang-up evidence",
        "gotchas": ["U3", "U4", "U1"],
        "action": "Probably an over-broad pkill -f (U4) or someone's kill. Check shell history "
        "and who else uses the box; a dropped poll connection is not a dead job. Relaunch to "
        "resume from the last checkpoint.",
    }
    return [oom, reboot, hang, manual]


def verdict(state, facts) -> dict:
    """Pure: the run's status after reconciling STATE (state.json or None) with FACTS.

    FACTS keys (all optional): now, job_alive, runner_alive, boot_id, uptime_s, oom_kill,
    dmesg_readable, dmesg_oom_lines, dmesg_xid_lines, tmux {session, exists}, heartbeat_age_s,
    log_age_s. Returns {status, summary, cause, ladder, gotchas, action, warnings}.
    """
    facts = facts or {}
    out = {
        "status": None,
        "summary": "",
        "cause": None,
        "ladder": [],
        "gotchas": [],
        "action": None,
        "warnings": [],
    }
    if facts.get("dmesg_xid_lines"):
        out["warnings"].append(
            "GPU Xid in the kernel log (U22): Xid 48/79 mean a hardware fault — re-rent; "
            "last: " + facts["dmesg_xid_lines"][-1].strip()
        )
    if not state:
        if facts.get("runner_alive"):
            out.update(status="starting", summary="runner alive, state.json not written yet")
            return out
        state = {}
        claimed = None
    else:
        claimed = state.get("status")

    if claimed in TERMINAL:
        out["status"] = claimed
        exit_code, sig = state.get("exit_code"), state.get("signal")
        if claimed == "succeeded":
            out["summary"] = "job exited 0" + (
                "; outputs copied to the durable tier and verified" if state.get("sync") else ""
            )
        elif claimed == "sync-failed" and (state.get("sync") or {}).get("missing"):
            out.update(
                summary="job exited 0 but declared outputs are missing: " + str(state.get("error")),
                gotchas=["U33"],
                action="Nothing was copied. Check the job wrote its outputs and that the outputs "
                "patterns are relative to the workdir; do not tear down before a verified pull.",
            )
        elif claimed == "sync-failed":
            out.update(
                summary="job exited 0 but the durable copy failed: " + str(state.get("error")),
                gotchas=["U33", "AD4/U7", "U6"],
                action="The data-disk copy is the only good one: do not tear down. Free bytes or "
                "inodes on the durable tier (df -h and df -i), then copy again and verify.",
            )
        elif claimed == "stopped":
            number = getattr(signal, str(state.get("stop_signal")), None)
            how = (f"exited {exit_code} on it" if exit_code is None or number is None
                   or exit_code != 128 + number else f"was killed by it (exit {exit_code})")
            out.update(
                summary=f"stopped by {state.get('stop_signal') or 'a signal'}: the job {how}",
                cause="stopped",
                action="Its checkpoints and log are its results: pull them. Relaunching resumes "
                "from the last checkpoint the trainer saved.",
            )
        elif exit_code == PREEMPTED_EXIT:
            out.update(
                summary="preempted: the trainer checkpointed and exited 85",
                cause="preempted",
                action="Requeue / relaunch the same command; it resumes from the checkpoint.",
            )
        elif sig == "SIGKILL" or exit_code == 137:
            ladder = _ladder(state, facts)
            oom = ladder[0]["matched"]
            out.update(
                summary="job killed by SIGKILL" + (" — OOM kill" if oom else ""),
                cause="oom-kill" if oom else "sigkill",
                gotchas=["U9", "U41", "U3"],
                action=ladder[0]["action"]
                if oom
                else "SIGKILL without OOM evidence: a manual "
                "or over-broad kill (U4), or an OOM the kernel log does not show (U9).",
            )
        elif sig in ("SIGTERM", "SIGINT") or exit_code in (143, 130):
            out.update(
                summary=f"job stopped by {sig or exit_code} (preemption or a stop)",
                cause="terminated",
            )
        else:
            out["summary"] = f"job exited with code {exit_code}; read the log tail"
        return out

    job_alive = facts.get("job_alive")
    runner_alive = facts.get("runner_alive")
    hb_age = facts.get("heartbeat_age_s")
    hb_every = float(state.get("heartbeat_s") or 10)
    if claimed == "running" and job_alive:
        out.update(status="running", summary="job process alive")
        if not runner_alive:
            out["warnings"].append(
                "the runner is gone but the job lives: its end will not be recorded in "
                "state.json; judge completion by artifacts"
            )
        elif hb_age is not None and hb_age > 3 * hb_every + 5:
            out["warnings"].append(f"runner heartbeat is {hb_age:.0f}s old")
        log_age = facts.get("log_age_s")
        if log_age is not None and log_age > LOG_QUIET_S:
            out["warnings"].append(
                f"log quiet for {log_age:.0f}s: maybe stdout buffering (U43) or a hang; "
                "judge by checkpoint mtimes"
            )
        return out
    if runner_alive and claimed in ("running", "starting"):
        out.update(
            status=claimed,
            summary="runner alive, job not yet started"
            if claimed == "starting"
            else "job exited; the runner is recording the result / syncing outputs",
        )
        return out

    # Neither process is alive, yet nobody recorded an end: the run vanished.
    ladder = _ladder(state, facts)
    cause = next(step for step in ladder if step["matched"])
    gotchas = []
    for step in ladder:
        for g in step["gotchas"]:
            if g not in gotchas:
                gotchas.append(g)
    out.update(
        status="vanished",
        summary=(
            "state.json says %s but neither the job nor the runner is alive"
            % (claimed or "nothing")
        ),
        cause=cause["check"],
        ladder=ladder,
        gotchas=gotchas,
        action=cause["action"],
    )
    return out


# ----------------------------------------------------------------------------- probe


def probe(run_dir: str, dirs=None, gpu_python=None, tail: int = 20, use_dmesg=True) -> dict:
    run_dir = os.path.abspath(run_dir)
    now = time.time()
    state = read_json(os.path.join(run_dir, "state.json"))
    spec = read_json(os.path.join(run_dir, "run.json")) or {}
    boot = boot_facts()
    same_boot = not (
        state and state.get("boot_id") and boot["boot_id"] and state["boot_id"] != boot["boot_id"]
    )
    st = state or {}
    runner_pid = st.get("runner_pid") or int_or_none(read_text(os.path.join(run_dir, "runner.pid")))
    job = process_facts(st.get("pid"), st.get("pid_start"), same_boot)
    runner = process_facts(runner_pid, st.get("runner_pid_start"), same_boot)
    run_id = st.get("run_id") or spec.get("run_id")
    tmux = tmux_facts(run_id)
    cgroup = cgroup_facts()
    started = st.get("started") or st.get("created")
    since = None
    if started and same_boot and boot["uptime_s"] is not None:
        since = boot["uptime_s"] - (now - started)
    dmesg = (
        dmesg_facts(since)
        if use_dmesg
        else {"readable": False, "error": "skipped", "oom_lines": [], "xid_lines": []}
    )
    if dirs is None:
        dirs = [run_dir] + ([spec["durable_dir"]] if spec.get("durable_dir") else [])
    log = log_facts(st.get("log") or os.path.join(run_dir, "log"), tail)
    home = (spec.get("env") or {}).get("RGT_CKPT_DIR") if isinstance(spec, dict) else None
    workdir = spec.get("workdir") or os.path.join(run_dir, "code")
    log["csv_metrics"] = csv_metrics([workdir] + ([home] if home else []))
    heartbeat_age = round(now - st["heartbeat"], 1) if st.get("heartbeat") else None
    facts = {
        "now": now,
        "job_alive": job["alive"],
        "runner_alive": runner["alive"],
        "boot_id": boot["boot_id"],
        "uptime_s": boot["uptime_s"],
        "oom_kill": cgroup["oom_kill"],
        "dmesg_readable": dmesg["readable"],
        "dmesg_oom_lines": dmesg["oom_lines"],
        "dmesg_xid_lines": dmesg["xid_lines"],
        "tmux": tmux,
        "heartbeat_age_s": heartbeat_age,
        "log_age_s": log["age_s"],
    }
    report = {
        "probe_version": PROBE_VERSION,
        "time": round(now, 3),
        "host": socket.gethostname(),
        "run_dir": run_dir,
        "run_id": run_id,
        "state": state,
        "job": job,
        "runner": runner,
        # every live process of this run, recorded or not (torchrun's workers, orphans of a
        # killed runner): [[pid, start], ...]
        "processes": sorted([pid, start] for pid, start in run_processes(
            run_dir, runner_pid if runner["alive"] else None).items()),
        "tmux": tmux,
        "heartbeat_age_s": heartbeat_age,
        "boot": dict(
            boot,
            state_boot_id=st.get("boot_id"),
            rebooted=None if not st.get("boot_id") else not same_boot,
        ),
        "cgroup": cgroup,
        "dmesg": dmesg,
        "disks": [disk_facts(d) for d in dirs],
        "log": log,
        "checkpoints": checkpoint_entries(home) if home and os.path.isdir(home) else [],
        "nvidia": nvidia_facts(),
        "gpu_python": python_facts(gpu_python) if gpu_python else None,
    }
    report["verdict"] = verdict(state, facts)
    return report


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--census"]:
        if len(args) < 2:
            sys.stderr.write("usage: python3 probe.py --census RGT_ROOT [RGT_ROOT ...]\n")
            return 2
        json.dump(census(args[1:]), sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    parser = argparse.ArgumentParser(prog="probe.py", description="rgt on-box run probe")
    parser.add_argument("run_dir")
    parser.add_argument(
        "--dirs", nargs="*", default=None, help="df -h/-i these (default: run dir and durable dir)"
    )
    parser.add_argument("--gpu-python", default=None, help="report torch/CUDA as seen by this PY")
    parser.add_argument("--tail", type=int, default=20, help="log lines to return")
    parser.add_argument("--no-dmesg", action="store_true", help="skip the kernel log")
    args = parser.parse_args(args)
    report = probe(args.run_dir, args.dirs, args.gpu_python, args.tail, not args.no_dmesg)
    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
