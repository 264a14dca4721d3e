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

--infra / --instance-type (the command line's overrides, SkyPilot's `sky launch --infra k8s
task.yaml`, `-t none`; sky/client/cli/command.py `_handle_infra_cloud_region_zone_options`,
`_parse_override_params`, sky/task.py `set_resources_override`):

    --infra box | '*'           the task runs on the box `rgt run` names (SkyPilot's '*':
                                any infra; the box is rgt's choice of one), read as a task
                                of the box's own platform (k8s: an image_id is an image)
    --infra k8s[/CONTEXT],      the same, where it names the box's platform; another platform
      ssh[/POOL], slurm,        rgt has, or a cloud it has not (aws …), is refused naming the
      runpod[/REGION], lambda,  box's own
      vast
    what it replaces            resources.infra / cloud / region / zone, and every any_of /
                                ordered candidate's (SkyPilot overrides each candidate), said
                                in one note
    instance_type               kept, and read against the new infra: one of another cloud is
                                refused, as SkyPilot refuses it ("Invalid instance type for
                                cloud"), naming `--instance-type none`
    --instance-type none        drops it (SkyPilot's `-t none`); the task's accelerators are
                                the GPU request, or what the type held where rgt can read it
                                (Lambda, RunPod, vast.ai, Kubernetes names); neither: refused
                                by name, since the GPUs the task asks for cannot be told
    --instance-type NAME        replaces it, read as the file's would be

A pipeline's stages each take the override (SkyPilot ignores overrides on a multi-task file,
with a warning; rgt runs every stage on the box named).

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
from dataclasses import dataclass
from typing import Any

from rgt.errors import UserError

# the infra names (SkyPilot's words) of the platforms rgt has; '*' is any
RGT_INFRA = {"kubernetes", "k8s", "slurm", "ssh", "runpod", "lambda", "vast", "*"}
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
    cloud = (cloud or "").lower().split("/")[0]
    cloud = None if cloud in ("", "*") else cloud  # '*': any infra, as if none were named
    field = f"resources.instance_type {text!r}"
    for reader in (_lambda, _runpod, _vast, _kubernetes):
        read = reader(text)
        if read is not None and cloud in (None, read[0], *_ALIASES.get(read[0], ())):
            platform, resources = read
            rents = ("`rgt up --profile lambda --gpu " + text + "` rents exactly it"
                     if platform == "lambda" else f"`rgt up --profile {platform}` rents by them")
            return resources, [f"{field} is taken as what it holds on {platform}: "
                               f"{_said(resources)} ({rents})"]
    owner = cloud or cloud_of(text)  # (no reader took it: one of _ELSEWHERE's, or None)
    if owner is None or owner in RGT_INFRA:
        raise UserError(f"{field} is not a name rgt can read for "
                        f"{owner or 'any platform it has'} (Lambda gpu_1x_h100_pcie, RunPod "
                        "1x_H100_SECURE, vast.ai 1x-RTX_4090-16-64000, Kubernetes "
                        "4CPU--16GB--H100:1); ask for what it holds instead: accelerators, "
                        "cpus, memory")
    nearest = NEAREST.get(owner, "generic-ssh (a machine you started there)")
    raise UserError(f"{field} is {article(owner)} {owner} instance type: rgt has no {owner} "
                    f"platform; the "
                    f"nearest rgt profile is {nearest}; remove it and ask for what it holds "
                    "(accelerators, cpus, memory), or run with `--instance-type none` (and "
                    "`--infra box`) to drop it")


_ALIASES = {"kubernetes": ("k8s",), "vast": ("vastai",)}


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeio" else "a"


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


def cloud_of(name: Any) -> str | None:
    """The platform or cloud an instance type's name belongs to (lambda, runpod, vast,
    kubernetes; aws, azure, oci, gcp), or None where its shape is no one's rgt knows."""
    text = str(name).strip()
    for reader in (_lambda, _runpod, _vast, _kubernetes):
        read = reader(text)
        if read is not None:
            return read[0]
    return next((c for pattern, c in _ELSEWHERE if pattern.match(text)), None)


# -- the command line's overrides: --infra, --instance-type ------------------------------------

PLACEMENT = ("infra", "cloud", "region", "zone")
_CANONICAL = {alias: name for name, aliases in _ALIASES.items() for alias in (name, *aliases)}
_OWN_PLATFORM = {"runpod": "runpod", "lambda": "lambda", "vastai": "vast"}
_OWN_KIND = {"kubernetes": "kubernetes", "slurm": "slurm", "ssh": "ssh", "local": "ssh",
             "ssh-rental": "ssh"}
# what the part after a cluster platform's name is to SkyPilot (not a region)
_CLUSTER_PART = {"kubernetes": "context", "ssh": "node pool", "slurm": "cluster"}


@dataclass(frozen=True)
class Overrides:
    """The overrides given on the command line, and the box (its profile's facts) the task
    runs on; `box` names it in messages ("box gpu1", "profile slurm")."""

    infra: str | None
    instance_type: str | None
    box: str
    platform: str
    kind: str

    @property
    def own(self) -> str:
        """The box's platform in SkyPilot's infra words; '*' where SkyPilot has none."""
        return _OWN_PLATFORM.get(self.platform) or _OWN_KIND.get(self.kind) or "*"


def overrides(infra: str | None, instance_type: str | None, box: str,
              profile: str) -> Overrides | None:
    """The overrides for a task run on a box of `profile`; None when none was given."""
    if infra is None and instance_type is None:
        return None
    if instance_type is not None and not instance_type.strip():  # not the file's own fault
        raise UserError("--instance-type is empty: give a type, or `none` to drop the task's")
    from rgt.profiles import load_profile  # the profile's facts, read only when overriding

    facts = load_profile(profile).facts
    return Overrides(infra, instance_type, box, facts.platform, facts.kind)


def override(given: Any, where: Overrides) -> tuple[Any, list[str]]:
    """A task's `resources` with the command line's overrides put in, as SkyPilot puts them
    (every candidate's placement replaced), and one note for each thing replaced."""
    if not isinstance(given, dict):
        return given, []  # the task's reader refuses it by name
    out, notes = dict(given), []
    target = None
    if where.infra is not None:
        infra, target, said = _infra(where)
        pins = [f"resources.{k} {out.pop(k)!r}" for k in PLACEMENT if k in given]
        for key in ("any_of", "ordered"):
            if isinstance(out.get(key), list):
                candidates = []
                for i, candidate in enumerate(out[key]):
                    if isinstance(candidate, dict):
                        pins += [f"{key}[{i}].{k} {candidate[k]!r}" for k in PLACEMENT
                                 if k in candidate]
                        candidate = {k: v for k, v in candidate.items() if k not in PLACEMENT}
                    candidates.append(candidate)
                out[key] = candidates
        out["infra"] = infra
        image = given.get("image_id")
        if isinstance(image, str) and not image.startswith("docker:") and _CANONICAL.get(
                str(given.get("infra") or given.get("cloud") or "").lower().split("/")[0],
                "") == "kubernetes":
            out["image_id"] = f"docker:{image}"  # its meaning on the infra the file named
        if pins:
            notes.append(f"--infra {where.infra} overrides the task's {', '.join(pins)}: it "
                         f"runs on {where.box} ({where.platform}), as `sky launch --infra "
                         f"{infra}` runs it{said}")
    if given.get("instance_type") is not None:
        text = str(given["instance_type"]).strip()
        if where.instance_type is not None and where.instance_type.lower() != "none":
            out["instance_type"] = where.instance_type
            notes.append(f"--instance-type {where.instance_type} replaces the task's "
                         f"resources.instance_type {text!r}")
        elif where.instance_type is not None:
            del out["instance_type"]
            notes.append(_dropped(out, text))
        elif target is not None and _CANONICAL.get(cloud_of(text) or "", cloud_of(text)) != target:
            raise UserError(_foreign_type(text, where, target, out))
    elif where.instance_type is not None and where.instance_type.lower() != "none":
        out["instance_type"] = where.instance_type
    return out, notes


def _infra(where: Overrides) -> tuple[str, str, str]:
    """(the infra the task takes, its platform, what the note adds) for --infra; a
    UserError naming the box's own platform where it names another, or a cloud rgt lacks."""
    value = str(where.infra).strip()
    parts = value.split("/")
    named = parts[0].lower()
    if not named:
        raise UserError(f"--infra {value!r}: give `box` (the box you name), or its platform "
                        "in SkyPilot's words (k8s, ssh, slurm, runpod, lambda, vast)")
    cloud = where.own if named in ("box", "*") else _CANONICAL.get(named, named)
    if named not in ("box", "*") and cloud != where.own:
        if cloud in RGT_INFRA:
            raise UserError(f"--infra {value} names {cloud}, but {where.box} is a "
                            f"{where.platform} box: `--infra box` runs the task there (the "
                            "box you name is where it runs)")
        nearest = NEAREST.get(cloud, "generic-ssh (a machine you started there)")
        raise UserError(f"--infra {value}: rgt has no {cloud} platform (the nearest rgt "
                        f"profile is {nearest}); `--infra box` runs the task on {where.box} "
                        f"({where.platform}), the box you name")
    rest = [p for p in parts[1:] if p not in ("", "*")]
    if named == "box" and rest:
        raise UserError(f"--infra {value}: `box` takes nothing after it (the box is the one "
                        "you name)")
    said = ""
    if cloud in _CLUSTER_PART and rest and named not in ("box", "*"):
        said = (f" ({_CLUSTER_PART[cloud]} {'/'.join(parts[1:])!r}: the box's own "
                f"{_CLUSTER_PART[cloud]} is the one it runs on)")
        return cloud, cloud, said
    if len(rest) > 1 or (len(parts) > 2 and parts[2] not in ("", "*")):
        raise UserError(f"--infra {value}: a zone has no rgt equivalent (rgt places a job by "
                        "region at most); give CLOUD/REGION")
    if rest and cloud in ("*", "ssh", "slurm", "kubernetes"):
        raise UserError(f"--infra {value}: a region means nothing on {where.box} "
                        f"({where.platform}); give --infra box")
    return (f"{cloud}/{rest[0]}" if rest else cloud), cloud, said


def _accelerated(resources: dict[str, Any]) -> bool:
    candidates = [c for key in ("any_of", "ordered") if isinstance(resources.get(key), list)
                  for c in resources[key] if isinstance(c, dict)]  # (not a list: refused later)
    return any("accelerators" in r or "gpus" in r for r in [resources, *candidates])


def _dropped(resources: dict[str, Any], text: str) -> str:
    """`--instance-type none`: the note on what the GPU request is once the type is gone; a
    UserError where it cannot be told (a type rgt cannot read, and no accelerators)."""
    head = f"--instance-type none drops the task's resources.instance_type {text!r}"
    if _accelerated(resources):
        return f"{head}; the GPU request is the task's accelerators"
    try:
        held, _ = instance_type(text, None)
    except UserError:
        raise UserError(f"{head}, and the task names no accelerators: the GPUs it asks for "
                        f"cannot be told without it; add what {text} holds to the file "
                        "(`resources.accelerators: NAME:COUNT`), or remove both if it needs "
                        "no GPU") from None
    if "gpu" in held:
        resources["accelerators"] = held["gpu"]
    return f"{head}; the GPUs it held, {held.get('gpu', 'none')}, are the request"


def _foreign_type(text: str, where: Overrides, target: str, resources: dict[str, Any]) -> str:
    """SkyPilot refuses an instance type the new infra lacks ("Invalid instance type … for
    cloud …"); so does rgt, naming the override that drops it."""
    mine = cloud_of(text)
    what = f"{article(mine)} {mine} instance type" if mine else \
        "an instance type of no platform rgt has"
    then = ("its GPUs then come from the task's accelerators" if _accelerated(resources)
            else "the task names no accelerators: unless rgt reads what the type holds, add "
                 "them to the file (`resources.accelerators: NAME:COUNT`)")
    return (f"resources.instance_type {text!r} is {what}, which {where.box} "
            f"({where.platform}) does not have (SkyPilot refuses it under --infra too): add "
            f"`--instance-type none` to drop it; {then}")


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
