"""A SkyPilot task's cloud-specific fields, `resources.instance_type` and `config:`, read with
SkyPilot's meaning where rgt has the platform, refused by name with the nearest rgt thing where
it has not.

instance_type (SkyPilot derives each cloud's names from its catalog: sky/catalog/data_fetchers,
and sky/provision/kubernetes/utils.py `KubernetesInstanceType`):

    lambda    gpu_8x_a100_80gb_sxm4, gpu_1x_h100_pcie   resources.gpu A100-80GB:8, H100:1
              (gpu_{N}x_{gpu}_<variant>; gpu_*_general: no GPU)
    runpod    1x_A100-80GB_SECURE, 2x_RTX4090_COMMUNITY resources.gpu A100-80GB:1,
                                                        RTX4090:2
    vast      2x-RTX_4090-16-64000 ({gpus}x-{gpu}-{cpus}-{ram MB})
                                                        resources.gpu RTX4090:2, cpus 16,
                                                        mem 62.5G
    kubernetes 4CPU--16GB--H100:1                       resources.cpus 4, mem 16G, gpu H100:1

Each also says, in a note, that `rgt up` rents the type itself (Lambda takes the name as --gpu).
A name of a cloud rgt has no platform for (AWS p4d.24xlarge, GCP a3-highgpu-8g, Azure
Standard_ND96asr_v4, OCI VM.GPU.A10.1 …) is refused naming that cloud and the nearest rgt
profile, as `infra` is.

config (SkyPilot's per-task overrides of its ~/.sky/config.yaml, docs reference/config):

    kubernetes.pod_config.metadata.labels            kubernetes.labels
    kubernetes.custom_metadata.labels                kubernetes.labels
    kubernetes.pod_config.spec.nodeSelector          kubernetes.node_selector
    kubernetes.pod_config.spec.tolerations           kubernetes.tolerations
    kubernetes.pod_config.spec.serviceAccountName    kubernetes.service_account
    kubernetes.pod_config.spec.priorityClassName     kubernetes.priority_class
    docker.run_options                               noted: rgt runs in the container the box
                                                     was started with

(the `kubernetes:` section an rgt spec has, so a Kubernetes box applies it and any other box
refuses it by name, where SkyPilot would drop it on another cloud). Anything else — a
container's securityContext, enable_docker, a cloud's provisioning settings, jobs controller
settings — is refused naming the path.
"""

from __future__ import annotations

import re
from typing import Any

from rgt.errors import UserError

# the clouds rgt has no platform for, and the rgt profile nearest to each (infra's refusal too)
NEAREST = {"aws": "kubernetes (EKS) or generic-ssh (an EC2 instance you started)",
           "gcp": "kubernetes (GKE) or generic-ssh (a VM you started)",
           "azure": "kubernetes (AKS) or generic-ssh (a VM you started)"}
KUBERNETES_SECTION = ("rgt's `kubernetes:` section (labels, node_selector, tolerations, "
                      "service_account, priority_class, image)")
_LAMBDA = re.compile(r"^gpu_(\d+)x_([a-z0-9]+)((?:_[a-z0-9]+)*)$")
_RUNPOD = re.compile(r"^(\d+)x_([A-Za-z0-9\-]+)_(SECURE|COMMUNITY)$")
_VAST = re.compile(r"^(\d+)x-([A-Za-z0-9_\-]+?)-(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)$")
_KUBERNETES = re.compile(r"^(?P<cpus>\d+(?:\.\d+)?)CPU--(?P<mem>\d+(?:\.\d+)?)GB"
                         r"(?:--(?P<gpu>[\w\-]+):(?P<count>\d+))?$")
# the shapes of the clouds rgt has no platform for, and their names in a refusal
_ELSEWHERE = (
    (re.compile(r"^[a-z][a-z0-9\-]*\.(?:\d*x?large|metal|medium|small|micro|nano)"
                r"(?:-[a-z0-9]+)?$"), "aws"),
    (re.compile(r"^(?:Standard|Basic)_[A-Za-z0-9_]+$"), "azure"),
    (re.compile(r"^(?:VM|BM)\.[A-Za-z0-9.]+(?:\$_\d+_\d+)?$"), "oci"),
    (re.compile(r"^[a-z][a-z0-9]*-(?:standard|highmem|highcpu|highgpu|megagpu|ultragpu|"
                r"ultramem|megamem|custom|edgegpu)[a-z0-9\-]*$"), "gcp"),
)


def instance_type(name: Any, cloud: str | None) -> tuple[dict[str, Any], list[str]]:
    """The resources an instance type holds, in rgt's vocabulary, and a note; a UserError
    for a type of a cloud rgt has no platform for. `cloud`: the task's infra/cloud, if any."""
    text = str(name).strip()
    cloud = (cloud or "").lower().split("/")[0] or None
    field = f"resources.instance_type {text!r}"
    for reader in (_lambda, _runpod, _vast, _kubernetes):
        read = reader(text)
        if read is not None and cloud in (None, "*", read[0], *_ALIASES.get(read[0], ())):
            platform, resources = read
            rents = ("`rgt up --profile lambda --gpu " + text + "` rents exactly it"
                     if platform == "lambda" else f"`rgt up --profile {platform}` rents by them")
            return resources, [f"{field} is taken as what it holds on {platform}: "
                               f"{_said(resources)} ({rents})"]
    owner = cloud or next((c for pattern, c in _ELSEWHERE if pattern.match(text)), None)
    if owner in (None, "kubernetes", "k8s", "slurm", "ssh", "runpod", "lambda", "vast"):
        raise UserError(f"{field} is not a name rgt can read for "
                        f"{owner or 'any platform it has'} (Lambda gpu_1x_h100_pcie, RunPod "
                        "1x_H100_SECURE, vast.ai 1x-RTX_4090-16-64000, Kubernetes "
                        "4CPU--16GB--H100:1); ask for what it holds instead: accelerators, "
                        "cpus, memory")
    nearest = NEAREST.get(owner, "generic-ssh (a machine you started there)")
    raise UserError(f"{field} is an {owner} instance type: rgt has no {owner} platform; the "
                    f"nearest rgt profile is {nearest}; remove it and ask for what it holds "
                    "(accelerators, cpus, memory)")


_ALIASES = {"kubernetes": ("k8s",), "vast": ("vastai",)}


def _said(resources: dict[str, Any]) -> str:
    words = {"gpu": "gpu", "cpus": "cpus", "mem": "mem"}
    return ", ".join(f"{words[k]} {resources[k]}" for k in words if k in resources) or "no GPU"


def _lambda(text: str) -> tuple[str, dict[str, Any]] | None:
    # SkyPilot's fetch_lambda_cloud.name_to_gpu_and_cnt: the third word, upper-cased
    match = _LAMBDA.match(text)
    if not match:
        return None
    count, gpu, variant = int(match[1]), match[2].upper(), match[3]
    if gpu == "GENERAL":
        return "lambda", {}
    if "_80gb" in variant:
        gpu += "-80GB"
    return "lambda", {"gpu": f"{gpu}:{count}"}


def _runpod(text: str) -> tuple[str, dict[str, Any]] | None:
    # SkyPilot's fetch_runpod: f'{count}x_{name}_SECURE' (COMMUNITY for community cloud)
    match = _RUNPOD.match(text)
    return ("runpod", {"gpu": f"{match[2]}:{int(match[1])}"}) if match else None


def _vast(text: str) -> tuple[str, dict[str, Any]] | None:
    # SkyPilot's fetch_vast.create_instance_type: '{gpus}x-{gpu_name, spaces as _}-{cores}-{MB}'
    match = _VAST.match(text)
    if not match or not int(match[1]):
        return None
    gpu = re.sub("Ada", "-Ada", match[2].replace("_", ""))
    gpu = re.sub(r"(RTX\d0\d0)(S|D)$", r"\1", re.sub(r"(Ti|PCIE|SXM4|SXM|NVL)$", "", gpu))
    gpu = _VAST_NAMES.get(gpu, gpu)
    return "vast", {"gpu": f"{gpu}:{int(match[1])}", "cpus": max(1, int(float(match[3]))),
                    "mem": f"{float(match[4]) / 1024:g}G"}


_VAST_NAMES = {"TeslaV100": "V100", "TeslaT4": "T4", "TeslaP100": "P100", "QRTX6000": "RTX6000",
               "QRTX8000": "RTX8000"}


def _kubernetes(text: str) -> tuple[str, dict[str, Any]] | None:
    match = _KUBERNETES.match(text)
    if not match:
        return None
    out: dict[str, Any] = {"cpus": max(1, round(float(match["cpus"]) + 0.4999)),
                           "mem": f"{float(match['mem']):g}G"}
    if match["gpu"] and int(match["count"]):
        out["gpu"] = f"{match['gpu']}:{int(match['count'])}"
    return "kubernetes", out


# -- config ------------------------------------------------------------------------------------

_POD_SPEC = {"nodeSelector": "node_selector", "tolerations": "tolerations",
             "serviceAccountName": "service_account", "priorityClassName": "priority_class"}


def config(given: Any) -> tuple[dict[str, Any], list[str]]:
    """The rgt spec sections a task's `config:` maps to ({"kubernetes": {...}} or {}), and
    notes; a UserError naming the first path rgt has nothing for."""
    if not isinstance(given, dict):
        raise UserError("SkyPilot `config` must be a mapping of settings")
    notes: list[str] = []
    kubernetes: dict[str, Any] = {}
    for key, value in given.items():
        if key == "docker" and isinstance(value, dict) and set(value) == {"run_options"}:
            options = value["run_options"]
            shown = " ".join(options) if isinstance(options, list) else str(options)
            notes.append(f"config.docker.run_options {shown!r} is not applied: rgt runs in the "
                         "box's container as it was started (its /dev/shm, IPC namespace and "
                         "capabilities)")
        elif key == "kubernetes" and isinstance(value, dict):
            _kubernetes_config(value, kubernetes)
        else:
            first = _first_path(value, f"config.{key}")
            raise UserError(f"SkyPilot field `{first}` has no rgt equivalent: rgt uses the "
                            f"box as it is; {_nearest(str(key))}")
    return ({"kubernetes": kubernetes} if kubernetes else {}), notes


def _kubernetes_config(given: dict[str, Any], out: dict[str, Any]) -> None:
    for key, value in given.items():
        if key == "custom_metadata" and isinstance(value, dict) and set(value) <= {"labels"}:
            _labels(value.get("labels"), out, "config.kubernetes.custom_metadata.labels")
        elif key == "pod_config" and isinstance(value, dict):
            _pod_config(value, out)
        else:
            raise _kubernetes_refusal(_first_path(value, f"config.kubernetes.{key}"))


def _pod_config(pod: dict[str, Any], out: dict[str, Any]) -> None:
    for key, value in pod.items():
        if key == "metadata" and isinstance(value, dict) and set(value) <= {"labels"}:
            _labels(value.get("labels"), out, "config.kubernetes.pod_config.metadata.labels")
        elif key == "spec" and isinstance(value, dict):
            for name, setting in value.items():
                if name not in _POD_SPEC:
                    raise _kubernetes_refusal(_first_path(
                        setting, f"config.kubernetes.pod_config.spec.{name}"))
                out[_POD_SPEC[name]] = setting
        else:
            raise _kubernetes_refusal(_first_path(value, f"config.kubernetes.pod_config.{key}"))


def _labels(labels: Any, out: dict[str, Any], field: str) -> None:
    if not isinstance(labels, dict):
        raise UserError(f"{field} must be a mapping of label: value")
    out.setdefault("labels", {}).update(labels)


def _kubernetes_refusal(path: str) -> UserError:
    return UserError(f"SkyPilot field `{path}` has no rgt equivalent: rgt's pods take only "
                    f"what {KUBERNETES_SECTION} sets; remove it, or set it up with the "
                    "cluster's own policy (a mutating webhook, a LimitRange)")


def _first_path(value: Any, path: str) -> str:
    """`path` down to the first leaf, so a refusal names what the file set (containers[0]…)."""
    while isinstance(value, dict | list) and value:
        if isinstance(value, list):
            path, value = f"{path}[0]", value[0]
        else:
            key = next(iter(value))
            path, value = f"{path}.{key}", value[key]
    return path


def _nearest(key: str) -> str:
    if key in ("aws", "gcp", "azure", "oci", "nebius", "lambda", "runpod", "vast", "ssh",
               "slurm"):
        return (f"{key}'s provisioning settings belong to `rgt up` (its flags for the "
                "platforms rgt has), not to a task")
    if key in ("jobs", "serve"):
        return "SkyPilot's controllers have no rgt counterpart: `rgt run` starts the job itself"
    return "remove it, or set the same up with the platform (`rgt up` options, the cluster's "\
           "own settings)"
