"""Kubernetes: a box is a namespace of a cluster plus a PersistentVolumeClaim; a run is a Job.

    rgt up NAME --profile kubernetes --image REG/IMG@sha256:… [--context C] [--namespace N]
                [--storage-class S | --claim EXISTING] [--disk 100G]

`up` reads the user's kubeconfig as kubectl does, checks what rgt will need (the namespace,
RBAC for jobs, pods, pods/log, pods/proxy, PVCs and events, a storage class that can bind the
claim, GPUs allocatable per node), creates the claim and opens a door pod once to prove the
image runs Python and the claim mounts — undoing the claim if anything fails, so nothing is
left that `rgt ls` does not show.

Code reaches the claim through the door (rgt.platforms.k8s.door: a tar through the API
server's pod proxy); the image stays the environment, pinned by digest (U30). `run` submits a
batch/v1 Job (a sweep: one Indexed Job) whose pods mount the claim where the door did, so
`$RGT_CKPT_DIR`, the code, the log and the outputs all live on it; an evicted, preempted or lost
pod is replaced by the Job controller and resumes from the checkpoint home. A multi-node job
(resources.nodes > 1) is an Indexed Job of N pods under a headless Service, failing as a
whole (rgt.platforms.k8s.group). `watch` reads the
Job, its pods and their events (rgt.platforms.k8s.diagnose: K8S1-K8S6); `logs` the pods' logs;
`pull` fetches from the claim through a door; `down` deletes the Jobs and their pods, deletes
the claim rgt created (the Iron Law already held), and says plainly that the cluster's nodes
keep billing until they are scaled down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

import yaml

from rgt.errors import UserError
from rgt.platforms.base import (
    Launched,
    Platform,
    Released,
    Request,
    Teardown,
    refuse_unsupported,
)
from rgt.platforms.k8s.api import BATCH, CORE, ApiError, Kube
from rgt.platforms.k8s.checks import (
    DEFAULT_DISK,
    check_access,
    check_namespace,
    check_storage_class,
    create_claim,
    gpu_capacity,
    kube_for,
    undo_claim,
)
from rgt.platforms.k8s.diagnose import image_failure, job_summary, pod_trouble
from rgt.platforms.k8s.door import DoorTransport
from rgt.platforms.k8s.group import (
    audit_verdicts,
    by_rank,
    group_command,
    group_summary,
    index_of,
    own_service,
    rank_lines,
    refuse_claim,
    service_manifest,
)
from rgt.platforms.k8s.kubeconfig import load_kubeconfig, resolve
from rgt.platforms.k8s.manifests import (
    BOX_LABEL,
    DEFAULT_BACKOFF,
    MANAGED,
    PART_LABEL,
    RUN_LABEL,
    dns_name,
    job_manifest,
    label_value,
    node_selector,
    pod_script,
    pvc_manifest,
    require_digest,
)
from rgt.platforms.slurm.options import grid_cells
from rgt.platforms.slurm.script import grid_command
from rgt.profiles import load_profile
from rgt.remote.layout import Layout, job_environment
from rgt.spec import JobSpec
from rgt.spec_sections import KubernetesSettings
from rgt.store import LIVE, Box, Run, Store
from rgt.transport import Transport

OPTIONS = ("context", "namespace", "kubeconfig", "storage_class", "claim", "access_mode",
           "mount_path")
ENV_CKPT_WRITE_S = "RGT_CKPT_WRITE_S"     # the checkpoint write time, when none is measured
ENV_PULL_SECRET = "RGT_K8S_PULL_SECRET"   # imagePullSecrets for a private registry
ENV_NODE_SELECTOR = "RGT_K8S_NODE_SELECTOR"
ENV_TTL_S = "RGT_K8S_TTL_S"
ENV_START_WAIT_S = "RGT_K8S_START_WAIT_S"
LOG_TAIL_LINES = 40

class ImageRefused(UserError):
    """The Job's image cannot be pulled; rgt deleted the Job again."""


class KubernetesPlatform(Platform):
    name = "kubernetes"
    supports = frozenset({"gpu", "cpus", "mem", "disk", "image", "time"})
    per_job_resources = True  # each job asks the scheduler for its own resources
    spec_sections = frozenset({"kubernetes"})

    # ------------------------------------------------------------------ reaching it

    def connect(self, box: Box) -> Transport:
        extra = box.extra
        return DoorTransport(kube_for(box), box=box.name, claim=extra["claim"],
                             mount_path=box.durable_dir, image=extra["image"],
                             python=extra.get("python") or "python3",
                             pull_secret=extra.get("pull_secret"), diagnose=pod_trouble)

    # ------------------------------------------------------------------ rgt up

    def provision(self, store: Store, request: Request) -> Box:
        refuse_unsupported(self.profile, self.supports, request.resources)
        opts = {k: v for k, v in request.options.items() if v not in (None, False, (), [])}
        unknown = sorted(set(opts) - set(OPTIONS))
        if unknown:
            raise UserError(f"--{unknown[0].replace('_', '-')} does not apply to Kubernetes "
                            f"(it takes --{', --'.join(o.replace('_', '-') for o in OPTIONS)})")
        if request.target is not None:
            raise UserError("a Kubernetes box is reached through the API (your kubeconfig), "
                            "not SSH: drop --ssh/--host")
        if request.data_dir and request.data_dir != (request.durable_dir or request.data_dir):
            raise UserError("on Kubernetes everything of a run lives on the PVC: give one "
                            "path (--durable-dir or --mount-path), not two")
        image = require_digest(request.resources.image, "rgt up --image")
        creds = resolve(load_kubeconfig(opts.get("kubeconfig")), opts.get("context"),
                        opts.get("namespace"))
        mount = opts.get("mount_path") or request.durable_dir or request.data_dir or \
            load_profile(self.profile).overrides.get("DURABLE_DIR", "/checkpoints")
        if not str(mount).startswith("/"):
            raise UserError(f"--mount-path {mount!r} must be an absolute path in the pod")
        say = request.on_wait
        with Kube(creds) as kube:
            check_namespace(kube)
            check_access(kube)
            gpus = gpu_capacity(kube, say)
            claim = opts.get("claim")
            if claim:
                if kube.find(kube.ns(CORE, "persistentvolumeclaims", claim)) is None:
                    raise UserError(f"--claim {claim}: no such PersistentVolumeClaim in "
                                    f"namespace {kube.namespace}")
            else:
                check_storage_class(kube, opts.get("storage_class"))
            box = Box(name=request.name, profile=self.profile,
                      connection={"context": creds.context, "namespace": kube.namespace,
                                  "server": creds.server,
                                  **({"kubeconfig": str(Path(opts["kubeconfig"]).expanduser()
                                                        .resolve())}
                                     if opts.get("kubeconfig") else {})},
                      data_dir=mount, durable_dir=mount, rate=request.rate, state="up",
                      created=time.time())
            created = not claim
            claim = claim or dns_name("rgt", request.name)
            box.extra = {"claim": claim, "claim_created": created, "image": image,
                         "gpus_per_node": gpus, "storage_class": opts.get("storage_class"),
                         "pull_secret": os.environ.get(ENV_PULL_SECRET) or None}
            if created:
                create_claim(kube, box, request, opts)
        try:
            box.extra.update(self._first_contact(box, say))
        except BaseException:
            if created:
                undo_claim(store, box)
            raise
        store.add_box(box)
        store.record("up", {"profile": self.profile, "context": box.connection["context"],
                            "namespace": box.connection["namespace"], "claim": claim,
                            "claim_created": created, "image": image, "gpus_per_node": gpus,
                            "mount": mount}, box=box.name)
        return box

    def _first_contact(self, box: Box, say) -> dict[str, Any]:
        """Open a door once: the claim binds and mounts, the image has Python >= 3.8."""
        say(f"checking the image and the PVC {box.extra['claim']} with a short-lived pod")
        transport = self.connect(box)
        try:
            found = transport.run(
                'p=$(command -v python3 || command -v python) && "$p" -c "import sys; '
                "print('%d.%d.%d' % sys.version_info[:3], sys.executable)\"", check=False,
                timeout=60)
            words = found.stdout.split()
            version = tuple(int(x) for x in words[0].split(".")) if words else ()
            if not found.ok or version < (3, 8):
                raise UserError(f"the image {box.extra['image']} has no Python 3.8+ for rgt's "
                                f"door and on-box scripts ({found.stderr.strip() or words}); "
                                "use an image with python3")
            transport.run(f"mkdir -p {shlex.quote(box.durable_dir + '/rgt')}", timeout=60)
        finally:
            transport.close()
        return {"python": words[1], "python_version": words[0], "python_executable": words[1],
                "uname": f"Kubernetes namespace {box.connection['namespace']} (context "
                         f"{box.connection['context']}), PVC {box.extra['claim']} at "
                         f"{box.durable_dir}"}

    # ------------------------------------------------------------------ rgt run

    def dependency_on(self, earlier: Run) -> str:
        """Kubernetes Jobs have no dependencies; having this method is what lets sweeps (an
        Indexed Job) through, so `--after` is refused here by name."""
        raise UserError("--after: Kubernetes Jobs cannot wait for one another; run the next "
                        f"stage once `rgt watch {earlier.box} {earlier.id} --until-done` exits 0")

    def render(self, box: Box, spec: JobSpec, run_id: str, *,
               dependency: str | None = None) -> str:
        """The Job; for `rgt render` (a box never registered) the claim `rgt up` would create
        comes first, as multi-document YAML for `kubectl apply -n NAMESPACE -f -`."""
        documents = []
        if "claim" not in box.extra:
            claim = dns_name("rgt", box.name)
            documents.append(pvc_manifest(claim, box.name, DEFAULT_DISK))
            box = dataclasses.replace(box, extra={**box.extra, "claim": claim})
        job = self._job(box, spec, Layout.of(box, run_id, spec), None)
        service = self._service(box, spec, job)
        documents += ([service] if service else []) + [job]
        return yaml.safe_dump_all(documents, sort_keys=False)

    @staticmethod
    def _service(box: Box, spec: JobSpec, job: dict) -> dict | None:
        """A multi-node Job's headless Service (named as the Job: the pods' subdomain)."""
        if spec.resources.nodes <= 1:
            return None
        return service_manifest(name=job["metadata"]["name"], box=box.name,
                                run_id=job["metadata"]["labels"][RUN_LABEL])

    def _job(self, box: Box, spec: JobSpec, layout: Layout, write_s: float | None) -> dict:
        refuse_unsupported(self.profile, self.supports | {"nodes"}, spec.resources)
        k = spec.kubernetes or KubernetesSettings()
        if k.image and spec.resources.image and k.image != spec.resources.image:
            raise UserError("the spec names two images (kubernetes.image and resources.image); "
                            "keep one")
        image = require_digest(k.image or spec.resources.image or box.extra.get("image"),
                               "resources.image" if spec.resources.image and not k.image
                               else "--image" if box.extra.get("image") and not k.image
                               else "kubernetes.image")
        env = job_environment(spec, load_profile(box.profile), layout)
        env.update(RGT_LOG=f"{layout.run_dir}/log", RGT_CODE_DIR=layout.code,
                   PYTHONUNBUFFERED="1")
        cells = grid_cells(spec.grid) if spec.grid else None
        command = grid_command(spec.run, spec.grid) if spec.grid else spec.run
        r = spec.resources
        name = dns_name("rgt", layout.run_id)
        ranks: list[str] = []
        if r.nodes > 1:
            command = group_command(spec, env, name)
            ranks = rank_lines()
        script = pod_script(run=command, setup=spec.setup, outputs=spec.outputs, cells=cells,
                            lib=layout.lib, rank_lines=ranks)
        try:
            ttl = int(spec.env.get(ENV_TTL_S) or 7 * 24 * 3600)
        except ValueError:
            raise UserError(f"{ENV_TTL_S} must be a number of seconds") from None
        return job_manifest(
            name=name, box=box.name, run_id=layout.run_id,
            image=image, script=script, env=env, claim=box.extra["claim"],
            mount_path=box.durable_dir, gpus=r.gpu_count, cpus=r.cpus, mem=r.mem, disk=r.disk,
            nodes=r.nodes, service=name if r.nodes > 1 else None, time_limit=r.time,
            ckpt_write_s=write_s,
            backoff_limit=spec.recover.max_restarts if spec.recover else DEFAULT_BACKOFF,
            ttl_s=ttl, cells=len(cells) if cells else None, max_parallel=spec.max_parallel,
            selector={**node_selector(spec.env.get(ENV_NODE_SELECTOR, "")),
                      **k.node_selector} or None,
            pull_secret=box.extra.get("pull_secret"), service_account=k.service_account,
            tolerations=[t.manifest() for t in k.tolerations],
            priority_class=k.priority_class, extra_labels=k.labels)

    def launch(self, transport: Transport, box: Box, spec: JobSpec, layout: Layout, *,
               dependency: str | None = None) -> Launched:
        assert isinstance(transport, DoorTransport)
        kube = transport.kube
        write_s = measured_write_s(transport, layout.ckpt, spec.env.get(ENV_CKPT_WRITE_S))
        manifest = self._job(box, spec, layout, write_s)
        name = manifest["metadata"]["name"]
        service = self._service(box, spec, manifest)
        if service:
            refuse_claim(kube, box.extra["claim"], spec.resources.nodes)
        notes = [f"SIGTERM lead (terminationGracePeriodSeconds): "
                 f"{manifest['spec']['template']['spec']['terminationGracePeriodSeconds']} s"
                 + (f", from the measured checkpoint write of {write_s:.1f} s" if write_s
                    is not None else " (no checkpoint measured yet; set RGT_CKPT_WRITE_S)")]
        most = max((box.extra.get("gpus_per_node") or {}).values(), default=None)
        if most is not None and spec.resources.gpu_count > most:
            notes.append(f"no node offers {spec.resources.gpu_count} GPUs (at most {most} when "
                         "rgt up looked): the pod will wait Pending unless the cluster "
                         "autoscaler adds a bigger node (K8S1)")
        if spec.resources.gpu and ":" in spec.resources.gpu and not spec.env.get(
                ENV_NODE_SELECTOR) and not (spec.kubernetes and spec.kubernetes.node_selector):
            notes.append(f"the GPU model in {spec.resources.gpu!r} is not enforced: node labels "
                         "differ per cluster; pin it with kubernetes.node_selector "
                         "{label: value}")
        if service:
            notes.append(f"{spec.resources.nodes} pods, one Indexed Job: pod i is node i at "
                         f"{name}-<i>.{name} (headless Service {name}); one pod failing fails "
                         "the whole Job. Kubernetes does not gang-schedule: a pod left "
                         "Pending keeps the others waiting at the rendezvous")
        # the door holds a ReadWriteOnce claim until it is gone: close it before the Job's pod
        transport.shut_door()
        if service:  # before the Job: its pods' names resolve from their start
            kube.create(kube.ns(CORE, "services"), service)
        try:
            created = kube.create(kube.ns(BATCH, "jobs"), manifest)
        except BaseException:
            if service:
                with contextlib.suppress(UserError):
                    kube.delete(kube.ns(CORE, "services", name))
            raise
        if service and not own_service(kube, name, created):
            notes.append(f"the Service {name} could not be given its Job as owner (RBAC: "
                         "patch services): `rgt cancel` or `rgt down` deletes it, the Job's "
                         "TTL does not")
        try:
            status = self._first_pod(kube, name, layout.run_id, notes,
                                     need=spec.resources.nodes)
        except ImageRefused:
            if service:  # its owner is gone; the GC may be slower than this
                with contextlib.suppress(UserError):
                    kube.delete(kube.ns(CORE, "services", name))
            raise
        except UserError as err:  # the Job exists: the run must be recorded, never lost
            notes.append(f"could not follow the first pod ({err}); `rgt watch` will")
            status = "starting"
        info = {"kind": "kubernetes", "job": name, "namespace": kube.namespace,
                "cells": len(spec.grid and grid_cells(spec.grid)) or None,
                **({"nodes": spec.resources.nodes, "service": name} if service else {}),
                "log": f"{layout.run_dir}/log"}
        return Launched(detach=f"k8s-job:{name}", platform_run=info, status=status,
                        notes=notes)

    @staticmethod
    def _first_pod(kube: Kube, job: str, run_id: str, notes: list[str], need: int = 1) -> str:
        """Wait a little for the first pod (a multi-node job: its `need` pods): an image that
        cannot be pulled is the user's mistake (exit 2, the Job deleted), a pod Pending for
        GPUs may wait for the autoscaler."""
        try:
            wait_s = float(os.environ.get(ENV_START_WAIT_S) or 20)
        except ValueError:
            wait_s = 20.0
        deadline = time.monotonic() + wait_s
        while True:
            pods = kube.items(CORE, "pods", labels=f"{RUN_LABEL}={label_value(run_id)}")
            for pod in pods:
                failure = image_failure(pod)
                if failure:
                    kube.delete(kube.ns(BATCH, "jobs", job))
                    raise ImageRefused(f"the Job's image cannot be pulled: {failure} — K8S3; rgt "
                                    "deleted the Job. Push the image, check its digest, or "
                                    f"set {ENV_PULL_SECRET} for a private registry")
            if sum((p.get("status") or {}).get("phase") in ("Running", "Succeeded")
                   for p in pods) >= need:
                return "running"
            if time.monotonic() > deadline:
                waiting = [p for p in pods if (p.get("status") or {}).get("phase")
                           not in ("Running", "Succeeded")] or pods
                trouble = pod_trouble(kube, waiting[-1]) if waiting else None
                if trouble:
                    notes.append(f"{'a' if need > 1 else 'the first'} pod is waiting: "
                                 f"{trouble[1]}")
                return "starting"
            time.sleep(0.2)

    # ------------------------------------------------------------------ rgt watch / logs

    def _pods(self, kube: Kube, run: Run, cell: int | None = None) -> list[dict[str, Any]]:
        labels = f"{RUN_LABEL}={label_value(run.id)},{PART_LABEL}=job"
        if cell is not None:
            labels += f",batch.kubernetes.io/job-completion-index={cell}"
        pods = kube.items(CORE, "pods", labels=labels)
        return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")

    def state(self, store: Store, box: Box, run: Run, transport: Transport) -> dict[str, Any]:
        kube = transport.kube if isinstance(transport, DoorTransport) else kube_for(box)
        info = run.spec.get("platform_run") or {}
        job = kube.find(kube.ns(BATCH, "jobs", str(info.get("job") or "")))
        pods = self._pods(kube, run) if job is not None else []
        events: list[dict[str, Any]] = []
        if job is not None:  # this Job's pods, those already deleted included (by name)
            with contextlib.suppress(ApiError):
                events = [e for e in kube.items(CORE, "events")
                          if str((e.get("involvedObject") or {}).get("name") or "")
                          .startswith(info["job"])]
        tail: list[str] = []
        nodes = int(info.get("nodes") or 1)
        if pods:  # the newest pod's log; a group's head's (node 0)
            with contextlib.suppress(ApiError):
                tail = kube.log((by_rank(pods)[0] if nodes > 1 else pods[-1])["metadata"]
                                ["name"], tail_lines=LOG_TAIL_LINES).splitlines()
        if nodes > 1:
            return group_summary(job, pods, events, tail, nodes=nodes, last_status=run.status)
        return job_summary(job, pods, events, tail, last_status=run.status)

    def logs(self, transport: Transport, box: Box, run: Run, *, lines: int | None = None,
             cell: int | None = None, since_byte: int | None = None) -> str:
        """The pods' logs, oldest pod first (an evicted pod's log goes with its pod object;
        every attempt's log is also on the PVC, RUN_DIR/log, which `rgt pull` fetches)."""
        cells = (run.spec.get("platform_run") or {}).get("cells") or 0
        if cell is not None and not 0 <= cell < cells:
            raise UserError(f"run {run.id} has no cell {cell}"
                            + (f" (cells 0-{cells - 1})" if cells else " (it is not a sweep)"))
        if lines is not None and lines < 0:
            raise UserError(f"--tail/-n takes a number of lines >= 0, not {lines}")
        kube = transport.kube if isinstance(transport, DoorTransport) else kube_for(box)
        group = int((run.spec.get("platform_run") or {}).get("nodes") or 1) > 1
        pods = self._pods(kube, run, cell)
        text = ""
        for pod in by_rank(pods) if group else pods:
            with contextlib.suppress(ApiError):  # still waiting to start: no log yet
                log = kube.log(pod["metadata"]["name"])
                if group:  # whose lines these are: each node's pod, head first
                    text += (f"[rgt] ---- node {index_of(pod)}: pod "
                             f"{pod['metadata']['name']} ----\n")
                text += log
        if since_byte is not None:
            return text.encode()[int(since_byte):].decode(errors="replace")
        if lines is not None:
            return "\n".join(text.splitlines()[-lines:]) + ("\n" if lines else "")
        return text

    def cancel_grace(self, box: Box, run: Run) -> float | None:
        """The grace the run's pods really get: terminationGracePeriodSeconds as the cluster
        holds it (its live pods' spec, else the Job's pod template), set at launch from the
        measured checkpoint write; None when neither can be read."""
        job = str((run.spec.get("platform_run") or {}).get("job") or "")
        if not job:
            return None
        with kube_for(box) as kube:
            found = [(p.get("spec") or {}).get("terminationGracePeriodSeconds")
                     for p in self._pods(kube, run)
                     if not (p.get("metadata") or {}).get("deletionTimestamp")]
            if not any(isinstance(g, int | float) for g in found):
                spec = (kube.find(kube.ns(BATCH, "jobs", job)) or {}).get("spec") or {}
                found = [((spec.get("template") or {}).get("spec") or {})
                         .get("terminationGracePeriodSeconds")]
        graces = [float(g) for g in found if isinstance(g, int | float) and g >= 0]
        return max(graces) if graces else None

    def cancel(self, transport: Transport, box: Box, run: Run, grace_s: float
               ) -> dict[str, Any]:
        """`rgt cancel` the Kubernetes way: delete the Job; its pods get SIGTERM, then
        SIGKILL after their terminationGracePeriodSeconds (the checkpoint lead, set at launch;
        `cancel_grace` reads it back for `rgt cancel` to say), as on a preemption."""
        kube = transport.kube if isinstance(transport, DoorTransport) else kube_for(box)
        job = str((run.spec.get("platform_run") or {}).get("job") or "")
        gone = kube.delete(kube.ns(BATCH, "jobs", job)) if job else False
        sent = [f"delete job {job} (its pods: SIGTERM, SIGKILL after {grace_s:g} s)"
                if gone else f"job {job or '?'} already gone"]
        service = str((run.spec.get("platform_run") or {}).get("service") or "")
        if service:  # the Job owns it; deleted here too, should the owner patch have failed
            sent.append(f"delete its headless service {service}"
                        if kube.delete(kube.ns(CORE, "services", service))
                        else f"its headless service {service} went with the Job")
        return {"sent": sent, "escalated": False}

    # ------------------------------------------------------------------ rgt pull

    # ------------------------------------------------------------------ rgt down

    def stops_meter(self, box: Box) -> bool:
        return True

    def teardown(self, store: Store, box: Box) -> Teardown:
        """`rgt down`'s panel for this box: release deletes the PVC when rgt created it (the
        profile's tiers describe scaling the node pool down, which keeps every PVC)."""
        claim, created = box.extra.get("claim"), bool(box.extra.get("claim_created"))
        destroys = ["the box's Jobs and their pods (each pod's filesystem and emptyDir "
                    "volumes)"]
        keeps = []
        if claim and created:
            destroys.append(f"the PVC {claim} ({box.durable_dir}) and everything on it "
                            "(checkpoints, run dirs): rgt created it, so down deletes it")
        elif claim:
            keeps.append(f"the PVC {claim} ({box.durable_dir}): yours, rgt did not create it")
        return Teardown(destroys=destroys, keeps=keeps, still_billing=_still_billing(box),
                        notes=["rgt does not scale the node pool down (the profile's "
                               "meter-stop verb): the cluster's autoscaler or you do that"])

    def release(self, store: Store, box: Box) -> Released:
        """Delete the box's Jobs (their pods go with them), any door left behind, and the PVC
        rgt created; the nodes are the cluster's and keep billing — said plainly."""
        selector = f"{BOX_LABEL}={label_value(box.name)}," + ",".join(
            f"{k}={v}" for k, v in MANAGED.items())
        done = []
        with kube_for(box) as kube:
            jobs = kube.items(BATCH, "jobs", labels=selector)
            services = []
            with contextlib.suppress(ApiError):  # a user who may not list them made none
                services = kube.items(CORE, "services", labels=selector)
            for job in jobs:
                kube.delete(kube.ns(BATCH, "jobs", job["metadata"]["name"]))
            for service in services:  # multi-node jobs' headless Services (their Job owns
                # them, but the garbage collector takes its time, and an unowned one is ours)
                kube.delete(kube.ns(CORE, "services", service["metadata"]["name"]))
            doors = kube.items(CORE, "pods", labels=f"{selector},{PART_LABEL}=door")
            for pod in doors:  # and the token Secret each door names (its own name)
                kube.delete(kube.ns(CORE, "secrets", pod["metadata"]["name"]))
                kube.delete(kube.ns(CORE, "pods", pod["metadata"]["name"]))
            done.append(f"deleted {len(jobs)} Job(s) and their pods"
                        + (f", {len(services)} headless Service(s)" if services else "")
                        + (f", {len(doors)} door pod(s)" if doors else ""))
            claim = box.extra.get("claim")
            still = _still_billing(box)
            if box.extra.get("claim_created") and claim:
                kube.delete(kube.ns(CORE, "persistentvolumeclaims", claim))
                done.append(f"deleted the PVC {claim} rgt created (`down` ran: its results "
                            "were pulled and verified, or you gave them up)")
            elif claim:
                done.append(f"kept the PVC {claim} (yours: rgt did not create it)")
        for run in store.runs(box.name):
            if run.status in LIVE:
                store.update_run(run.id, status="cancelled")
        store.update_box(box.name, extra={**box.extra, "still_billing": still})
        return Released("; ".join(done) + ". The nodes keep billing until the node pool is "
                        "scaled down — rgt cannot do that", still_billing=still)

    # ------------------------------------------------------------------ rgt audit

    def audit_extras(self, transport: Transport, box: Box) -> dict[str, Any]:
        kube = transport.kube if isinstance(transport, DoorTransport) else kube_for(box)
        verdicts = []
        pvc = kube.find(kube.ns(CORE, "persistentvolumeclaims", box.extra["claim"])) or {}
        phase = (pvc.get("status") or {}).get("phase", "missing")
        modes = (pvc.get("spec") or {}).get("accessModes") or []
        verdicts.append({"level": "ok" if phase == "Bound" else "warn", "id": "K8S",
                         "message": f"PVC {box.extra['claim']}: {phase}, {', '.join(modes)}"})
        if "ReadWriteOnce" in modes:
            verdicts.append({"level": "ok", "id": "K8S4", "message": "ReadWriteOnce: one node "
                             "at a time — fine for one pod; a replacement pod on another node "
                             "waits for the detach (Multi-Attach) before it starts"})
        gpus = box.extra.get("gpus_per_node")
        with contextlib.suppress(ApiError):
            gpus = gpu_capacity(kube, lambda _: None)
        verdicts.append({"level": "ok", "id": "K8S6", "message": "the checks above ran in the "
                         "PVC's door pod, which asks for no GPU: its GPU lines describe that "
                         "pod, not your Job's; GPUs per node: " + (", ".join(
                             f"{n} {c}" for n, c in (gpus or {}).items()) or "unknown")})
        if gpus is not None and not any(gpus.values()):
            verdicts.append({"level": "warn", "id": "K8S1", "message": "no node advertises "
                             "nvidia.com/gpu: GPU pods stay Pending (device plugin down?)"})
        multi_node, more = audit_verdicts(kube, modes)
        verdicts += more
        return {"kubernetes": {"gpus_per_node": gpus, "pvc": {"phase": phase, "modes": modes},
                               "multi_node": multi_node, "verdicts": verdicts}}


def _still_billing(box: Box) -> list[str]:
    """What bills after `release`: the nodes always; the PVC when it is the user's (kept)."""
    still = [("the cluster's GPU nodes: deleting a Job frees the pod, not the machine; they "
              "bill until the autoscaler removes them or you scale the node pool down "
              "(scale-down-node-pool)")]
    claim = box.extra.get("claim")
    if claim and not box.extra.get("claim_created"):
        still.append(f"the PVC {claim}'s volume, at the storage class's price, until you "
                     "delete it")
    return still


def measured_write_s(transport: Transport, home: str, override: str | None) -> float | None:
    """The checkpoint write time rgt.ckpt measured (`write_s` in the newest sidecars of the
    job's checkpoint home), or the spec's RGT_CKPT_WRITE_S; None when neither says."""
    if override:
        try:
            return max(0.0, float(override))
        except ValueError:
            raise UserError(f"{ENV_CKPT_WRITE_S} must be seconds, not {override!r}") from None
    quoted = shlex.quote(home)
    out = transport.run(f"ls -t {quoted}/*.json 2>/dev/null | head -n 5 | "
                        'while read -r f; do head -c 4096 "$f"; echo; done', check=False,
                        timeout=60).stdout
    times = []
    for line in out.splitlines():  # the box wrote these: numbers in a sane range, or nothing
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            value = float(json.loads(line).get("write_s"))
            if 0 <= value <= 24 * 3600:
                times.append(value)
    return max(times) if times else None

