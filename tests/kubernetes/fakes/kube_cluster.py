"""The cluster behind the fake API: a scheduler, a Job controller, a PVC binder and kubelets
that run each pod's container as a real local process.

* A pod's PersistentVolumeClaim is a directory; the container process runs in its own mount
  namespace (`unshare --mount`) with that directory bind-mounted at the pod's mountPath, so a
  job that writes /checkpoints/... writes the claim, and every pod of the claim sees the same
  files. Its environment is the container's `env` (values and the downward API fields rgt
  uses), its stdout/stderr the pod log, its IP a loopback address of its own (127.0.x.y).
  It has its own UTS namespace too (`unshare --uts`), with the pod's hostname (an Indexed
  Job's pod: `<job>-<index>`), and its own /etc/hosts bind-mounted in its mount namespace:
  the kubelet's lines plus the records the cluster DNS would serve for headless Services
  (kube_dns), so pod i of a multi-node Job reaches pod j at `<job>-<j>.<service>`.
* Scheduling honours nvidia.com/gpu: a pod whose limit no node can fit stays Pending with
  the scheduler's own message and a FailedScheduling event (K8S1). A ReadWriteOnce claim in
  use on one node does not attach on another: Multi-Attach (K8S4).
* An image the fake registry does not hold gives ErrImagePull then ImagePullBackOff (K8S3).
* Secrets reach a container as the kubelet hands them over: `env[].valueFrom.secretKeyRef`
  (a missing Secret or key: CreateContainerConfigError, retried until it appears) and `secret`
  volumes (one file per key, defaultMode; missing: FailedMount, ContainerCreating).
* The Job controller creates pods up to parallelism/completions (Indexed: one per index, with
  JOB_COMPLETION_INDEX), applies podFailurePolicy (Ignore / FailJob / Count) and backoffLimit,
  activeDeadlineSeconds and ttlSecondsAfterFinished.
* Disruptions, as the real components do them: eviction through the API (EvictionByEvictionAPI:
  SIGTERM, SIGKILL after terminationGracePeriodSeconds, pod deleted), the kubelet evicting for
  ephemeral-storage (TerminationByKubelet, pod kept Failed/Evicted, K8S5), and a node lost with
  its pods (killed at once, DeletionByTaintManager).
"""

from __future__ import annotations

import base64
import itertools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kube_api import ApiFailure, FakeKubeApi, kind_ref, now_iso
from kube_dns import Names, hostname

TICK_S = 0.05


@dataclass
class Proc:
    popen: subprocess.Popen
    log: Path
    node: str
    deleting_at: float | None = None
    kill_at: float | None = None


@dataclass
class Cluster:
    api: FakeKubeApi
    root: Path
    nodes: dict[str, int] = field(default_factory=lambda: {"gpu-node-1": 1})
    storage_classes: tuple[str, ...] = ("standard",)
    images: set[str] | None = None        # None: every image exists
    retry_delay_s: float = 0.2            # the Job controller's backoff before a new pod
    detach_delay_s: float = 0.5           # how long a lost node keeps its volume attached

    def __post_init__(self) -> None:
        self.procs: dict[str, Proc] = {}
        # Each pytest-xdist worker gets loopback addresses of its own (127.<100+N>.x.y): pods
        # listen on fixed ports (the door on 8470), so two workers' clusters must not share IPs.
        worker = os.environ.get("PYTEST_XDIST_WORKER", "")
        net = 100 + int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
        self.ips = (f"127.{net}.{i // 250}.{i % 250 + 2}" for i in itertools.count(10))
        self.attached: dict[str, tuple[str, float | None]] = {}  # claim uid → (node, until)
        self.stopping = False
        self.names = Names(self.root)
        self.api.cluster = self
        for name, gpus in self.nodes.items():
            self.add_node(name, gpus)
        for i, sc in enumerate(self.storage_classes):
            self.api.put("storageclasses", "", {
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": sc, "annotations": {
                    "storageclass.kubernetes.io/is-default-class": str(i == 0).lower()}},
                "provisioner": "rgt.dev/fake", "reclaimPolicy": "Delete",
                "volumeBindingMode": "Immediate"})
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def add_node(self, name: str, gpus: int) -> None:
        alloc = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        if gpus:
            alloc["nvidia.com/gpu"] = str(gpus)
        self.api.put("nodes", "", {"apiVersion": "v1", "kind": "Node",
                                   "metadata": {"name": name, "labels": {
                                       "kubernetes.io/hostname": name}},
                                   "status": {"capacity": dict(alloc), "allocatable": alloc,
                                              "conditions": [{"type": "Ready",
                                                              "status": "True"}]}})

    def stop(self) -> None:
        self.stopping = True
        for proc in list(self.procs.values()):
            _kill(proc.popen, signal.SIGKILL)
        self.thread.join(timeout=5)

    # ------------------------------------------------------------------ admission (defaults)

    def admit(self, plural: str, ns: str, obj: dict) -> None:
        meta = obj["metadata"]
        meta["uid"] = str(uuid.uuid4())
        if plural == "jobs":
            spec = obj["spec"]
            spec.setdefault("backoffLimit", 6)
            spec.setdefault("completions", 1)
            spec.setdefault("parallelism", 1)
            spec.setdefault("completionMode", "NonIndexed")
            spec.setdefault("suspend", False)
            ctl = {"batch.kubernetes.io/controller-uid": meta["uid"],
                   "batch.kubernetes.io/job-name": meta["name"],
                   "controller-uid": meta["uid"], "job-name": meta["name"]}
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid":
                                                meta["uid"]}}
            template_meta = spec["template"].setdefault("metadata", {})
            template_meta["labels"] = {**(template_meta.get("labels") or {}), **ctl}
            obj["status"] = {}
        elif plural == "pods":
            spec = obj["spec"]
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif plural == "secrets":  # stringData is write-only: merged into data, base64
            text = obj.pop("stringData", None) or {}
            obj["data"] = {**(obj.get("data") or {}),
                           **{k: base64.b64encode(str(v).encode()).decode()
                              for k, v in text.items()}}
            obj.setdefault("type", "Opaque")
        elif plural == "persistentvolumeclaims":
            obj["status"] = {"phase": "Pending"}
            obj["spec"].setdefault("volumeMode", "Filesystem")
            meta["finalizers"] = ["kubernetes.io/pvc-protection"]

    # ------------------------------------------------------------------ what the routes ask

    def log_path(self, pod: dict) -> Path | None:
        path = self.root / "logs" / pod["metadata"]["uid"]
        return path if path.exists() else None

    def waiting_reason(self, pod: dict) -> str | None:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            return (cs.get("state") or {}).get("waiting", {}).get("reason")
        return None

    def running(self, pod: dict) -> bool:
        proc = self.procs.get(pod["metadata"]["uid"])
        return proc is not None and proc.popen.poll() is None

    def claim_dir(self, ns: str, claim: str) -> Path | None:
        pvc = self.api.get("persistentvolumeclaims", ns, claim)
        if pvc is None or pvc["status"].get("phase") != "Bound":
            return None
        return self.root / "volumes" / pvc["spec"]["volumeName"]

    # ------------------------------------------------------------------ deleting and evicting

    def delete(self, plural: str, ns: str, name: str, *, propagation: str | None,
               grace: int | None) -> dict:
        obj = self.api.get(plural, ns, name)
        if obj is None:
            raise ApiFailure(404, "NotFound", f'{kind_ref(plural)} "{name}" not found',
                             {"name": name, "kind": plural})
        done = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "kind": plural, "uid": obj["metadata"]["uid"]}}
        if plural == "pods":
            self.terminate(obj, grace, reason=None)
            return obj
        if plural == "jobs":
            self.api.remove("jobs", ns, name)
            if propagation != "Orphan":  # the garbage collector deletes its pods
                for pod in self._pods_of(obj):
                    self.terminate(pod, None, reason=None)
                for other in self.api.list("services", ns):  # and what else it owns
                    if any(ref.get("uid") == obj["metadata"]["uid"] for ref in
                           other["metadata"].get("ownerReferences") or []):
                        self.api.remove("services", ns, other["metadata"]["name"])
            return done
        if plural == "persistentvolumeclaims":
            obj["metadata"]["deletionTimestamp"] = now_iso()
            self.api.touch(obj)
            return obj
        self.api.remove(plural, ns, name)
        return done

    def terminate(self, pod: dict, grace: int | None, *, reason: str | None,
                  message: str = "", keep: bool = False) -> None:
        """SIGTERM to the container's PID 1, SIGKILL after the grace period; `keep` leaves the
        pod object (kubelet eviction), else it is removed once the process is gone."""
        meta = pod["metadata"]
        if grace is None:
            grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        if reason:
            conds = pod["status"].setdefault("conditions", [])
            conds.append({"type": "DisruptionTarget", "status": "True", "reason": reason,
                          "message": message or reason, "lastTransitionTime": now_iso()})
        if not keep:
            meta["deletionTimestamp"] = now_iso()
            meta["deletionGracePeriodSeconds"] = grace
        pod["_keep"] = keep
        self.api.touch(pod)
        proc = self.procs.get(meta["uid"])
        if proc is None or proc.popen.poll() is not None:
            if not keep:
                self._fail_deleted(pod)
            return
        self.api.event(pod, "Killing", f"Stopping container {pod['spec']['containers'][0]['name']}")
        _kill(proc.popen, signal.SIGTERM, group=False)
        proc.deleting_at = time.time()
        proc.kill_at = time.time() + grace

    def evict(self, ns: str, name: str, *, reason: str) -> None:
        pod = self.api.get("pods", ns, name)
        if pod is None:
            raise ApiFailure(404, "NotFound", f'pods "{name}" not found')
        self.terminate(pod, None, reason=reason, message="Eviction API: evicting")

    def evict_for_storage(self, pod: dict, grace: int | None = None) -> None:
        """The kubelet under disk pressure: TerminationByKubelet, the pod kept as Evicted."""
        pod["status"]["reason"] = "Evicted"
        pod["status"]["message"] = ("The node was low on resource: ephemeral-storage. "
                                    "Threshold quantity: 10Gi, available: 8Gi.")
        self.api.event(pod, "Evicted", pod["status"]["message"], "Warning")
        self.terminate(pod, grace, reason="TerminationByKubelet",
                       message=pod["status"]["message"], keep=True)

    def lose_node(self, node: str) -> None:
        """The node vanishes: its processes die at once, its pods are failed and removed."""
        obj = self.api.get("nodes", "", node)
        obj["status"]["conditions"] = [{"type": "Ready", "status": "Unknown",
                                        "reason": "NodeStatusUnknown"}]
        self.api.touch(obj)
        for pod in self.api.list("pods"):
            if pod["spec"].get("nodeName") == node and pod["status"]["phase"] in (
                    "Pending", "Running"):
                proc = self.procs.get(pod["metadata"]["uid"])
                if proc:
                    _kill(proc.popen, signal.SIGKILL)
                    proc.popen.wait()
                self.api.event(pod, "TaintManagerEviction", "Marking for deletion Pod "
                               f"{pod['metadata']['namespace']}/{pod['metadata']['name']}",
                               component="taint-eviction-controller")
                self.terminate(pod, 0, reason="DeletionByTaintManager",
                               message="Taint manager: deleting due to NoExecute taint")
        for uid, (where, _) in list(self.attached.items()):
            if where == node:
                self.attached[uid] = (where, time.time() + self.detach_delay_s)

    # ------------------------------------------------------------------ the control loop

    def _loop(self) -> None:
        while not self.stopping:
            try:
                with self.api.lock:
                    self._bind_claims()
                    self._reap()
                    self._jobs()
                    self._schedule()
                    self._start()
                    self.names.refresh(self.api, set(self.procs))
                    self._release_claims()
            except Exception as err:  # noqa: BLE001 — a fake's bug must be seen, not hang
                print(f"[kube-fake] controller error: {err!r}", file=sys.stderr)
                import traceback

                traceback.print_exc()
            time.sleep(TICK_S)

    def _bind_claims(self) -> None:
        default = next((s["metadata"]["name"] for s in self.api.list("storageclasses")
                        if s["metadata"]["annotations"].get(
                            "storageclass.kubernetes.io/is-default-class") == "true"), None)
        for pvc in self.api.list("persistentvolumeclaims"):
            if pvc["status"]["phase"] != "Pending":
                continue
            wanted = pvc["spec"].get("storageClassName", default)
            if wanted is None:
                self.api.event(pvc, "FailedBinding", "no persistent volumes available for this "
                               "claim and no storage class is set", "Warning",
                               "persistentvolume-controller")
                continue
            if self.api.get("storageclasses", "", wanted) is None:
                self.api.event(pvc, "ProvisioningFailed",
                               f'storageclass.storage.k8s.io "{wanted}" not found', "Warning",
                               "persistentvolume-controller")
                continue
            volume = f"pvc-{pvc['metadata']['uid']}"
            (self.root / "volumes" / volume).mkdir(parents=True, exist_ok=True)
            pvc["spec"]["volumeName"] = volume
            pvc["spec"]["storageClassName"] = wanted
            pvc["status"] = {"phase": "Bound", "accessModes": pvc["spec"]["accessModes"],
                             "capacity": pvc["spec"]["resources"]["requests"]}
            self.api.touch(pvc)

    def _release_claims(self) -> None:
        for pvc in self.api.list("persistentvolumeclaims"):
            if not pvc["metadata"].get("deletionTimestamp"):
                continue
            name = pvc["metadata"]["name"]
            if any(name in _claims(p) for p in self.api.list("pods", pvc["metadata"]
                                                             ["namespace"])):
                continue  # kubernetes.io/pvc-protection: not while a pod uses it
            self.api.remove("persistentvolumeclaims", pvc["metadata"]["namespace"], name)
            if pvc["spec"].get("volumeName"):
                shutil.rmtree(self.root / "volumes" / pvc["spec"]["volumeName"],
                              ignore_errors=True)

    def _pods_of(self, job: dict) -> list[dict]:
        return self.api.list("pods", job["metadata"]["namespace"],
                             f"batch.kubernetes.io/controller-uid={job['metadata']['uid']}")

    def _reap(self) -> None:
        """Exited processes → pod phases; terminating pods past their grace → SIGKILL."""
        for uid, proc in list(self.procs.items()):
            pod = next((p for p in self.api.list("pods") if p["metadata"]["uid"] == uid), None)
            code = proc.popen.poll()
            if code is None:
                if proc.kill_at is not None and time.time() >= proc.kill_at:
                    _kill(proc.popen, signal.SIGKILL)
                continue
            _kill(proc.popen, signal.SIGKILL)  # whatever the container left in its group
            del self.procs[uid]
            if pod is None:
                continue
            code = 128 - code if code < 0 else code
            policy = pod["spec"].get("restartPolicy")
            if code != 0 and policy == "OnFailure" and not pod["metadata"].get(
                    "deletionTimestamp") and not pod.get("_keep"):
                cs = pod["status"]["containerStatuses"][0]
                cs["lastState"] = {"terminated": {"exitCode": code, "reason": "Error"}}
                cs["restartCount"] += 1
                cs["state"] = {"waiting": {"reason": "ContainerCreating"}}
                self.api.touch(pod)
                continue
            term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": pod["status"].get("startTime"), "finishedAt": now_iso()}
            if code == 137 and proc.kill_at is None:
                term["reason"] = "OOMKilled"
            cs = pod["status"]["containerStatuses"][0]
            cs.update(state={"terminated": term}, ready=False, started=False)
            pod["status"]["phase"] = "Succeeded" if code == 0 and not pod.get("_keep") \
                else "Failed"
            self.api.touch(pod)
            if pod["metadata"].get("deletionTimestamp"):
                self._fail_deleted(pod)

    def _fail_deleted(self, pod: dict) -> None:
        """A deleted pod of a Job is seen Failed by the controller, then removed."""
        if pod["status"]["phase"] not in ("Succeeded", "Failed"):
            pod["status"]["phase"] = "Failed"
        meta = pod["metadata"]
        self._account(pod)
        self.api.remove("pods", meta["namespace"], meta["name"])

    def _account(self, pod: dict) -> None:
        """What the Job controller's finalizer records before a pod object goes away."""
        for job in self.api.list("jobs", pod["metadata"]["namespace"]):
            if job["metadata"]["uid"] == pod["metadata"]["labels"].get(
                    "batch.kubernetes.io/controller-uid"):
                job.setdefault("_gone", []).append(pod)

    # the Job controller ------------------------------------------------------------------

    def _jobs(self) -> None:
        from kube_jobs import reconcile  # the controller's rules, kept in their own file

        for job in self.api.list("jobs"):
            reconcile(self, job)

    # the scheduler -----------------------------------------------------------------------

    def _gpus_used(self, node: str) -> int:
        return sum(_gpus(p) for p in self.api.list("pods") if p["spec"].get("nodeName") == node
                   and p["status"]["phase"] in ("Pending", "Running"))

    def _schedule(self) -> None:
        for pod in self.api.list("pods"):
            if pod["spec"].get("nodeName") or pod["status"]["phase"] != "Pending" or \
                    pod["metadata"].get("deletionTimestamp"):
                continue
            ns = pod["metadata"]["namespace"]
            missing = [c for c in _claims(pod) if self.api.get("persistentvolumeclaims", ns, c)
                       is None]
            unbound = [c for c in _claims(pod) if c not in missing and
                       self.claim_dir(ns, c) is None]
            ready = [n for n in self.api.list("nodes") if n["status"]["conditions"][0]
                     ["status"] == "True"]
            fits = [n for n in ready if _gpus(pod) <= int(n["status"]["allocatable"].get(
                "nvidia.com/gpu", 0)) - self._gpus_used(n["metadata"]["name"])]
            if missing or unbound or not fits:
                total = len(self.api.list("nodes"))
                if missing:
                    why = f'persistentvolumeclaim "{missing[0]}" not found'
                elif unbound:
                    why = "pod has unbound immediate PersistentVolumeClaims"
                else:
                    why = f"{len(ready) - len(fits)} Insufficient nvidia.com/gpu"
                message = f"0/{total} nodes are available: {why}."
                pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                                "reason": "Unschedulable", "message": message}]
                self.api.touch(pod)
                self.api.event(pod, "FailedScheduling", message, "Warning", "default-scheduler")
                continue
            node = min(fits, key=lambda n: self._gpus_used(n["metadata"]["name"]))
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
            image = pod["spec"]["containers"][0]["image"]
            pod["status"]["containerStatuses"] = [{
                "name": pod["spec"]["containers"][0]["name"], "image": image, "imageID": "",
                "ready": False, "restartCount": 0, "started": False,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]
            self.api.touch(pod)
            self.api.event(pod, "Scheduled", f"Successfully assigned {ns}/"
                           f"{pod['metadata']['name']} to {node['metadata']['name']}",
                           component="default-scheduler")

    # the kubelet ------------------------------------------------------------------------

    def _start(self) -> None:
        for pod in self.api.list("pods"):
            meta = pod["metadata"]
            cs = (pod["status"].get("containerStatuses") or [{}])[0]
            waiting = (cs.get("state") or {}).get("waiting")
            if not pod["spec"].get("nodeName") or not waiting or meta.get("deletionTimestamp") \
                    or meta["uid"] in self.procs:
                continue
            container = pod["spec"]["containers"][0]
            image = container["image"]
            if self.images is not None and image not in self.images:
                reason = "ImagePullBackOff" if waiting["reason"] == "ErrImagePull" \
                    else "ErrImagePull"
                message = (f'Back-off pulling image "{image}"' if reason == "ImagePullBackOff"
                           else f'rpc error: code = NotFound desc = failed to pull and unpack '
                           f'image "{image}": failed to resolve reference "{image}": '
                           f"{image}: not found")
                cs["state"] = {"waiting": {"reason": reason, "message": message}}
                self.api.touch(pod)
                self.api.event(pod, "Failed" if reason == "ErrImagePull" else "BackOff",
                               message, "Warning")
                continue
            secret_env, trouble = self._secrets(pod, container)
            if trouble:  # the kubelet retries on its next sync, as a real one does
                reason, message = trouble
                if waiting.get("message") != message:
                    cs["state"] = {"waiting": {"reason": reason, "message": message}}
                    self.api.touch(pod)
                    self.api.event(pod, "FailedMount" if reason == "ContainerCreating"
                                   else "Failed", message, "Warning")
                continue
            node = pod["spec"]["nodeName"]
            blocked = self._attach(pod, node)
            if blocked:
                self.api.event(pod, "FailedAttachVolume", f'Multi-Attach error for volume '
                               f'"{blocked}" Volume is already exclusively attached to one '
                               "node and can't be attached to another", "Warning",
                               "attachdetach-controller")
                continue
            self._run(pod, container, node, secret_env)

    def _secret(self, ns: str, name: str) -> dict | None:
        return self.api.get("secrets", ns, name)

    def _secrets(self, pod: dict, container: dict) -> tuple[dict, tuple[str, str] | None]:
        """The container's env from secretKeyRef, or why it cannot start yet: a missing
        Secret or key is CreateContainerConfigError (env) or a FailedMount (a volume), with
        the kubelet's own words; `optional: true` makes a missing one empty."""
        ns = pod["metadata"]["namespace"]
        env = {}
        for item in container.get("env") or []:
            ref = (item.get("valueFrom") or {}).get("secretKeyRef")
            if not ref:
                continue
            secret = self._secret(ns, ref["name"])
            data = (secret or {}).get("data") or {}
            if ref["key"] not in data:
                if ref.get("optional"):
                    continue
                why = (f'secret "{ref["name"]}" not found' if secret is None else
                       f"couldn't find key {ref['key']} in Secret {ns}/{ref['name']}")
                return {}, ("CreateContainerConfigError", why)
            env[item["name"]] = base64.b64decode(data[ref["key"]]).decode()
        for volume in pod["spec"].get("volumes") or []:
            source = volume.get("secret")
            if source and not source.get("optional") and \
                    self._secret(ns, source["secretName"]) is None:
                return {}, ("ContainerCreating", f'MountVolume.SetUp failed for volume '
                            f'"{volume["name"]}" : secret "{source["secretName"]}" not found')
        return env, None

    def _secret_volume(self, pod: dict, volume: dict) -> Path:
        """A secret volume as the kubelet writes it: one file per key (or per `items` entry,
        at its path), mode defaultMode (0644), in a directory of the pod's own."""
        meta, source = pod["metadata"], volume["secret"]
        where = self.root / "secrets" / meta["uid"] / volume["name"]
        where.mkdir(parents=True, exist_ok=True)
        data = (self._secret(meta["namespace"], source["secretName"]) or {}).get("data") or {}
        items = source.get("items") or [{"key": k, "path": k} for k in data]
        for item in items:
            if item["key"] not in data:
                continue
            target = where / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(data[item["key"]]))
            target.chmod(item.get("mode", source.get("defaultMode", 0o644)))
        return where

    def _attach(self, pod: dict, node: str) -> str | None:
        """Attach the pod's claims on NODE; the volume name of a ReadWriteOnce claim that is
        attached elsewhere, else None."""
        ns = pod["metadata"]["namespace"]
        for claim in _claims(pod):
            pvc = self.api.get("persistentvolumeclaims", ns, claim)
            uid = pvc["metadata"]["uid"]
            users = [p for p in self.api.list("pods", ns) if claim in _claims(p)
                     and p["metadata"]["uid"] in self.procs]
            where, until = self.attached.get(uid, (None, None))
            if until is not None and time.time() >= until or where and not users and until is None:
                where = None
            if "ReadWriteOnce" in pvc["spec"]["accessModes"] and where not in (None, node):
                return pvc["spec"]["volumeName"]
            self.attached[uid] = (node, None)
        return None

    def _run(self, pod: dict, container: dict, node: str, secret_env: dict) -> None:
        meta = pod["metadata"]
        ip = next(self.ips)
        pod["status"]["podIP"] = ip
        pod["status"]["podIPs"] = [{"ip": ip}]
        pod["status"]["hostIP"] = "127.0.0.1"
        env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
               "HOME": str(self.root / "home"), "HOSTNAME": hostname(pod)}
        index = meta.get("annotations", {}).get("batch.kubernetes.io/job-completion-index")
        if index is not None:
            env["JOB_COMPLETION_INDEX"] = index
        fields = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"],
                  "spec.nodeName": node, "status.podIP": ip}
        for item in container.get("env") or []:
            if item["name"] in secret_env:
                env[item["name"]] = secret_env[item["name"]]
                continue
            if (item.get("valueFrom") or {}).get("secretKeyRef"):
                continue  # optional, and not there
            ref = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            env[item["name"]] = fields.get(ref, "") if ref else str(item.get("value", ""))
        mounts = []
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        for mount in container.get("volumeMounts") or []:
            volume = volumes[mount["name"]]
            if "persistentVolumeClaim" in volume:
                source = self.claim_dir(meta["namespace"],
                                        volume["persistentVolumeClaim"]["claimName"])
            elif "secret" in volume:
                source = self._secret_volume(pod, volume)
            else:
                source = self.root / "emptydir" / meta["uid"] / mount["name"]
                source.mkdir(parents=True, exist_ok=True)
            mounts += [str(source), mount["mountPath"]]
        mounts += [str(self.names.write(self.api, pod)), "/etc/hosts"]
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        log = self.root / "logs" / meta["uid"]
        log.parent.mkdir(parents=True, exist_ok=True)
        (self.root / "home").mkdir(exist_ok=True)
        # mount each volume (and the hosts file) at its path in a private mount namespace,
        # take the pod's hostname in a UTS namespace of its own, then exec the container
        boot = ('hostname "$1" || exit 111; shift; '
                'while [ $# -gt 0 ] && [ "$1" != -- ]; do { [ -e "$2" ] || mkdir -p "$2"; } && '
                'mount --bind "$1" "$2" || exit 111; shift 2; done; shift; '
                'cd "${RGT_FAKE_WORKDIR:-/}" && exec "$@"')
        if container.get("workingDir"):
            env["RGT_FAKE_WORKDIR"] = container["workingDir"]
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", boot,
                 "sh", hostname(pod), *mounts, "--", *argv], env=env, stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[meta["uid"]] = Proc(popen, log, node)
        started = now_iso()
        pod["status"].update(phase="Running", startTime=pod["status"].get("startTime")
                             or started)
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"},
                                       {"type": "Ready", "status": "True"}]
        cs = pod["status"]["containerStatuses"][0]
        cs.update(state={"running": {"startedAt": started}}, ready=True, started=True,
                  imageID=f"fake@{container['image']}")
        self.api.touch(pod)
        for reason, message in (("Pulled", f'Container image "{container["image"]}" already '
                                           "present on machine"),
                                ("Created", f"Created container {container['name']}"),
                                ("Started", f"Started container {container['name']}")):
            self.api.event(pod, reason, message)


def _claims(pod: dict) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"].get("volumes") or []
            if "persistentVolumeClaim" in v]


def _gpus(pod: dict) -> int:
    return sum(int((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0))
               for c in pod["spec"]["containers"])


def _kill(popen: subprocess.Popen, sig: int, group: bool = True) -> None:
    """TERM goes to the container's PID 1 only (as the kubelet sends it), KILL to all of it.
    Our PID 1 stand-in is unshare, which execs sh, which execs the command: one process."""
    try:
        if group:
            os.killpg(popen.pid, sig)
        else:
            os.kill(popen.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
