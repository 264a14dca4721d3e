"""The fake's Job controller: the rules of kubernetes.io/docs/concepts/workloads/controllers/job/
that rgt relies on (pod creation, podFailurePolicy, backoffLimit, Indexed completion,
activeDeadlineSeconds, ttlSecondsAfterFinished)."""

from __future__ import annotations

import calendar
import copy
import os
import time

from kube_api import now_iso


def _stamp(value: str | None) -> float:
    return calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")) if value else 0.0


def _exit_code(pod: dict) -> int | None:
    for cs in pod["status"].get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term:
            return term.get("exitCode")
    return None


def policy_action(job: dict, pod: dict) -> str:
    """podFailurePolicy: the first rule that matches decides (Ignore, FailJob, Count)."""
    for rule in (job["spec"].get("podFailurePolicy") or {}).get("rules") or []:
        codes = rule.get("onExitCodes")
        if codes:
            code = _exit_code(pod)
            inside = code is not None and code in codes.get("values", [])
            if code not in (None, 0) and inside == (codes.get("operator") == "In"):
                return rule["action"]
        for want in rule.get("onPodConditions") or []:
            for cond in pod["status"].get("conditions") or []:
                if cond["type"] == want["type"] and cond["status"] == want.get("status",
                                                                               "True"):
                    return rule["action"]
    return "Count"


def finish(cluster, job: dict, kind: str, reason: str, message: str) -> None:
    status = job["status"]
    status.setdefault("conditions", []).append({
        "type": kind, "status": "True", "reason": reason, "message": message,
        "lastProbeTime": now_iso(), "lastTransitionTime": now_iso()})
    if kind == "Complete":
        status["completionTime"] = now_iso()
    status["_finished"] = time.time()
    cluster.api.event(job, "Completed" if kind == "Complete" else reason,
                      message or "Job completed", "Normal" if kind == "Complete" else "Warning",
                      "job-controller")
    for pod in cluster._pods_of(job):
        if pod["status"]["phase"] in ("Pending", "Running"):
            cluster.terminate(pod, None, reason=None)


def reconcile(cluster, job: dict) -> None:
    spec, status = job["spec"], job["status"]
    meta = job["metadata"]
    if status.get("_finished"):
        ttl = spec.get("ttlSecondsAfterFinished")
        if ttl is not None and time.time() - status["_finished"] >= ttl:
            cluster.delete("jobs", meta["namespace"], meta["name"], propagation="Background",
                           grace=None)
        return
    status.setdefault("startTime", now_iso())
    pods = cluster._pods_of(job) + job.get("_gone", [])
    seen = job.setdefault("_seen", {})
    counted = ignored = 0
    for pod in pods:
        uid = pod["metadata"]["uid"]
        if pod["status"]["phase"] != "Failed":
            continue
        if uid not in seen:
            seen[uid] = policy_action(job, pod)
            if seen[uid] == "FailJob":
                finish(cluster, job, "Failed", "PodFailurePolicy",
                       f"Container train for pod {meta['namespace']}/{pod['metadata']['name']} "
                       f"failed with exit code {_exit_code(pod)} matching FailJob rule")
                return
        counted += seen[uid] == "Count"
        ignored += seen[uid] == "Ignore"
    indexed = spec.get("completionMode") == "Indexed"
    done_indexes = sorted({int(p["metadata"]["annotations"]["batch.kubernetes.io/"
                                                            "job-completion-index"])
                           for p in pods if p["status"]["phase"] == "Succeeded" and indexed})
    succeeded = len(done_indexes) if indexed else sum(p["status"]["phase"] == "Succeeded"
                                                      for p in pods)
    active = [p for p in pods if p["status"]["phase"] in ("Pending", "Running")
              and not p["metadata"].get("deletionTimestamp")]
    status.update(active=len(active), succeeded=succeeded, failed=counted,
                  ready=sum(p["status"]["phase"] == "Running" for p in active),
                  terminating=sum(bool(p["metadata"].get("deletionTimestamp")) for p in pods
                                  if p["status"]["phase"] in ("Pending", "Running")))
    if indexed:
        status["completedIndexes"] = ",".join(map(str, done_indexes))
    cluster.api.touch(job)
    if succeeded >= spec["completions"]:
        finish(cluster, job, "Complete", "", "")
        return
    if counted > spec["backoffLimit"]:
        finish(cluster, job, "Failed", "BackoffLimitExceeded",
               "Job has reached the specified backoff limit")
        return
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and time.time() - _stamp(status["startTime"]) > deadline:
        finish(cluster, job, "Failed", "DeadlineExceeded",
               "Job was active longer than specified deadline")
        return
    last_failure = max((_stamp(p["status"]["containerStatuses"][0]["state"]["terminated"]
                               .get("finishedAt")) for p in pods
                        if p["status"]["phase"] == "Failed" and p["status"].get(
                            "containerStatuses") and "terminated" in
                        p["status"]["containerStatuses"][0]["state"]), default=0)
    if len([p for p in pods if p["status"]["phase"] in ("Pending", "Running")]) >= \
            spec["parallelism"] or time.time() - last_failure < cluster.retry_delay_s:
        return
    busy = {p["metadata"].get("annotations", {}).get("batch.kubernetes.io/job-completion-index")
            for p in pods if p["status"]["phase"] in ("Pending", "Running")}
    wanted = spec["parallelism"] - len(active)
    if indexed:
        todo = [str(i) for i in range(spec["completions"]) if i not in done_indexes
                and str(i) not in busy][:wanted]
    else:
        todo = [None] * min(wanted, spec["completions"] - succeeded - len(active))
    for index in todo:
        create_pod(cluster, job, index)


def create_pod(cluster, job: dict, index: str | None) -> None:
    template = copy.deepcopy(job["spec"]["template"])
    meta = template.setdefault("metadata", {})
    name = job["metadata"]["name"] + (f"-{index}" if index is not None else "")
    meta["name"] = f"{name}-{os.urandom(3).hex()[:5]}"
    meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "controller": True,
                                "blockOwnerDeletion": True, "name": job["metadata"]["name"],
                                "uid": job["metadata"]["uid"]}]
    if index is not None:
        meta.setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = index
        meta["labels"]["batch.kubernetes.io/job-completion-index"] = index
        template["spec"]["hostname"] = name
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}
    ns = job["metadata"]["namespace"]
    cluster.admit("pods", ns, pod)
    cluster.api.put("pods", ns, pod)
    cluster.api.event(job, "SuccessfulCreate", f"Created pod: {meta['name']}",
                      component="job-controller")
