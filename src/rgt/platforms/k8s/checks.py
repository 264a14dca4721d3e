"""What `rgt up` checks and makes on a cluster before a Kubernetes box exists: the namespace,
RBAC (SelfSubjectAccessReview for every verb rgt uses), GPUs per node, a storage class that can
bind the claim, the claim itself — and how it is undone when a later step fails."""

from __future__ import annotations

from rgt.errors import UserError
from rgt.platforms.base import Request
from rgt.platforms.k8s.api import CORE, STORAGE, ApiError, Kube
from rgt.platforms.k8s.kubeconfig import load_kubeconfig, resolve
from rgt.platforms.k8s.manifests import pvc_manifest
from rgt.store import Box, Store

DEFAULT_DISK = "50G"

# what rgt does in the namespace: (verb, resource, group, subresource)
NEEDED = [("create", "jobs", "batch", ""), ("get", "jobs", "batch", ""),
          ("delete", "jobs", "batch", ""), ("create", "persistentvolumeclaims", "", ""),
          ("create", "pods", "", ""), ("list", "pods", "", ""), ("delete", "pods", "", ""),
          ("get", "pods", "", "log"), ("get", "pods", "", "proxy"),
          ("create", "pods", "", "proxy"), ("update", "pods", "", "proxy"),
          ("list", "events", "", ""),
          # each door's token lives in a Secret made and deleted with it; rgt never lists or
          # reads secrets (that would show every Secret of the namespace)
          ("create", "secrets", "", ""), ("delete", "secrets", "", "")]


def kube_for(box: Box) -> Kube:
    conn = box.connection
    creds = resolve(load_kubeconfig(conn.get("kubeconfig")), conn.get("context"),
                    conn.get("namespace"))
    return Kube(creds)


def check_namespace(kube: Kube) -> None:
    try:
        kube.get(f"{CORE}/namespaces/{kube.namespace}")
    except ApiError as err:
        if err.code == 404:
            raise UserError(f"namespace {kube.namespace!r} does not exist in context "
                            f"{kube.creds.context}: pass --namespace (`kubectl get ns` "
                            "lists them) or ask for one to be created") from None
        if err.code != 403:  # a namespaced user may not read namespaces: fine
            raise

def check_access(kube: Kube) -> None:
    missing = []
    try:
        for verb, resource, group, sub in NEEDED:
            allowed, _ = kube.can_i(verb, resource, group, sub)
            if not allowed:
                what = f"{resource}/{sub}" if sub else resource
                missing.append(f"{verb} {what}{'.' + group if group else ''}")
    except ApiError as err:
        if err.code in (403, 404):
            return  # no SelfSubjectAccessReview here: the first refusal will say it
        raise
    if missing:
        raise UserError(f"RBAC: user {kube.creds.user or '?'} may not "
                        f"{', '.join(missing)} in namespace {kube.namespace} (context "
                        f"{kube.creds.context}); rgt needs them to run Jobs on a PVC — ask "
                        "the cluster admin for a Role (check: `kubectl auth can-i create "
                        f"jobs -n {kube.namespace}`)")

def gpu_capacity(kube: Kube, say) -> dict[str, int] | None:
    try:
        nodes = kube.get(f"{CORE}/nodes").get("items") or []
    except ApiError as err:
        if err.code == 403:
            say("cannot list nodes (a cluster-scoped read this user lacks): GPU capacity "
                "unknown until a pod is scheduled")
            return None
        raise
    gpus = {n["metadata"]["name"]: int(
        str(((n.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0))
        or 0) for n in nodes if isinstance(n, dict) and n.get("metadata")}
    if not any(gpus.values()):
        say("no node advertises nvidia.com/gpu: a GPU job will stay Pending (K8S1 — is "
            "the NVIDIA device plugin running? `kubectl get ds -n kube-system`)")
    return gpus

def check_storage_class(kube: Kube, wanted: str | None) -> None:
    try:
        classes = kube.get(f"{STORAGE}/storageclasses").get("items") or []
    except ApiError as err:
        if err.code == 403:
            return  # cannot look: the door's wait for the claim will tell
        raise
    names = [c["metadata"]["name"] for c in classes]
    if wanted and wanted not in names:
        raise UserError(f"--storage-class {wanted}: no such storage class (this cluster "
                        f"has: {', '.join(names) or 'none'})")
    default = [c["metadata"]["name"] for c in classes
               if (c["metadata"].get("annotations") or {}).get(
                   "storageclass.kubernetes.io/is-default-class") == "true"]
    if not wanted and not default:
        raise UserError("no default storage class: rgt's PVC would stay Pending forever; "
                        "pass --storage-class NAME (this cluster has: "
                        f"{', '.join(names) or 'none'}) or --claim with an existing PVC")

def create_claim(kube: Kube, box: Box, request: Request, opts: dict) -> None:
    manifest = pvc_manifest(box.extra["claim"], box.name,
                            request.resources.disk or DEFAULT_DISK,
                            storage_class=opts.get("storage_class"),
                            access_mode=opts.get("access_mode") or "ReadWriteOnce")
    try:
        kube.create(kube.ns(CORE, "persistentvolumeclaims"), manifest)
    except ApiError as err:
        if err.code == 409:
            raise UserError(f"a PVC named {box.extra['claim']} already exists in "
                            f"{kube.namespace} (an earlier box's?): reuse it with --claim "
                            f"{box.extra['claim']}, or delete it") from None
        raise


def undo_claim(store: Store, box: Box) -> None:
    try:
        with kube_for(box) as kube:
            kube.delete(kube.ns(CORE, "persistentvolumeclaims", box.extra["claim"]))
    except UserError as err:  # keep it visible: `rgt ls` shows the box, `down` removes it
        box.extra["note"] = f"up failed; the PVC could not be removed: {err}"
        store.add_box(box)
