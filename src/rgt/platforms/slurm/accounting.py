"""What Slurm says about a job, read: `scontrol show job`, `sacct` or the job completion log
(`job_records`, in that order) parsed into records (`parse_records`) and flattened into the
summary `rgt watch` shows (`summarize_jobs`): the rgt status of each Slurm state, an array's
cells, requeues, an OUT_OF_MEMORY with the --mem to ask for (SLURM4), walltime used."""

from __future__ import annotations

import math
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rgt.platforms.slurm.script import EXIT_PREEMPTED
from rgt.transport import Transport

LOG_TAIL_LINES = 40

LIVE_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
               "RESIZING", "SUSPENDED", "RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT",
               "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "STOPPED"}
METRICS_LINE = re.compile(r"\bstep=\d+\b.*\b[A-Za-z_]\w*=[-+]?\d")
OOM_LINE = re.compile(r"exceeded memory limit \((\d+) > (\d+)\)|oom[-_ ]kill", re.IGNORECASE)


def mem_advice_mb(max_rss_kb: float) -> int:
    """SLURM4: raise --mem to MaxRSS × 1.2 (in MB, rounded up)."""
    return math.ceil(max_rss_kb * 1.2 / 1024)


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
        return state_summary("unknown", causes=["Slurm no longer knows this job and no "
                                                "accounting or completion log has it"])
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
    return state_summary(status, exit_code=exit_code, signal=worst[4] or None,
                         started=started, ended=ended, causes=causes, advice=worst[6], log=log,
                         slurm={"states": {t[0]: t[1] for t in per_task},
                                "reason": worst[7].get("Reason"), "walltime_s": walltime})


def state_summary(status: str, *, exit_code: int | None = None, signal: int | None = None,
                  started: float | None = None, ended: float | None = None,
                  causes: list[str] | None = None, advice: str = "", log: str = "",
                  slurm: dict | None = None, error: str | None = None) -> dict[str, Any]:
    """The summary `rgt watch` reads, in the shape every platform's `state` returns."""
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
