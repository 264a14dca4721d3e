"""SkyPilot task YAMLs, read as rgt job specs, with the meaning SkyPilot gives them.

So a SkyPilot user runs `rgt run BOX task.yaml` on the file they have. What maps
(docs.skypilot.co reference/yaml-spec; sky/resources.py `_set_accelerators`, `_set_cpus`,
`_set_memory`; sky/utils/infra_utils.py for `infra`):

    name, setup, run                     the same words in an rgt spec; `run` runs once on
                                         every node with SKYPILOT_* set (rgt.remote.node_env)
    workdir                              pushed; relative to where rgt runs, as SkyPilot
                                         reads it; none: nothing is uploaded (taskfiles)
    workdir: {url, ref}                  cloned on the box into the job's code dir, at ref
    file_mounts: {/dst: ./local}         pushed inside the workdir and copied to /dst before
                                         setup; a source outside it, or a local source in
                                         MOUNT mode (writes would go to a bucket), is refused;
                                         a relative /dst (or ~/sky_workdir/…) is in the
                                         workdir copy, as SkyPilot puts it
    file_mounts: {/dst: s3://b/p}        copied (COPY) or mounted (MOUNT) on the box with the
                                         tool it has, before setup (rgt.buckets)
    envs: {K: V}                         env; a null or empty value is read from this shell
                                         and sent as a secret (SkyPilot: "required")
    secrets: {K: null}                   secrets: names only; rgt reads values from this shell
                                         (a value in the file is refused: never recorded)
    num_nodes: N                         resources.nodes
    resources.accelerators / gpus        resources.gpu: 'A100:2' or 'A100' (count 1); an
                                         ordered list ['L4:1', 'A100:1'] (first preferred) or a
                                         mapping {A100: 2, H100: 1} (any one of): the first is
                                         the request, all are kept in gpu_alternatives
    resources.any_of / ordered           the same, from each candidate's accelerators; a
                                         candidate on a cloud rgt lacks is left out (noted),
                                         a candidate's image_id noted
    resources.instance_type              what it holds, on Lambda, RunPod, vast.ai and
                                         Kubernetes (rgt.skycloud); another cloud's refused
                                         naming the nearest rgt profile
    config: kubernetes pod_config …      the spec's kubernetes: section (rgt.skycloud);
                                         docker.run_options noted; the rest refused by path
    resources.cpus: 8 | '8+'             resources.cpus (at least that many)
    resources.memory: 32 | '32GB+'       resources.mem, GB (TB as 1024 GB)
    resources.disk_size: 256 | '1TB'     resources.disk, GB
    resources.accelerators: 'T4:0.5'     a whole T4, with a note (SkyPilot's own
                                         SKYPILOT_NUM_GPUS_PER_NODE rounds up the same way)
    resources.use_spot                   resources.spot
    resources.image_id: docker:IMG       resources.image (only container images map; on
                                         infra kubernetes an image_id is one as written)
    ~/sky_workdir in setup/run           ${RGT_RUN_DIR}/code, rgt's copy of the workdir
    ${VAR} in workdir/file_mounts        filled from envs, as SkyPilot does
    resources.infra / cloud / region     a platform rgt has (kubernetes/k8s, slurm, ssh,
                                         runpod, lambda, vast, '*'): the box's profile runs it,
                                         a region maps to resources.region; a cloud rgt has no
                                         platform for (aws, gcp, azure …) is refused, naming
                                         the rgt profile nearest to it and `--infra box`
    --infra / --instance-type            the command line's overrides, as `sky launch --infra`
                                         and `-t` override the file (rgt.skycloud)
    resources.ports, disk_tier,          noted, not refused: the job runs the same; rgt opens
      network_tier, labels, autostop,    no port (`rgt ssh BOX --port N` reaches one), takes
      job_recovery                       the box's disk and network as they are, restarts
                                         only by recover:, and stops the meter only when
                                         asked (`rgt run --down`, `rgt autostop`)

Services, pools and job groups are named as what they are; pipelines (several documents)
are read by rgt.skypipeline and run as chained jobs. Anything else (zone, volumes …) is
refused by name: rgt would otherwise run something other than what the file asks for.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from pathlib import Path
from typing import Any

from rgt import buckets, skycloud, taskfiles
from rgt.errors import UserError

TOP = {"name", "workdir", "setup", "run", "envs", "secrets", "num_nodes", "resources",
       "file_mounts"}
IGNORED_TOP = {"inputs", "outputs"}  # size hints for SkyPilot's optimizer, not the job's
RESOURCES = {"accelerators", "gpus", "cpus", "memory", "disk_size", "use_spot", "image_id",
             "region", "infra", "cloud", "any_of", "ordered", "instance_type"}
NOTED = {  # resources fields that change where or how fast, not what the job does
    "ports": "rgt opens no port on the box; reach it from this machine with `rgt ssh BOX "
             "--port PORT`, which forwards it and prints http://127.0.0.1:PORT",
    "disk_tier": "rgt takes the box's disk as it is",
    "network_tier": "rgt takes the box's network as it is",
    "labels": "rgt sets no labels from a SkyPilot task (an rgt spec's kubernetes.labels does)",
    "autostop": "a task file arms nothing in rgt: `rgt run BOX TASK --down` or `rgt autostop "
                "BOX MINUTES` stops the meter once the results are pulled",
    "job_recovery": "rgt restarts a run only with an rgt spec's `recover:`",
    "spot_recovery": "rgt restarts a run only with an rgt spec's `recover:`",
}
# Keys only a SkyPilot task has: one of them marks the file as one (an rgt spec refuses them).
SKY_ONLY = {"envs", "num_nodes", "file_mounts", "service", "config", "event_callback",
            "experimental", "inputs", "outputs_size", "pool", "volumes"}
SKY_RESOURCES = {"accelerators", "gpus", "memory", "disk_size", "use_spot", "image_id",
                 "cloud", "infra", "zone", "instance_type", "any_of", "ordered", "ports",
                 "labels", "disk_tier", "accelerator_args", "job_recovery", "spot_recovery",
                 "autostop", "network_tier"}
RGT_ONLY = {"env", "outputs", "checkpoint_dir", "recover", "smoke", "smoke_timeout", "grid",
            "max_parallel", "slurm", "kubernetes", "exclude", "dialect"}
# SkyPilot's infra names rgt has a platform for; the rest, with the nearest rgt profile.
RGT_INFRA = skycloud.RGT_INFRA
NEAREST = skycloud.NEAREST
_ACCELERATOR = re.compile(r"^([A-Za-z0-9_\-]+)(?::(\d+(?:\.\d+)?))?$")
# 8, 8+, 32GB, 32GB+, 1TB: SkyPilot's sizes are GB unless they say otherwise
_AT_LEAST = re.compile(r"^(\d+(?:\.\d+)?)\s*(GB|TB|G|T)?\+?$", re.IGNORECASE)
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
SKY_WORKDIR = '"$RGT_RUN_DIR/code"'  # SkyPilot's ~/sky_workdir on the box, as a shell word
_SKY_WORKDIR_DST = re.compile(r"^(?:~|\$HOME|\$\{HOME\})/sky_workdir(?:/+|$)")
_SKY_WORKDIR = re.compile(r"(?:~|\$HOME|\$\{HOME\})/sky_workdir\b")


def is_skypilot(data: dict[str, Any]) -> bool:
    """A key only SkyPilot has; or no `name` (optional there, required in an rgt spec) and
    nothing but the words both share. A key only an rgt spec has makes it an rgt spec, so a
    typo in one (`resources: {gpus: …}`) is explained as rgt's, not SkyPilot's."""
    rgt_only = RGT_ONLY & set(data) - ({"outputs"} if isinstance(data.get("outputs"), dict)
                                       else set())  # SkyPilot's own outputs is a mapping
    if rgt_only:
        return False
    resources = data.get("resources")
    if SKY_ONLY & set(data) or (isinstance(resources, dict) and SKY_RESOURCES & set(resources)):
        return True
    return "name" not in data and set(data) <= TOP


def what_it_is(data: dict[str, Any]) -> str | None:
    """A refusal for a SkyPilot file that is not a task rgt runs: a service, a pool."""
    if "service" in data:
        return ("is a SkyServe service (its `service:` section): SkyServe services are not run "
                "by rgt; run the model server as a task (drop `service:`) and reach its port "
                "with `rgt ssh BOX --port PORT`")
    if "pool" in data:
        return ("is a SkyPilot pool (`pool:`, for `sky jobs pool apply`): rgt runs no pools; "
                "a box you `rgt up` is the nearest thing")
    return None


def is_job_group(docs: list[Any]) -> bool:
    """SkyPilot's job group: a header with `execution: parallel` (tasks that run at once)."""
    head = docs[0] if docs and isinstance(docs[0], dict) else {}
    return head.get("execution") == "parallel" or "primary_tasks" in head


def several_documents(docs: list[Any]) -> str:
    """Why a verb that takes one task refuses a multi-document file, naming what SkyPilot
    means by it (rgt.skypipeline reads pipelines for `rgt run`)."""
    head = docs[0] if docs and isinstance(docs[0], dict) else {}
    tasks = len(docs) - (1 if set(head) <= {"name", "execution", "primary_tasks",
                                            "termination_delay"} else 0)
    if is_job_group(docs):
        return (f"is a SkyPilot job group of {tasks} tasks that run at the same time (sharing "
                "volumes and each other's addresses): rgt runs no job groups; run each task "
                "as a file of its own on a box of its own")
    return (f"is a SkyPilot pipeline of {tasks} tasks in one file: `rgt run BOX FILE` runs "
            "them as chained jobs where the box's scheduler chains runs (a slurm box); this "
            "verb takes one task: put it in a file of its own")


def to_spec(data: dict[str, Any], *, default_name: str, cwd: Path | None = None,
            overrides: skycloud.Overrides | None = None
            ) -> tuple[dict[str, Any], list[str]]:
    """The rgt spec (as data for JobSpec) a SkyPilot task asks for, and notes for the user
    about what rgt takes as it is; a UserError naming the first field that has no rgt
    meaning. `overrides`: the command line's --infra / --instance-type (rgt.skycloud)."""
    cwd = cwd or Path.cwd()
    refusal = what_it_is(data)
    if refusal:
        raise UserError(refusal)
    sections, config_notes = skycloud.config(data["config"]) if "config" in data else ({}, [])
    data = {k: v for k, v in data.items() if k != "config"}
    unknown = sorted(set(data) - TOP - IGNORED_TOP)
    if unknown:
        raise UserError(f"SkyPilot field `{unknown[0]}` has no rgt equivalent; remove it (rgt "
                        "takes name, workdir, setup, run, envs, secrets, num_nodes, "
                        "file_mounts and resources)")
    if not data.get("run"):
        raise UserError("the SkyPilot task has no `run` (to SkyPilot, a cluster brought up for "
                        "later `sky exec`s): rgt runs jobs, not clusters; the nearest is `rgt "
                        "up` (a box with what `resources` asks), then `rgt run BOX` each task")
    name = str(data.get("name") or re.sub(r"[^A-Za-z0-9_.\-]", "-", default_name).strip("-."))
    spec: dict[str, Any] = {"name": name, "run": _workdir_named(_text(data["run"], "run")),
                            "dialect": "skypilot"}
    envs = data.get("envs") or {}
    if not isinstance(envs, dict):
        raise UserError("SkyPilot `envs` must be a mapping NAME: value")
    asked = [str(k) for k, v in envs.items() if v is None or v == ""]
    spec["env"] = {str(k): str(v) for k, v in envs.items() if str(k) not in asked}
    spec["secrets"] = _secret_names(data.get("secrets")) + taskfiles.from_shell(asked, "envs")
    # SkyPilot fills ${VAR} from envs into workdir and file_mounts when it reads the file
    values = {**{k: os.environ.get(k, "") for k in asked}, **spec["env"]}
    workdir = _filled(data.get("workdir"), values)
    clone = _git_workdir(workdir) if isinstance(workdir, dict) else []
    if clone:
        workdir = None
    elif workdir is not None and not isinstance(workdir, str):
        raise UserError("SkyPilot `workdir` must be a path or a git repository {url, ref}")
    mount_notes: list[str] = []
    copies, bucket_lines = _mounts(_filled(data.get("file_mounts"), values), cwd, mount_notes)
    pushed = taskfiles.pushed_dir(workdir, [src for _, src in copies], cwd)
    spec["workdir"] = str(pushed)
    setup = _workdir_named(_text(data["setup"], "setup")) if data.get("setup") else ""
    spec["setup"] = "\n".join([*clone, *taskfiles.copy_lines(copies, pushed, "file_mounts",
                                                              relative_to=SKY_WORKDIR),
                               *bucket_lines, setup])
    given, overridden = (skycloud.override(data.get("resources") or {}, overrides)
                         if overrides else (data.get("resources") or {}, []))
    resources, notes = _resources(given)
    notes = [*overridden, *config_notes, *mount_notes, *notes]
    if data.get("num_nodes") is not None:
        resources["nodes"] = _count(data["num_nodes"], "num_nodes")
    spec["resources"] = resources
    spec.update(sections)  # config.kubernetes → the spec's kubernetes: section
    return spec, notes


def _git_workdir(given: dict[str, Any]) -> list[str]:
    """SkyPilot's `workdir: {url, ref}`: the repository cloned into the job's code directory
    on the box (where a pushed workdir would be), at `ref` (a branch, tag or commit). A
    resumed run finds the clone there and only checks `ref` out again (setup runs on every
    attempt)."""
    url, ref = given.get("url"), given.get("ref")
    if not isinstance(url, str) or not url or set(given) - {"url", "ref"}:
        raise UserError("SkyPilot `workdir` from git takes `url` and an optional `ref`, "
                        f"not {sorted(given)}")
    fail = shlex.quote(f"[rgt] workdir: could not clone {url}; the box needs git and access "
                       "to the repository (a private one: a token in `secrets`)")
    checkout = f" && git checkout --quiet {shlex.quote(str(ref))}" if ref else ""
    return [f"{{ [ -d .git ] || git clone --quiet {shlex.quote(url)} . ; }}{checkout} "
            f"|| {{ echo {fail} >&2; exit 1; }}"]


def _destination(dst: str) -> str:
    """A mount's destination as a shell word; a relative one is ~/sky_workdir's to SkyPilot
    (sky/backends/cloud_vm_ray_backend.py: `dst = f'{SKY_REMOTE_WORKDIR}/{dst}'`)."""
    return taskfiles.box_path(dst, "file_mounts", relative_to=SKY_WORKDIR)


def _workdir_named(script: str) -> str:
    """SkyPilot syncs the workdir to ~/sky_workdir and scripts name it so (`cd ~/sky_workdir`,
    `--ckpt ~/sky_workdir/ckpt`); rgt's copy is $RGT_RUN_DIR/code, so that is what they get
    (a `cd` that failed would run the rest somewhere else)."""
    return _SKY_WORKDIR.sub("${RGT_RUN_DIR}/code", script)


def _filled(value: Any, envs: dict[str, str]) -> Any:
    """`value` with $VAR / ${VAR} of the task's envs put in, in every string it holds."""
    if isinstance(value, str):
        return _ENV_REFERENCE.sub(lambda m: envs.get(m[1] or m[2], m[0]), value)
    if isinstance(value, dict):
        return {_filled(k, envs): _filled(v, envs) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, envs) for v in value]
    return value


def _mounts(mounts: Any, cwd: Path,
            notes: list[str]) -> tuple[list[tuple[str, Path]], list[str]]:
    """(destination, local source) for every local file mount rgt pushes, and the setup
    lines that copy or mount every bucket (rgt.buckets); the rest refused by name."""
    if mounts is None:
        return [], []
    if not isinstance(mounts, dict):
        raise UserError("SkyPilot `file_mounts` must be a mapping /dst: source")
    copies, lines = [], []
    for dst, given in mounts.items():
        field = f"file_mounts.{dst}"
        # ~/sky_workdir/x is rgt's copy of the workdir, as in setup and run (_workdir_named)
        dst = _SKY_WORKDIR_DST.sub("", str(dst)) or "."
        source, mode = given, "COPY"
        if isinstance(given, dict):
            source, mode = given.get("source"), str(given.get("mode") or "MOUNT").upper()
            if isinstance(source, list) and len(source) == 1:
                source = source[0]
            if given.get("persistent") is False:
                notes.append(f"{field}: `persistent: false` is not honoured: rgt deletes no "
                             "bucket, so it outlives the run")
            if source is None:
                source = buckets.bucket_url(given, field, notes)
        if not isinstance(source, str):
            raise UserError(f"{field}: expected one source path or bucket URL")
        if buckets.is_bucket(source):
            lines.append(buckets.setup_line(_destination(str(dst)),
                                            str(dst), source, mode, field, notes))
            continue
        if "$" in source:
            raise UserError(f"{field}: {source} names a variable with no value here; set it in "
                            "`envs` or export it before rgt runs")
        if mode != "COPY":
            raise UserError(f"{field}: a local source in mode {mode} is uploaded to a bucket "
                            "that the job's writes go back to; rgt creates no buckets: use "
                            "mode: COPY (a copy on the box) or the box's durable dir")
        copies.append((str(dst), taskfiles.resolve(source, cwd)))
    if lines:
        notes.append(buckets.CREDENTIALS)
    return copies, lines


def _text(value: Any, field: str) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if not isinstance(value, str):
        raise UserError(f"SkyPilot `{field}` must be a string of shell commands")
    return value


def _secret_names(secrets: Any) -> list[str]:
    """The secrets' names; a value in the file is refused: rgt reads secret values from this
    shell and sends them on stdin, never into the run's record (rgt.taskfiles)."""
    if secrets is None:
        return []
    if isinstance(secrets, list):
        return [str(s) for s in secrets]
    if not isinstance(secrets, dict):
        raise UserError("SkyPilot `secrets` must be a mapping NAME: null")
    given = [k for k, v in secrets.items() if v not in (None, "")]
    if given:
        raise UserError(f"secrets.{given[0]} has its value in the file: rgt reads secret values "
                        "from this shell's environment and sends them on stdin; write "
                        f"`{given[0]}: null` and `export {given[0]}=…` here (or, to keep the "
                        "value in the file, put it in `envs`)")
    return [str(k) for k in secrets]


def _resources(given: Any) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(given, dict):
        raise UserError("SkyPilot `resources` must be a mapping (candidates go under its "
                        "any_of or ordered)")
    port = str(given.get("ports")).strip("[]'\"").split(",")[0].split("-")[0].strip()
    notes = [f"resources.{k} {given[k]!r} is not applied: {why.replace('PORT', port)}"
             for k, why in NOTED.items() if given.get(k) is not None]
    unknown = sorted(set(given) - RESOURCES - set(NOTED))
    if unknown:
        nearest = {"zone": " (rgt places a job by region at most)"}.get(unknown[0], "")
        raise UserError(f"SkyPilot field `resources.{unknown[0]}` has no rgt equivalent"
                        f"{nearest}; remove it (the platform is the box's profile, and each "
                        "platform maps the rest)")
    if "accelerators" in given and "gpus" in given:
        raise UserError("give `resources.accelerators` or its alias `gpus`, not both")
    out: dict[str, Any] = {}
    region = _placement(given, "resources")
    candidates = given.get("any_of", given.get("ordered"))
    choices = []
    if candidates is not None:
        choices = _candidates(candidates, "any_of" if "any_of" in given else "ordered", notes)
    held: dict[str, Any] = {}
    if given.get("instance_type") is not None:
        held, said = skycloud.instance_type(given["instance_type"],
                                            str(given.get("infra") or given.get("cloud") or ""))
        notes += said
        if "gpu" in held and "accelerators" not in given and "gpus" not in given:
            choices = [held["gpu"]] + [c for c in choices if c != held["gpu"]]
    accelerators = given.get("accelerators", given.get("gpus"))
    if accelerators is not None:
        asked = _accelerators(accelerators, notes)
        choices = asked + [c for c in choices if c not in asked]
    if choices:
        out["gpu"] = choices[0]
        if len(choices) > 1:
            out["gpu_alternatives"] = choices
    if given.get("cpus") is not None:
        out["cpus"] = math.ceil(_at_least(given["cpus"], "resources.cpus"))
    if given.get("memory") is not None:
        out["mem"] = f"{_at_least(given['memory'], 'resources.memory'):g}G"
    for key in ("cpus", "mem"):  # what the instance type holds, where the task says no more
        if key in held and key not in out:
            out[key] = held[key]
    if given.get("disk_size") is not None:
        out["disk"] = f"{math.ceil(_at_least(given['disk_size'], 'resources.disk_size'))}G"
    if given.get("use_spot") is not None:
        if not isinstance(given["use_spot"], bool):
            raise UserError("SkyPilot `resources.use_spot` must be true or false")
        out["spot"] = given["use_spot"]
    image = given.get("image_id")
    on_kubernetes = str(given.get("infra") or given.get("cloud") or "").lower().split("/")[0] \
        in ("kubernetes", "k8s")
    if isinstance(image, str) and on_kubernetes and not image.startswith("docker:"):
        image = f"docker:{image}"  # on Kubernetes an image_id is a container image as written
    if image is not None:
        if not isinstance(image, str) or not image.startswith("docker:"):
            raise UserError(f"resources.image_id {image!r}: rgt maps container images only "
                            "(docker:IMAGE); a cloud's machine image has no rgt equivalent: "
                            "remove it to run in the image the box has")
        out["image"] = image.removeprefix("docker:")
    if region:
        out["region"] = region
    return out, notes


def _placement(given: dict[str, Any], field: str) -> str | None:
    """The region a candidate asks for; its infra/cloud must be a platform rgt has."""
    infra = given.get("infra")
    if infra is None and given.get("cloud") is not None:
        infra = f"{given['cloud']}/{given['region']}" if given.get("region") else given["cloud"]
    if infra is None:
        return str(given["region"]) if given.get("region") is not None else None
    parts = str(infra).strip().lower().split("/")
    where = "infra" if "infra" in given else "cloud"
    if parts[0] not in RGT_INFRA:
        nearest = NEAREST.get(parts[0], "generic-ssh (a machine you started there)")
        raise UserError(f"{field}.{where} {infra!r}: rgt has no {parts[0]} platform; the "
                        f"nearest rgt profile is {nearest}; to run it on the box you name, add "
                        "`--infra box` (SkyPilot's override of a task's infra)")
    # kubernetes/CONTEXT, ssh/POOL and slurm/CLUSTER name a cluster, not a region
    if parts[0] in ("kubernetes", "k8s", "ssh", "slurm") or len(parts) < 2:
        return None
    return parts[1]


def _candidates(value: Any, field: str, notes: list[str]) -> list[str]:
    """GPU alternatives from any_of/ordered: each candidate's accelerators, in order, from
    the candidates on a platform rgt has; the others are dropped only if one remains."""
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise UserError(f"resources.{field} must be a list of resource mappings")
    allowed = {"accelerators", "gpus", "infra", "cloud", "region", "use_spot", "image_id"}
    out, refused, kept = [], None, 0
    for i, candidate in enumerate(value):
        extra = sorted(set(candidate) - allowed)
        if extra:
            raise UserError(f"resources.{field}[{i}].{extra[0]}: rgt takes accelerators, "
                            "infra/cloud, region and image_id from a candidate, nothing else")
        try:
            _placement(candidate, f"resources.{field}[{i}]")
        except UserError as err:
            refused = refused or err
            where = candidate.get("infra") or candidate.get("cloud")
            notes.append(f"resources.{field}[{i}] (infra {where}) is left out: rgt has no "
                         "platform for it; the candidates on platforms rgt has remain")
            continue
        kept += 1
        if "image_id" in candidate:
            where = candidate.get("infra") or candidate.get("cloud") or "its platform"
            notes.append(f"resources.{field}[{i}].image_id {candidate['image_id']!r} (on "
                         f"{where}) is not applied: rgt runs every candidate in the image the "
                         "box was started with (the task's own image_id where rgt up starts "
                         "one)")
        accelerators = candidate.get("accelerators", candidate.get("gpus"))
        if accelerators is not None:
            out += [c for c in _accelerators(accelerators) if c not in out]
    if refused is not None and not kept:
        raise refused
    return out


def _accelerators(value: Any, notes: list[str] | None = None) -> list[str]:
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
        if not match or (match[2] is not None and float(match[2]) <= 0):
            raise UserError(f"resources.accelerators {item!r}: expected NAME or NAME:COUNT")
        count = math.ceil(float(match[2] or 1))
        if notes is not None and match[2] and count != float(match[2]):
            # SkyPilot's own SKYPILOT_NUM_GPUS_PER_NODE rounds a fraction up the same way
            notes.append(f"resources.accelerators {item}: a fraction of a GPU is taken as "
                         f"{count} whole GPU{'s' if count > 1 else ''}; rgt shares no GPU "
                         "between jobs")
        out.append(f"{match[1]}:{count}")
    return out


def _at_least(value: Any, field: str) -> float:
    """8, 8.5, '8', '8+', '32GB+' or '1TB' (at least that many, in GB) as a number > 0."""
    match = _AT_LEAST.match(str(value).strip())
    if isinstance(value, bool) or not match or float(match[1]) <= 0:
        raise UserError(f"{field} {value!r}: expected a number or '<number>+', above 0")
    return float(match[1]) * (1024 if (match[2] or "G")[0].upper() == "T" else 1)


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{field} {value!r}: expected a whole number of at least 1")
    return value
