"""The flat summary of a run's state that every verb reads (`watch`, `pull`, `down`, `ls`).

Every platform's `state` returns these keys (`summarize({})` gives them all, empty), whatever
it asked: the on-box probe, squeue/sacct, a pod's phase. The on-box probe reports what the
trainer itself writes (`rgt.onbox.probe.parse_metrics`: HF dict lines, JSON lines, `step N
loss X` text; a tqdm bar for step/total/rate/ETA; Lightning's CSVLogger `metrics.csv`) and the
names in the job's checkpoint home; `training` and `last_checkpoint` merge them. A value
nobody reported is left out, never guessed: no total, no ETA.
"""

from __future__ import annotations

import re
import time
from typing import Any

from rgt.boxread import NUMBER, TEXT, checked
from rgt.ckpt import newest

EXIT_PREEMPTED = 85  # rgt.ckpt's documented exit code for "checkpointed on a signal, requeue me"
CHECKPOINT_KINDS = ("rgt.ckpt", "lightning", "torch", "safetensors")


# What of the probe's answer the verbs act on, and the types it must have (`rgt.boxread`):
# a field of another type is garbage, refused in one line before any `.get` runs on it.
_METRICS = {"step": int, "loss": NUMBER, "loss_key": TEXT, "epoch": NUMBER, "source": TEXT,
            "total": int, "epochs": int}
PROBE_SHAPE = {
    "state": {"status": TEXT, "exit_code": int, "signal": TEXT, "started": NUMBER,
              "ended": NUMBER, "error": TEXT, "stop_signal": TEXT,
              "sync": {"error": TEXT, "missing": [TEXT]},
              "restarts": [{"exit_code": int, "signal": TEXT, "cause": TEXT}]},
    "verdict": {"status": TEXT, "summary": TEXT, "cause": TEXT, "action": TEXT,
                "ladder": [dict], "gotchas": [TEXT], "warnings": [TEXT]},
    "log": {"last_metrics": TEXT, "tail": [TEXT], "metrics": _METRICS,
            "csv_metrics": _METRICS, "progress": {"step": int, "total": int, "rate": NUMBER,
                                                  "eta_s": NUMBER, "epoch": int,
                                                  "epoch_steps": int, "epochs": int}},
    "heartbeat_age_s": NUMBER,
    "checkpoints": [{"name": TEXT, "mtime": NUMBER, "dir": bool}],
    "disks": [{"path": TEXT, "bytes_used": int, "bytes_pct": NUMBER, "inodes_pct": NUMBER}],
}


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """Flatten the on-box probe's report into what the verbs and the display need; a report
    whose fields have other types than PROBE_SHAPE says is refused (BoxGarbage)."""
    report = checked(report, PROBE_SHAPE, "the on-box probe's answer") or {}
    state = report.get("state") or {}
    verdict = report.get("verdict") or {}
    log = report.get("log") or {}
    status = verdict.get("status") or state.get("status") or "unknown"
    exit_code = state.get("exit_code")
    if status == "failed" and exit_code == EXIT_PREEMPTED:
        status = "preempted"
    started, ended = state.get("started"), state.get("ended")
    causes = []
    said = verdict.get("summary")
    if status == "stopped":  # what the stop kept is the first thing to know
        causes.append(stop_line({"stop_signal": state.get("stop_signal"),
                                 "last_checkpoint": last_checkpoint(report.get("checkpoints"))}))
        if said and _plain(said).startswith("stopped by"):
            said = None  # the probe's own `stopped by SIGTERM: …`; the exit code is on show
    if said and status not in ("running", "succeeded"):
        causes.append(said)
    # The probe's cause is a slug: for an end the runner recorded it names what the summary
    # says in words (`sigkill`, `terminated`); only the ladder's pick, for a run that
    # vanished, is news.
    cause = verdict.get("cause")
    if cause and verdict.get("ladder") and _plain(cause) not in _plain(" ".join(causes)):
        causes.append(f"likely cause: {cause}")
    if verdict.get("gotchas"):
        causes.append("see " + ", ".join(verdict["gotchas"]))
    return {
        "status": status,
        "exit_code": exit_code,
        "signal": state.get("signal"),
        "started": started,
        "ended": ended,
        "duration": (ended or time.time()) - started if started else None,
        "heartbeat_age": report.get("heartbeat_age_s"),
        "causes": causes,
        "advice": verdict.get("action") or "",
        "probe_warnings": verdict.get("warnings") or [],
        "sync": state.get("sync") or {},
        "restarts": state.get("restarts") or [],
        "error": state.get("error"),
        "metrics": log.get("last_metrics"),
        "training": training(log),
        "last_checkpoint": last_checkpoint(report.get("checkpoints")),
        "stop_signal": state.get("stop_signal"),
        "log_tail": log.get("tail") or [],
        "disks": {d["path"]: d for d in report.get("disks") or [] if "path" in d},
    }


def training(log: dict[str, Any]) -> dict[str, Any]:
    """{step, total, loss, loss_key, epoch, rate, eta_s, source} from the probe's log facts."""
    line = log.get("metrics") or {}
    csv = log.get("csv_metrics") or {}
    bar = log.get("progress") or {}
    # the log line is the freshest; metrics.csv is flushed every 100 steps by Lightning
    step_from = max((m for m in (line, csv) if m.get("step") is not None),
                    key=lambda m: m["step"], default={})
    out: dict[str, Any] = {}
    for key in ("loss", "loss_key", "epoch"):
        value = line.get(key, csv.get(key))
        if value is not None:
            out[key] = value
    step = bar.get("step", step_from.get("step"))
    if bar.get("step") is None and step_from is line and line.get("total"):
        out["total"] = line["total"]  # `it 80/200`: the log line's own count
    if "epoch" not in out and bar.get("epoch") is not None:
        out["epoch"] = bar["epoch"]  # `Epoch 3 | Batchsize: 32 | Steps: 63` (DDP's example)
    if step is None and bar.get("epoch") is not None and bar.get("epoch_steps"):
        # printed as each epoch starts: the epochs before it are done, each epoch_steps long
        step = bar["epoch"] * bar["epoch_steps"]
        out["epoch_steps"] = bar["epoch_steps"]
    if step is not None:
        out["step"] = step
    epochs = line.get("epochs") or bar.get("epochs")
    if epochs:
        out["epochs"] = epochs
        if out.get("epoch_steps") and "total" not in out:
            out["total"] = epochs * out["epoch_steps"]
    for key in ("total", "rate", "eta_s"):
        if bar.get(key) is not None:
            out[key] = bar[key]
    sources = [name for name, part in (("log", line), ("progress bar", bar)) if part]
    if csv:
        sources.append(csv.get("source") or "metrics.csv")
    if sources:
        out["source"] = ", ".join(sources)
    return out


def last_checkpoint(entries: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The newest checkpoint among the checkpoint home's entries, by the one definition
    `pull`, `resume` and `rgt ckpt ls` share (`rgt.ckpt.newest`: the last written; its step
    from its name)."""
    return newest.newest_listed(entries or [], CHECKPOINT_KINDS)


def stop_line(summary: dict[str, Any]) -> str:
    """`stopped by SIGTERM, last checkpoint step 1500 (checkpoint-1500)`: what a stop kept."""
    ckpt = summary.get("last_checkpoint")
    signal = summary.get("stop_signal") or "a signal"
    if not ckpt:
        return f"stopped by {signal}; no checkpoint in the checkpoint home"
    step = f"step {ckpt['step']} ({ckpt['name']})" if ckpt.get("step") is not None \
        else ckpt["name"]
    return f"stopped by {signal}, last checkpoint {step}"


def _plain(text: str) -> str:
    """TEXT for comparing what two lines say: lower case, dashes and underscores as spaces."""
    return " ".join(re.split(r"[\s_\-\u2013\u2014]+", text.lower())).strip()
