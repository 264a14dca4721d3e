"""dstack task files (`type: task`), read as rgt job specs with the meaning dstack gives them
(dstack docs: concepts/tasks.md, reference/dstack.yml/task.md; the run's script as
dstack's server builds it: jobs/configurators/base.py `_join_shell_commands`).

    commands: [a, b]                 run: `a && b` (dstack stops at the first failure; a
                                     command ending in `&` is wrapped in { }); runs once on
                                     every node with DSTACK_* set (rgt.remote.node_env)
    setup: [..]                      setup (dstack's older word)
    env: [A=1, B] or {A: 1, B: null} env; B, with no value, read from this shell and sent
                                     as a secret (dstack reads it from the user's shell too)
    files: [src, src:dst]            pushed: every source inside the configuration's folder,
                                     which rgt pushes; a destination other than the same
                                     relative path is copied there before setup
    repos: [.] / [..]                a local repo: the folder rgt pushes (a URL: refused,
                                     clone it in commands)
    image                            resources.image
    resources.gpu: A100:2,           resources.gpu (+ gpu_alternatives for A100,H100); count
      A100,H100:80GB:1..2, MI300X,   ranges take their least; a GPU asked for by memory only
      24GB.., amd:192GB:2            becomes every model rgt knows with that much
                                     (GPU_MEMORY_GB), smallest first
    resources.cpu / memory / disk    resources.cpus / mem / disk, the least of a range
    nodes                            resources.nodes
    max_duration: 2h | 3600 | off    resources.time
    spot_policy: spot | on-demand |  resources.spot (auto: on-demand, which auto allows)
      auto
    python, nvcc, ports, retry,      noted: rgt runs the box's own Python and CUDA, opens no
      resources.shm_size, tags       port, restarts only with recover:, takes the box's /dev/shm

Other `type:`s (service, dev-environment, fleet, volume, gateway) are refused as what they
are; any other field is refused by name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rgt import taskfiles
from rgt.errors import UserError

TASK_FIELDS = {"type", "name", "commands", "setup", "env", "files", "repos", "image",
               "resources", "nodes", "max_duration", "spot_policy", "python", "nvcc", "ports",
               "retry", "tags"}
NOTED = {"python": "rgt runs the box's own Python (dstack installs this one in its image)",
         "nvcc": "rgt runs the box's own CUDA toolkit",
         "ports": "rgt opens no port; reach it from this machine with `rgt ssh BOX --port "
                  "PORT`, which forwards it and prints http://127.0.0.1:PORT",
         "retry": "rgt restarts a run only with an rgt spec's `recover:`",
         "tags": "rgt keeps no tags"}
OTHER_TYPES = {
    "service": "a dstack service: services are not run by rgt; run the server as a task "
               "(type: task) and reach its port with `rgt ssh BOX --port PORT`",
    "dev-environment": "a dstack dev environment: rgt runs no IDE; `rgt up` a box and ssh in",
    "fleet": "a dstack fleet: rgt has no fleets; `rgt up` registers or rents a box",
    "volume": "a dstack volume: rgt creates no volumes; the box's durable dir is kept",
    "gateway": "a dstack gateway: rgt runs no gateways",
}
VENDORS = {"nvidia", "amd", "google", "tpu", "intel", "tenstorrent"}
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*(MB|GB|TB)?(\.\.(\d+(?:\.\d+)?\s*(MB|GB|TB)?)?)?$",
                     re.IGNORECASE)
_COUNT = re.compile(r"^(\d+)(\.\.(\d+)?)?$")
_INTERPOLATION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
# GPU models by memory (GB, the smallest variant sold), for a dstack GPU asked for by memory:
# the names match nvidia-smi's / rocm-smi's the way rgt's resource check does (by substring).
GPU_MEMORY_GB = {"nvidia": [("T4", 16), ("V100", 16), ("A10G", 24), ("A10", 24), ("L4", 24),
                            ("RTX3090", 24), ("RTX4090", 24), ("A5000", 24), ("A100", 40),
                            ("L40S", 48), ("L40", 48), ("A6000", 48), ("A40", 48), ("H100", 80),
                            ("GH200", 96), ("H200", 141), ("B200", 180)],
                 "amd": [("MI300X", 192), ("MI325X", 256)]}


def is_dstack(data: dict[str, Any]) -> bool:
    """dstack's configurations all say what they are in `type:`; an rgt spec has none."""
    return "type" in data and isinstance(data["type"], str)


def to_spec(data: dict[str, Any], *, path: Path) -> tuple[dict[str, Any], list[str]]:
    """The rgt spec (as data for JobSpec) a dstack task asks for, and notes."""
    kind = data["type"]
    if kind != "task":
        raise UserError(f"is {OTHER_TYPES.get(kind, f'a dstack {kind!r} configuration')}"
                        if kind in OTHER_TYPES or kind else "has an empty `type`")
    unknown = sorted(set(data) - TASK_FIELDS)
    if unknown:
        raise UserError(f"dstack field `{unknown[0]}` has no rgt equivalent; remove it (rgt "
                        f"takes {', '.join(sorted(TASK_FIELDS - {'type'}))})")
    commands = _lines(data.get("commands"), "commands")
    if not commands:
        raise UserError("the dstack task has no `commands`: rgt needs the command to run")
    port = str(data.get("ports")).strip("[]'\"").split(",")[0].split(":")[0].strip()
    notes = [f"{k} {data[k]!r} is not applied: {why.replace('PORT', port)}"
             for k, why in NOTED.items() if data.get(k) is not None]
    stem = path.name.split(".")[0] or path.parent.resolve().name
    spec: dict[str, Any] = {
        "name": str(data.get("name") or re.sub(r"[^A-Za-z0-9_.\-]", "-", stem).strip("-.")
                    or "task"),
        "run": _run_args(_join(commands)), "dialect": "dstack",
        "setup": _run_args("\n".join(_lines(data.get("setup"), "setup")))}
    env, asked = _env(data.get("env"))
    spec["env"], spec["secrets"] = env, taskfiles.from_shell(asked, "env")
    base = path.parent.resolve()
    pushed = _repo(data.get("repos"), base)
    copies = []
    for entry in _lines(data.get("files"), "files"):
        local, _, remote = entry.partition(":")
        src = taskfiles.resolve(local, base)
        if pushed is None:
            pushed = base
        mirrored = not remote or (not remote.startswith(("/", "~"))
                                  and (base / remote).resolve() == src)
        if mirrored and not local.startswith("~") and src.is_relative_to(pushed):
            if not src.exists():
                raise UserError(f"files: {src} does not exist here")
            continue  # already at the same relative place in the pushed code
        if src == pushed and not remote.startswith(("/", "~")):
            raise UserError(f"files {entry!r}: that folder is what rgt pushes, and it is the "
                            "working dir itself; drop the entry and use paths relative to it")
        copies.append((remote or local, src))
    pushed = pushed or taskfiles.empty_workdir()
    spec["workdir"] = str(pushed)
    lines = taskfiles.copy_lines([(_container(d), s) for d, s in copies], pushed, "files",
                                 relative_ok=True)
    spec["setup"] = "\n".join([*lines, spec["setup"]]).strip("\n")
    resources, more = _resources(data)
    spec["resources"], notes = resources, notes + more
    return spec, notes


def _join(commands: list[str]) -> str:
    """dstack's own joining: `&&` between commands, a background one wrapped in braces."""
    out = []
    for command in commands:
        command = command.strip()
        out.append(f"{{ {command} }}" if command.endswith("&") else command)
    return " && ".join(out)


def _run_args(text: str) -> str:
    """`${{ run.args }}` is what followed `--` on dstack's command line: nothing here. Any
    other `${{ … }}` (secrets, env) is dstack's to fill in, so it is refused by name."""
    for match in _INTERPOLATION.finditer(text):
        if match[1] != "run.args":
            raise UserError(f"`${{{{ {match[1]} }}}}` is filled in by dstack; write the value, "
                            "or use an env entry without a value (read from this shell)")
    return _INTERPOLATION.sub("", text)


def _container(dst: str) -> str:
    """A container path as rgt's copy takes it: a relative one is the job's working dir's."""
    return dst if dst.startswith(("/", "~")) else f"./{dst}"


def _repo(repos: Any, base: Path) -> Path | None:
    if repos is None:
        return None
    items = repos if isinstance(repos, list) else [repos]
    if len(items) != 1:
        raise UserError("dstack `repos`: rgt pushes one folder; give one local repo")
    item = items[0].get("local_path") if isinstance(items[0], dict) else items[0]
    if not isinstance(item, str) or "://" in item or item.startswith("git@"):
        raise UserError(f"dstack `repos` {items[0]!r}: rgt does not clone repositories; "
                        "`git clone` it in `commands`")
    path = taskfiles.resolve(item.split(":")[0], base)
    if not path.is_dir():
        raise UserError(f"dstack `repos`: {path} is not a directory")
    return path


def _lines(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise UserError(f"dstack `{field}` must be a list of strings")
    return [str(v) for v in value]


def _env(given: Any) -> tuple[dict[str, str], list[str]]:
    """(values, names read from this shell) from `[A=1, B]` or `{A: 1, B: null}`."""
    if given is None:
        return {}, []
    if isinstance(given, dict):
        pairs = [(str(k), None if v is None else str(v)) for k, v in given.items()]
    elif isinstance(given, list):
        pairs = [(str(e).partition("=")[0], str(e).partition("=")[2] if "=" in str(e)
                  else None) for e in given]
    else:
        raise UserError("dstack `env` must be a list of NAME=value / NAME, or a mapping")
    for _, value in pairs:
        if value is not None:
            _run_args(value)
    return ({k: v for k, v in pairs if v is not None}, [k for k, v in pairs if v is None])


def _resources(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    given = data.get("resources") or {}
    if not isinstance(given, dict):
        raise UserError("dstack `resources` must be a mapping")
    notes = []
    unknown = sorted(set(given) - {"gpu", "cpu", "memory", "disk", "shm_size"})
    if unknown:
        raise UserError(f"dstack field `resources.{unknown[0]}` has no rgt equivalent")
    out: dict[str, Any] = {}
    if given.get("gpu") is not None:
        choices = _gpu(given["gpu"], notes)
        out["gpu"] = choices[0]
        if len(choices) > 1:
            out["gpu_alternatives"] = choices
    if given.get("cpu") is not None:
        cpu = given["cpu"]
        text = str(cpu.get("count") if isinstance(cpu, dict) else cpu).split(":")[-1]
        match = _COUNT.match(text.strip())
        if not match or int(match[1]) < 1:
            raise UserError(f"resources.cpu {cpu!r}: expected a count or range such as 8..")
        out["cpus"] = int(match[1])
    for field, key in (("memory", "mem"), ("disk", "disk")):
        value = given.get(field)
        if isinstance(value, dict):
            value = value.get("size")
        if value is not None:
            out[key] = _gigabytes(value, f"resources.{field}")
    if given.get("shm_size") is not None:
        notes.append(f"resources.shm_size {given['shm_size']!r} is not applied: rgt takes the "
                     "box's /dev/shm as it is")
    if data.get("nodes") is not None:
        match = _COUNT.match(str(data["nodes"]).strip())
        if not match or int(match[1]) < 1:
            raise UserError(f"nodes {data['nodes']!r}: expected a count such as 2")
        out["nodes"] = int(match[1])
    duration = data.get("max_duration")
    if duration is not None and str(duration) != "off" and duration is not False:
        out["time"] = f"{duration}s" if isinstance(duration, int) else str(duration)
    policy = data.get("spot_policy")
    if policy is not None:
        if policy not in ("spot", "on-demand", "auto"):
            raise UserError(f"spot_policy {policy!r}: expected spot, on-demand or auto")
        out["spot"] = policy == "spot"
    image = data.get("image")
    if image is not None:
        out["image"] = str(image)
    return out, notes


def _gpu(value: Any, notes: list[str]) -> list[str]:
    """dstack's `[vendor:]name[,name…][:memory][:count]` (or its mapping form) as rgt's
    MODEL:COUNT choices, first preferred."""
    if isinstance(value, dict):
        names = value.get("name") or []
        names = [names] if isinstance(names, str) else list(names)
        count, memory = str(value.get("count", 1)), value.get("memory")
    elif isinstance(value, str | int):
        names, count, memory = [], "1", None
        for token in str(value).split(":"):
            token = token.strip()
            if _COUNT.match(token):
                count = token
            elif _MEMORY.match(token) and re.search(r"[GMT]B|\.\.", token, re.IGNORECASE):
                memory = token
            elif token.lower() not in VENDORS:
                names += [n.strip() for n in token.split(",") if n.strip()]
    else:
        raise UserError(f"resources.gpu {value!r}: expected e.g. A100:2 or H100,A100:80GB:1")
    least = int(_COUNT.match(count.strip())[1]) if _COUNT.match(count.strip()) else None
    if least is None or least < 1:
        raise UserError(f"resources.gpu {value!r}: the count must be a whole number above 0")
    if not names:  # any GPU with that much memory: every model that has it, smallest first
        vendor = "amd" if "amd" in str(value).lower().split(":") else "nvidia"
        least_gb = _gigabytes(memory, "resources.gpu memory") if memory else "0G"
        floor = float(least_gb[:-1]) * {"M": 1 / 1024, "G": 1, "T": 1024}[least_gb[-1]]
        names = [m for m, gb in sorted(GPU_MEMORY_GB[vendor], key=lambda x: x[1])
                 if gb >= floor]
        if not names:
            raise UserError(f"resources.gpu {value!r}: rgt knows no {vendor} GPU with that "
                            "much memory; name the model")
        which = f"with at least {least_gb}B " if memory else ""
        notes.append(f"resources.gpu {value}: any of {', '.join(names)} (the {vendor} GPUs "
                     f"{which}rgt knows by name; a larger one than a range's top runs the "
                     "job the same), first preferred")
    tpu = [n for n in names if re.match(r"^tpu-|^v\d+[a-z]*-\d+$", n, re.IGNORECASE)]
    if tpu:
        raise UserError(f"resources.gpu {tpu[0]} is a TPU: rgt runs NVIDIA/AMD GPU jobs only")
    return [f"{n}:{least}" for n in names]


def _gigabytes(value: Any, field: str) -> str:
    match = _MEMORY.match(str(value).strip())
    if not match:
        raise UserError(f"{field} {value!r}: expected a size such as 64GB or a range 64GB..")
    unit = (match[2] or "GB").upper()
    return f"{float(match[1]):g}{unit[0]}"
