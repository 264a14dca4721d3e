"""SkyPilot task YAMLs, read as rgt job specs: the common subset, in the forms SkyPilot takes.

So a SkyPilot user runs `rgt run BOX task.yaml` on the file they have. What maps
(docs.skypilot.co reference/yaml-spec; sky/resources.py `_set_accelerators`, `_set_cpus`,
`_set_memory`):

    name, workdir, setup, run            the same words in an rgt spec
    envs: {K: V}                         env (a null value, "pass it with --env", refused)
    secrets: {K: null}                   secrets: names only; rgt reads values from this shell
    num_nodes: N                         resources.nodes
    resources.accelerators / gpus        resources.gpu: 'A100:2' or 'A100' (count 1); an
                                         ordered list ['L4:1', 'A100:1'] (first preferred) or a
                                         mapping {A100: 2, H100: 1} (any one of): the first is
                                         the request, all are kept in gpu_alternatives
    resources.cpus: 8 | '8+'             resources.cpus (at least that many)
    resources.memory: 32 | '32+'         resources.mem, GB
    resources.disk_size: 256             resources.disk, GB
    resources.use_spot                   resources.spot
    resources.image_id: docker:IMG       resources.image (only container images map)
    resources.region                     resources.region

Anything else (cloud, zone, instance_type, file_mounts, any_of, ports …) is refused by name:
rgt would otherwise run something other than what the file asks for.
"""

from __future__ import annotations

import math
import re
from typing import Any

from rgt.errors import UserError

TOP = {"name", "workdir", "setup", "run", "envs", "secrets", "num_nodes", "resources"}
RESOURCES = {"accelerators", "gpus", "cpus", "memory", "disk_size", "use_spot", "image_id",
             "region"}
# Keys only a SkyPilot task has: one of them marks the file as one (an rgt spec refuses them).
SKY_ONLY = {"envs", "num_nodes", "file_mounts", "service", "config", "event_callback",
            "experimental", "inputs", "outputs_size"}
SKY_RESOURCES = {"accelerators", "gpus", "memory", "disk_size", "use_spot", "image_id",
                 "cloud", "infra", "zone", "instance_type", "any_of", "ordered", "ports",
                 "labels", "disk_tier", "accelerator_args", "job_recovery", "spot_recovery",
                 "autostop"}
_ACCELERATOR = re.compile(r"^([A-Za-z0-9_\-]+)(?::(\d+))?$")
_AT_LEAST = re.compile(r"^(\d+(?:\.\d+)?)\+?$")


def is_skypilot(data: dict[str, Any]) -> bool:
    """A key only SkyPilot has; or no `name` (optional there, required in an rgt spec) and
    nothing but the words both share."""
    resources = data.get("resources")
    if SKY_ONLY & set(data) or (isinstance(resources, dict) and SKY_RESOURCES & set(resources)):
        return True
    return "name" not in data and set(data) <= TOP


def to_spec(data: dict[str, Any], *, default_name: str) -> dict[str, Any]:
    """The rgt spec (as data for JobSpec) a SkyPilot task asks for; a UserError naming the
    first field that has no rgt meaning."""
    unknown = sorted(set(data) - TOP)
    if unknown:
        raise UserError(f"SkyPilot field `{unknown[0]}` has no rgt equivalent; remove it (rgt "
                        "takes name, workdir, setup, run, envs, secrets, num_nodes and "
                        "resources.accelerators/cpus/memory/disk_size/use_spot/image_id)")
    if not data.get("run"):
        raise UserError("the SkyPilot task has no `run`: rgt needs the command to train with")
    name = str(data.get("name") or re.sub(r"[^A-Za-z0-9_.\-]", "-", default_name).strip("-."))
    spec: dict[str, Any] = {"name": name, "run": _text(data["run"], "run"),
                            "dialect": "skypilot"}
    for key in ("workdir", "setup"):
        if data.get(key) is not None:
            spec[key] = _text(data[key], key) if key == "setup" else data[key]
    envs = data.get("envs") or {}
    if not isinstance(envs, dict):
        raise UserError("SkyPilot `envs` must be a mapping NAME: value")
    missing = [k for k, v in envs.items() if v is None]
    if missing:
        raise UserError(f"envs.{missing[0]} has no value (SkyPilot takes it from --env); give "
                        "it a value in the file, or list it under `secrets` if it is one")
    spec["env"] = {str(k): str(v) for k, v in envs.items()}
    spec["secrets"] = _secret_names(data.get("secrets"))
    resources = dict(_resources(data.get("resources") or {}))
    if data.get("num_nodes") is not None:
        resources["nodes"] = _count(data["num_nodes"], "num_nodes")
    spec["resources"] = resources
    return spec


def _text(value: Any, field: str) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if not isinstance(value, str):
        raise UserError(f"SkyPilot `{field}` must be a string of shell commands")
    return value


def _secret_names(secrets: Any) -> list[str]:
    if secrets is None:
        return []
    if isinstance(secrets, list):
        return [str(s) for s in secrets]
    if not isinstance(secrets, dict):
        raise UserError("SkyPilot `secrets` must be a mapping NAME: null")
    given = [k for k, v in secrets.items() if v is not None]
    if given:
        raise UserError(f"secrets.{given[0]} has its value in the file: rgt reads secret values "
                        "from this shell's environment and sends them on stdin; write "
                        f"`{given[0]}: null` and `export {given[0]}=…` here")
    return [str(k) for k in secrets]


def _resources(given: Any) -> dict[str, Any]:
    if not isinstance(given, dict):
        raise UserError("SkyPilot `resources` must be a mapping (a list of candidates, "
                        "any_of or ordered, has no rgt equivalent)")
    unknown = sorted(set(given) - RESOURCES)
    if unknown:
        raise UserError(f"SkyPilot field `resources.{unknown[0]}` has no rgt equivalent; remove "
                        "it (the platform is rgt's --profile, and each platform maps the rest)")
    if "accelerators" in given and "gpus" in given:
        raise UserError("give `resources.accelerators` or its alias `gpus`, not both")
    out: dict[str, Any] = {}
    accelerators = given.get("accelerators", given.get("gpus"))
    if accelerators is not None:
        choices = _accelerators(accelerators)
        out["gpu"] = choices[0]
        if len(choices) > 1:
            out["gpu_alternatives"] = choices
    if given.get("cpus") is not None:
        out["cpus"] = math.ceil(_at_least(given["cpus"], "resources.cpus"))
    if given.get("memory") is not None:
        out["mem"] = f"{_at_least(given['memory'], 'resources.memory'):g}G"
    if given.get("disk_size") is not None:
        out["disk"] = f"{_count(given['disk_size'], 'resources.disk_size')}G"
    if given.get("use_spot") is not None:
        if not isinstance(given["use_spot"], bool):
            raise UserError("SkyPilot `resources.use_spot` must be true or false")
        out["spot"] = given["use_spot"]
    image = given.get("image_id")
    if image is not None:
        if not isinstance(image, str) or not image.startswith("docker:"):
            raise UserError(f"resources.image_id {image!r}: rgt maps container images only "
                            "(docker:IMAGE); a cloud's machine image has no rgt equivalent")
        out["image"] = image.removeprefix("docker:")
    if given.get("region") is not None:
        out["region"] = str(given["region"])
    return out


def _accelerators(value: Any) -> list[str]:
    """['A100:2'] from 'A100:2'; a list keeps its order; a mapping {A100: 2} is any one of."""
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        items = [str(v) for v in value]
    elif isinstance(value, dict):
        items = [f"{k}:{v}" if v is not None else str(k) for k, v in value.items()]
    else:
        raise UserError(f"resources.accelerators {value!r}: expected 'A100:2', a list of such, "
                        "or a mapping {A100: 2, H100: 1}")
    if not items:
        raise UserError("resources.accelerators is empty")
    out = []
    for item in items:
        match = _ACCELERATOR.match(item.strip())
        if not match or (match[2] is not None and int(match[2]) < 1):
            raise UserError(f"resources.accelerators {item!r}: expected NAME or NAME:COUNT with "
                            "a whole count (fractional GPUs have no rgt equivalent)")
        out.append(f"{match[1]}:{match[2] or 1}")
    return out


def _at_least(value: Any, field: str) -> float:
    """8, 8.5, '8' or '8+' (at least 8) as a number > 0."""
    match = _AT_LEAST.match(str(value).strip())
    if isinstance(value, bool) or not match or float(match[1]) <= 0:
        raise UserError(f"{field} {value!r}: expected a number or '<number>+', above 0")
    return float(match[1])


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{field} {value!r}: expected a whole number of at least 1")
    return value
