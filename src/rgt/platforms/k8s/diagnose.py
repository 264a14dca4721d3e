"""A run's state from what the API says about its Job, its pods and their events.

The Job's conditions decide the end (Complete → succeeded; Failed → failed, with the reason:
BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy); while it lives, its newest pod says
where it is (Pending and why, Running, a replacement after an eviction). Every message the
cluster wrote — pod reasons, waiting reasons, events, the log tail — is matched against the
profile's gotchas (K8S1 Insufficient nvidia.com/gpu, K8S3 ImagePullBackOff, K8S4 Multi-Attach,
K8S5 evicted for ephemeral-storage, K8S6 no GPU in the container), so the cause comes with its
fix. What the API returns is read defensively: a missing field is "unknown", never a crash.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from functools import lru_cache
from typing import Any

from rgt.profiles import load_profile
from rgt.remote.summary import EXIT_PREEMPTED, summarize

GONE_REASONS = ("TaintManagerEviction", "Evicted", "Preempting", "Preempted", "NodeNotReady")
IMAGE_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
FATAL_IMAGE = re.compile(r"not found|manifest unknown|does not exist|unauthorized|denied|"
                         r"InvalidImageName|invalid reference", re.IGNORECASE)


@lru_cache(maxsize=1)
def gotchas() -> list[tuple[str, str, str, list[re.Pattern]]]:
    """(id, title, fix, patterns) of the kubernetes profile's gotchas that can be detected."""
    out = []
    for g in load_profile("kubernetes").gotchas:
        if g.detect and g.detect.patterns:
            out.append((g.id, g.title, " ".join(g.fix.split()),
                        [re.compile(p) for p in g.detect.patterns]))
    return out


def match_gotchas(texts: list[str]) -> list[tuple[str, str, str]]:
    """(id, title, fix) of every gotcha some text shows, in the profile's order."""
    found = []
    for gid, title, fix, patterns in gotchas():
        if any(p.search(t) for p in patterns for t in texts if t):
            found.append((gid, title, fix))
    return found


def stamp(value: Any) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def container(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return statuses[0] if statuses else {}


def pod_texts(pod: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    """Every message about this pod: its reason, waiting/terminated reasons, its events."""
    status = pod.get("status") or {}
    name = (pod.get("metadata") or {}).get("name")
    texts = [str(status.get("reason") or ""), str(status.get("message") or "")]
    for cond in status.get("conditions") or []:
        texts.append(f"{cond.get('reason') or ''}: {cond.get('message') or ''}")
    state = container(pod).get("state") or {}
    for part in state.values():
        if isinstance(part, dict):
            texts.append(f"{part.get('reason') or ''} {part.get('message') or ''}")
    texts += [f"{e.get('reason') or ''} {e.get('message') or ''}" for e in events
              if (e.get("involvedObject") or {}).get("name") == name]
    return [t.strip() for t in texts if t and t.strip(" :")]


def pod_line(pod: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """One line on where a pod is: `pod X Pending: 0/3 nodes are available: …`."""
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    state = container(pod).get("state") or {}
    if status.get("reason"):
        why = f"{status['reason']}: {status.get('message') or ''}".rstrip(": ")
    elif "waiting" in state:
        why = f"{state['waiting'].get('reason') or ''}: {state['waiting'].get('message') or ''}"
    elif "terminated" in state:
        term = state["terminated"]
        why = f"exit {term.get('exitCode')} ({term.get('reason') or ''})"
    else:
        unscheduled = next((c for c in status.get("conditions") or []
                            if c.get("type") == "PodScheduled" and c.get("status") == "False"),
                           None)
        why = (unscheduled or {}).get("message") or ""
    if why.strip(": ") in ("", "ContainerCreating", "PodInitializing"):
        # a generic wait: the newest warning about this pod says what it waits for
        warn = [e for e in events if (e.get("involvedObject") or {}).get("name") == name
                and e.get("type") == "Warning"]
        if warn:
            base, message = why.strip(": "), warn[-1].get("message", "")
            why = f"{base} ({message})" if base else message
    return f"pod {name} {phase}" + (f": {why.strip(': ')}" if why.strip(": ") else "")


def exit_code(pod: dict[str, Any]) -> int | None:
    state = container(pod).get("state") or {}
    term = state.get("terminated") or (container(pod).get("lastState") or {}).get("terminated")
    return term.get("exitCode") if isinstance(term, dict) else None


def image_failure(pod: dict[str, Any]) -> str | None:
    """The pull error of a pod whose image cannot be pulled (not merely slow), else None."""
    waiting = (container(pod).get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in IMAGE_WAITING and FATAL_IMAGE.search(
            f"{waiting.get('reason')} {waiting.get('message') or ''}"):
        return f"{waiting.get('reason')}: {waiting.get('message') or ''}".rstrip(": ")
    return None


def job_summary(job: dict[str, Any] | None, pods: list[dict[str, Any]],
                events: list[dict[str, Any]], log_tail: list[str],
                last_status: str = "starting") -> dict[str, Any]:
    """The run's summary (the keys of rgt.remote.summary.summarize)."""
    summary = summarize({})
    summary["log_tail"] = log_tail
    pods = sorted(pods, key=lambda p: stamp((p.get("metadata") or {})
                                            .get("creationTimestamp")) or 0)
    if job is None:
        ended = last_status not in ("starting", "running", "paused", "resuming")
        summary.update(status=last_status if ended else "vanished", causes=[
            "the Job is gone from the cluster (deleted, or garbage-collected after its "
            "ttlSecondsAfterFinished)" + ("; this is the last status rgt saw" if ended else
                                          ": nothing runs it any more")])
        return summary
    status = job.get("status") or {}
    started = stamp(status.get("startTime"))
    ended = stamp(status.get("completionTime"))
    summary.update(started=started, ended=ended,
                   duration=((ended or time.time()) - started) if started else None)
    newest = pods[-1] if pods else None
    causes: list[str] = []
    restarts = []
    for pod in pods[:-1] if newest and (newest.get("status") or {}).get("phase") in (
            "Pending", "Running") else pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Failed":
            reason = (pod.get("status") or {}).get("reason") or "failed"
            restarts.append({"pod": pod["metadata"]["name"], "exit_code": exit_code(pod),
                             "cause": f"{reason}: pod {pod['metadata']['name']}",
                             "why": pod_line(pod, events)})
    # a pod deleted by the cluster (lost node, API eviction) is gone; its events stay an hour
    present = {(p.get("metadata") or {}).get("name") for p in pods}
    for event in events:
        name = (event.get("involvedObject") or {}).get("name")
        if (event.get("involvedObject") or {}).get("kind") == "Pod" and name not in present \
                and event.get("reason") in GONE_REASONS:
            present.add(name)
            restarts.append({"pod": name, "exit_code": None,
                             "cause": f"{event['reason']}: pod {name}",
                             "why": f"pod {name} deleted by the cluster: {event['reason']}: "
                                    f"{event.get('message') or ''}".rstrip(": ")})
    summary["restarts"] = restarts
    done = condition(job, "Complete") or condition(job, "SuccessCriteriaMet")
    failed = condition(job, "Failed") or condition(job, "FailureTarget")
    texts = [t for p in pods for t in pod_texts(p, events)] + list(log_tail)
    found = match_gotchas(texts)
    if done:
        summary.update(status="succeeded", exit_code=0)
    elif failed:
        code = exit_code(newest) if newest else None
        reason = failed.get("reason") or ""
        summary.update(status="preempted" if code == EXIT_PREEMPTED else "failed",
                       exit_code=code)
        if reason == "DeadlineExceeded":
            causes.append("the Job ran past its activeDeadlineSeconds (resources.time) and "
                          "Kubernetes ended it; its checkpoints are on the PVC: raise the time "
                          "and `rgt resume`")
        else:
            causes.append(f"the Job failed: {reason} {failed.get('message') or ''}".strip())
    elif condition(job, "Suspended"):
        summary["status"] = "paused"
        causes.append("the Job is suspended (spec.suspend); `kubectl patch` it to resume")
    elif newest is None:
        summary["status"] = "starting"
        causes.append("the Job has no pod yet")
    else:
        phase = (newest.get("status") or {}).get("phase")
        running = "running" in (container(newest).get("state") or {})
        summary["status"] = "running" if phase == "Running" and running else "starting"
        if summary["status"] == "starting" or restarts:
            causes.append(pod_line(newest, events))
        if restarts and summary["status"] in ("running", "starting"):
            last = restarts[-1]
            causes.insert(0, f"{last['why']}; the Job controller replaced it with "
                             f"{newest['metadata']['name']}, which resumes from the checkpoint "
                             "home on the PVC")
    for gid, title, fix in found:
        causes.append(f"{gid}: {title} — {fix}")
    summary["causes"] = causes
    if any(gid == "K8S6" for gid, _, _ in found):
        summary["probe_warnings"] = ["K8S6: the trainer sees no GPU; it is training on the "
                                     "CPU (check resources.limits nvidia.com/gpu and the "
                                     "node's NVIDIA runtime)"]
    return summary


def pod_trouble(kube: Any, pod: dict[str, Any]) -> tuple[bool, str] | None:
    """Why a pod that should be starting is not: (fatal, message), or None when nothing is
    wrong yet. Fatal: waiting cannot help (the image does not exist or may not be pulled);
    otherwise it may still start (a node being added, a volume being provisioned)."""
    if not pod:
        return None
    failure = image_failure(pod)
    if failure:
        return True, (f"{failure} — K8S3: the image cannot be pulled; check the digest exists "
                      "(`docker buildx imagetools inspect`), and for a private registry add "
                      "imagePullSecrets (RGT_K8S_PULL_SECRET)")
    name = (pod.get("metadata") or {}).get("name", "")
    try:
        events = kube.items("/api/v1", "events", fields=f"involvedObject.name={name}")
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                events += kube.items("/api/v1", "events", fields=f"involvedObject.name={claim}")
    except Exception:  # noqa: BLE001 — events are a hint; RBAC may hide them
        events = []
    warnings = [e for e in events if e.get("type") == "Warning"]
    if not warnings:
        return None
    last = warnings[-1]
    text = f"{last.get('reason') or ''}: {last.get('message') or ''}"
    found = match_gotchas([text])
    hint = f" — {found[0][0]}: {found[0][2]}" if found else ""
    return False, text + hint
