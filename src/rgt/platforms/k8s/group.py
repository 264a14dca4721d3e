"""Multi-node training on Kubernetes (resources.nodes: N > 1): one Indexed Job of N pods and a
headless Service, plain batch/v1 and core/v1 that every cluster serves.

* The Job: completionMode Indexed, completions = parallelism = N. Pod i gets
  JOB_COMPLETION_INDEX=i (its rank; pod 0 is the head) and the hostname `<job>-<i>`; with the
  template's `subdomain` naming the Service, the cluster's DNS answers `<job>-<i>.<service>`
  with pod i's IP. Those names, head first, are the contract's addresses (rgt.remote.node_env):
  they are known before any pod exists, so every node's list is fixed at submit time.
* The Service: headless (clusterIP: None), selecting the run's pods by rgt's own labels, with
  publishNotReadyAddresses so a pod's name resolves as soon as it has an IP (the rendezvous
  starts before any readiness probe would pass). It is created before the Job, so no pod
  starts without its name, then given the Job as its owner, so the garbage collector deletes
  it with the Job however the Job goes (cancel, `kubectl delete`, ttlSecondsAfterFinished);
  cancel and `down` also delete it by name and label (a laptop that died between the two
  calls left an unowned one; it holds no IP and costs nothing meanwhile).
* Failure: one pod failing fails the whole Job. backoffLimit 0, and a podFailurePolicy whose
  rules all say FailJob (any non-zero exit of the trainer, a disruption). A Job controller
  that replaced pod i alone would start a lone worker whose peers have already left the
  rendezvous (torchrun's default is no restarts), and the survivors would wait in a collective
  until gloo/NCCL time out: the whole group is the unit. On FailJob Kubernetes terminates the
  other pods at once; `rgt resume` starts the group again from the checkpoint home on the
  claim, which every pod mounts (so the claim must be ReadWriteMany).
* Not gang-scheduled: a pod that finds no room stays Pending while the others wait at the
  rendezvous until torchrun gives up on it. JobSet or Kueue would gang-schedule;
  `rgt audit` says whether the cluster serves JobSet or the training operator's PyTorchJob,
  as information — rgt submits the Indexed Job either way, the same on every cluster.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any

from rgt.errors import UserError
from rgt.platforms.k8s.api import CORE, ApiError, Kube
from rgt.platforms.k8s.diagnose import (
    condition,
    container,
    exit_code,
    job_summary,
    pod_line,
    stamp,
)
from rgt.platforms.k8s.manifests import (
    BOX_LABEL,
    CONTAINER,
    PART_LABEL,
    RUN_LABEL,
    label_value,
    labels,
)
from rgt.platforms.slurm.script import ENV_NPROC_PER_NODE, ENV_RDZV_PORT
from rgt.remote import node_env
from rgt.remote.launchers import refuse_lone_launchers, torchrun_command
from rgt.remote.summary import EXIT_PREEMPTED
from rgt.spec import JobSpec

INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
RANK_NAMES = node_env.RANK_NAMES + node_env.SETUP_RANK_NAMES  # set per pod, not in the env
# what the cluster may serve besides batch/v1: group → (name, the resource that makes it one)
ENGINES = {"jobset.x-k8s.io": ("JobSet", "jobsets"),
           "kubeflow.org": ("PyTorchJob (Kubeflow training operator)", "pytorchjobs"),
           "trainer.kubeflow.org": ("TrainJob (Kubeflow Trainer)", "trainjobs")}


def addresses(job: str, service: str, nodes: int) -> list[str]:
    """Every pod's DNS name, head first: `<job>-<i>.<service>` resolves through the pod's
    search path (`<namespace>.svc.<cluster domain>`) whatever the cluster domain is."""
    return [f"{job}-{i}.{service}" for i in range(nodes)]


def group_env(job: str, service: str, nodes: int, *, gpus_per_node: int, port: int
              ) -> dict[str, str]:
    """The contract's values every pod shares; the rank comes from JOB_COMPLETION_INDEX in the
    pod's script (`rank_line`)."""
    return node_env.group(addresses(job, service, nodes), gpus_per_node=gpus_per_node,
                          port=port)


def rank_lines() -> list[str]:
    """The pod script's first lines: this pod's rank is its completion index."""
    return [': "${JOB_COMPLETION_INDEX:?not a pod of an Indexed Job}"',
            node_env.allocation_rank_exports("JOB_COMPLETION_INDEX")]


def group_command(spec: JobSpec, env: dict[str, str], name: str) -> str:
    """A multi-node job: the contract's values in every pod's env (the rank from the
    completion index, set by the script), and the command each pod runs: an rgt spec's
    `run` is one worker, started under torchrun (meeting on the head pod); a SkyPilot or
    dstack task's `run` runs as written on every node, as those tools run it."""
    r = spec.resources
    refuse_for_group(r.nodes, grid=bool(spec.grid), recover=spec.recover is not None)
    refuse_lone_launchers(spec.run, r.nodes)
    try:
        port = int(spec.env.get(ENV_RDZV_PORT) or node_env.RDZV_PORT)
        nproc = int(spec.env.get(ENV_NPROC_PER_NODE) or max(1, r.gpu_count))
    except ValueError:
        raise UserError(f"{ENV_RDZV_PORT} and {ENV_NPROC_PER_NODE} must be whole "
                        "numbers") from None
    if not 0 < port < 65536 or nproc < 1:
        raise UserError(f"{ENV_RDZV_PORT} must be a port (1-65535) and "
                        f"{ENV_NPROC_PER_NODE} at least 1")
    for rank_name in RANK_NAMES:  # one machine's "0": each pod's script sets its own
        env.pop(rank_name, None)
    env.update(group_env(name, name, r.nodes, gpus_per_node=r.gpu_count, port=port))
    if spec.dialect != "rgt":
        return spec.run
    return torchrun_command(spec.run, nproc, port=port)


def service_manifest(*, name: str, box: str, run_id: str) -> dict[str, Any]:
    """The headless Service that gives pod i the name `<job>-<i>.<name>`."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": labels(box, run_id)},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {BOX_LABEL: label_value(box), RUN_LABEL: label_value(run_id),
                                  PART_LABEL: "job"}}}


def own_service(kube: Kube, service: str, job: dict[str, Any]) -> bool:
    """Make the created Job the Service's owner (a merge patch); False where it could not be
    (RBAC without `patch services`: cancel and `down` still delete the Service)."""
    meta = job.get("metadata") or {}
    if not meta.get("uid") or not meta.get("name"):
        return False
    try:
        kube.patch(kube.ns(CORE, "services", service), {"metadata": {"ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
             "uid": meta["uid"]}]}})
    except ApiError:
        return False
    return True


def group_spec(nodes: int, service: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Job spec's group fields, the pod template's): see the module's doc for why."""
    job = {"completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
           "backoffLimit": 0,
           "podFailurePolicy": {"rules": [
               {"action": "FailJob", "onExitCodes": {"containerName": CONTAINER,
                                                     "operator": "NotIn", "values": [0]}},
               {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget",
                                                          "status": "True"}]},
           ]}}
    return job, {"subdomain": service}


def refuse_for_group(nodes: int, *, grid: bool, recover: bool) -> None:
    if grid:
        raise UserError(f"resources.nodes={nodes} with a grid: a multi-node sweep is not "
                        "supported on Kubernetes; sweep single-node cells, or run each "
                        "multi-node configuration as its own job")
    if recover:
        raise UserError(f"recover: with resources.nodes={nodes} on Kubernetes: the Job "
                        "controller restarts pods one at a time, and a lone replacement cannot "
                        "rejoin its group's rendezvous, so rgt fails the Job as a whole instead; "
                        "drop `recover:` and `rgt resume` the run (it continues from the "
                        "checkpoint home on the PVC)")


def refuse_claim(kube: Kube, claim: str, nodes: int) -> None:
    """Every pod mounts the box's claim: on a ReadWriteOnce claim the pods scheduled to other
    nodes wait forever for the volume (Multi-Attach, K8S4)."""
    pvc = kube.find(kube.ns(CORE, "persistentvolumeclaims", claim)) or {}
    modes = (pvc.get("spec") or {}).get("accessModes") or []
    if pvc and "ReadWriteMany" not in modes:
        raise UserError(f"resources.nodes={nodes}: the box's PVC {claim} is "
                        f"{', '.join(modes) or 'of an unknown access mode'}, and the job's "
                        f"{nodes} pods, each on its own node, all mount it: all but one would "
                        "wait for the volume forever (Multi-Attach, K8S4). Make a box with a "
                        "shared claim: `rgt up NAME --profile kubernetes --access-mode "
                        "ReadWriteMany --storage-class CLASS` (NFS, CephFS, EFS, Filestore, "
                        "Azure Files)")


# ----------------------------------------------------------------------------- watch


def index_of(pod: dict[str, Any]) -> int:
    meta = pod.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(INDEX_ANNOTATION) or \
        (meta.get("labels") or {}).get(INDEX_ANNOTATION)
    try:
        return int(str(raw))
    except ValueError:
        return -1


def by_rank(pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(pods, key=lambda p: (index_of(p), stamp((p.get("metadata") or {})
                                                          .get("creationTimestamp")) or 0))


_FAILJOB_POD = re.compile(r"\bfor pod [^/\s]+/(\S+) failed\b")


def first_failure(pods: Sequence[dict[str, Any]], job: dict[str, Any] | None = None
                  ) -> dict[str, Any] | None:
    """The pod that failed first (the cause; the others were stopped because of it): the one
    the Job controller names in its Failed condition ("Container train for pod NS/NAME failed
    with exit code 137 matching FailJob rule"), else the earliest to end — a survivor whose
    collective broke fails within the same second, so the cluster's word comes first."""
    cond = (condition(job, "Failed") or condition(job, "FailureTarget") or {}) if job else {}
    named = _FAILJOB_POD.search(str(cond.get("message") or ""))
    if named:
        found = [p for p in pods if (p.get("metadata") or {}).get("name") == named[1]]
        if found:
            return found[0]

    def ended(pod: dict[str, Any]) -> float:
        term = (container(pod).get("state") or {}).get("terminated") or {}
        return stamp(term.get("finishedAt")) or float("inf")

    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"
              and exit_code(p) not in (None, 0, 143)]
    failed = failed or [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    return min(failed, key=ended) if failed else None


def group_summary(job: dict[str, Any] | None, pods: list[dict[str, Any]],
                  events: list[dict[str, Any]], log_tail: list[str], *, nodes: int,
                  last_status: str) -> dict[str, Any]:
    """job_summary, read as one group: running only when every node runs, failed with the
    node that failed first as the cause, and each node's own line under `nodes`."""
    summary = job_summary(job, pods, events, log_tail, last_status=last_status)
    ranked = by_rank(pods)
    summary["nodes"] = [{"rank": index_of(p), "pod": (p.get("metadata") or {}).get("name"),
                         "phase": (p.get("status") or {}).get("phase"),
                         "line": pod_line(p, events)} for p in ranked]
    if job is None:
        return summary
    summary["restarts"] = []  # no pod is replaced alone: a failure ends the group
    causes = [c for c in summary["causes"] if "the Job controller replaced it" not in c]
    if summary["status"] in ("failed", "preempted"):
        first = first_failure(ranked, job)
        if first is not None:  # the group ended as its first failure did (85: preempted)
            code = exit_code(first)
            summary["exit_code"] = code
            summary["status"] = "preempted" if code == EXIT_PREEMPTED else "failed"
            causes.insert(0, f"node {index_of(first)} failed first ({pod_line(first, events)}); "
                             f"the Job fails as a whole (podFailurePolicy FailJob) and "
                             f"Kubernetes stopped the other {nodes - 1} node(s); `rgt resume` "
                             "restarts the group from the checkpoint home")
    elif summary["status"] in ("running", "starting"):
        live = [p for p in ranked if not (p.get("metadata") or {}).get("deletionTimestamp")]
        running = [p for p in live if (p.get("status") or {}).get("phase") == "Running"
                   and "running" in (container(p).get("state") or {})]
        summary["status"] = "running" if len(running) >= nodes else "starting"
        if summary["status"] == "starting":
            causes = [c for c in causes if not c.startswith("pod ")]
            causes.insert(0, f"{len(running)} of {nodes} nodes running" + "".join(
                f"; node {index_of(p)}: {pod_line(p, events)}" for p in live
                if p not in running))
    summary["causes"] = causes
    return summary


# ----------------------------------------------------------------------------- audit


def served_engines(kube: Kube) -> dict[str, str]:
    """API discovery (GET /apis, then the group's preferred version): the multi-node engines
    this cluster serves besides batch/v1, as {name: groupVersion}."""
    found: dict[str, str] = {}
    with contextlib.suppress(ApiError):
        groups = kube.get("/apis").get("groups") or []
        for group in groups if isinstance(groups, list) else []:
            name = str((group or {}).get("name") or "")
            if name not in ENGINES:
                continue
            version = str(((group.get("preferredVersion") or {}).get("groupVersion")) or "")
            if not version:
                continue
            with contextlib.suppress(ApiError):
                served = kube.get(f"/apis/{version}").get("resources") or []
                plural = ENGINES[name][1]
                if any(isinstance(r, dict) and r.get("name") == plural for r in served):
                    found[ENGINES[name][0]] = version
    return found


def audit_verdicts(kube: Kube, modes: Sequence[str]) -> tuple[dict[str, Any], list[dict]]:
    engines = served_engines(kube)
    listed = ", ".join(f"{n} ({v})" for n, v in engines.items())
    verdicts = [{"level": "ok", "id": "K8S", "message": (
        f"multi-node: this cluster serves {listed}" if engines else
        "multi-node: this cluster serves neither JobSet nor the training operator's "
        "PyTorchJob") + "; rgt runs resources.nodes > 1 as an Indexed Job with a headless "
        "Service either way (batch/v1, no operator needed)"}]
    if "ReadWriteMany" not in modes:
        verdicts.append({"level": "ok", "id": "K8S4", "message": "multi-node jobs need a "
                         "ReadWriteMany claim (every pod mounts it); this box's is "
                         f"{', '.join(modes) or 'unknown'}: rgt refuses resources.nodes > 1 "
                         "here"})
    return {"engines": engines, "uses": "Indexed Job + headless Service"}, verdicts
