"""The objects rgt submits to a cluster, built as plain dicts (what `rgt render` prints as YAML).

* A PersistentVolumeClaim per box: not optional. The pod's own filesystem is thrown away on
  every death or reschedule, so the code, the logs, the outputs and — above all — the job's
  checkpoint home live on the claim, mounted at the same path in every pod.
* A batch/v1 Job per run: restartPolicy Never (a Job refuses Always, K8S2); a failed pod becomes
  a fresh pod up to backoffLimit, and a pod the cluster took away (eviction, preemption, a
  drained or lost node: the DisruptionTarget condition) or a trainer that checkpointed on
  SIGTERM and exited 85 does not count against it (podFailurePolicy Ignore), so a preempted run
  comes back as often as the cluster takes it. GPUs go in limits (requests equal, the device
  plugin's rule), activeDeadlineSeconds is the walltime, terminationGracePeriodSeconds the
  SIGTERM lead sized from the measured checkpoint write time, ttlSecondsAfterFinished
  garbage-collects the finished Job.
* A sweep is one Indexed Job: completions = cells, parallelism = max_parallel, and each pod
  reads its cell from JOB_COMPLETION_INDEX.
* The door: a short-lived pod that mounts the claim and serves rgt.onbox.door, reached through
  the API server's pod proxy (see rgt.platforms.k8s.door for why this path); its token is in a
  Secret of its own, which the pod names (secretKeyRef) and which goes with it.

Multi-node training (resources.nodes > 1) is one Indexed Job of N pods plus a headless
Service: rgt.platforms.k8s.group says how and why.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from rgt.errors import UserError

MANAGED = {"app.kubernetes.io/managed-by": "rgt"}
BOX_LABEL = "rgt.dev/box"
RUN_LABEL = "rgt.dev/run"
PART_LABEL = "rgt.dev/part"  # job | door
CONTAINER = "train"
DOOR_PORT = 8470
EXIT_PREEMPTED = 85            # rgt.ckpt: "checkpointed on a signal, start me again"
DEFAULT_CKPT_WRITE_S = 30      # assumed checkpoint write time until one is measured
STEP_MARGIN_S = 30             # to reach a safe point (end of a step) before writing
DEFAULT_TTL_S = 7 * 24 * 3600  # a finished Job (and `kubectl logs`) stays a week
DEFAULT_BACKOFF = 3
DOOR_DEADLINE_S = 3600         # a door rgt failed to delete ends by itself
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_DNS = re.compile(r"[^a-z0-9-]+")


# ----------------------------------------------------------------------------- small helpers


def dns_name(*parts: str, limit: int = 52) -> str:
    """A DNS-1123 label from free text: lowercase, [a-z0-9-], at most `limit` characters, a
    short digest of the original appended when anything had to change (names stay unique).
    52 leaves room for the Job controller's pod suffix within 63."""
    raw = "-".join(p for p in parts if p)
    name = _DNS.sub("-", raw.lower()).strip("-")
    if name != raw or len(name) > limit:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:6]
        name = f"{name[:limit - 7].rstrip('-')}-{digest}"
    return name or "rgt"


def label_value(text: str) -> str:
    """A label value (63 characters of [A-Za-z0-9_.-], alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63].strip("-_.")
    return value or "none"


def labels(box: str, run: str | None = None, part: str | None = None) -> dict[str, str]:
    out = {**MANAGED, BOX_LABEL: label_value(box)}
    if run:
        out[RUN_LABEL] = label_value(run)
    if part:
        out[PART_LABEL] = part
    return out


def quantity(size: str, what: str) -> str:
    """A spec size (16G, 512M, 1.5G) as a Kubernetes quantity in binary units (16Gi, 1536Mi):
    rgt's sizes mean GiB as Slurm's do, and Kubernetes' plain G is 10^9."""
    match = re.match(r"^(\d+(?:\.\d+)?)\s*([KMGT])i?B?$", str(size).strip(), re.IGNORECASE)
    if not match:
        raise UserError(f"{what} {size!r}: expected a size such as 50G or 512M")
    number, unit = float(match[1]), match[2].upper()
    if number.is_integer():
        return f"{int(number)}{unit}i"
    units = "KMGT"
    if unit == "K":
        return f"{math.ceil(number * 1024)}"
    return f"{math.ceil(number * 1024)}{units[units.index(unit) - 1]}i"


_CLOCK = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?$")
_UNIT = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$", re.IGNORECASE)


def seconds_of(value: str) -> int:
    """resources.time → seconds: 90m, 2h, 1d, 45s, MM, HH:MM:SS or D-HH:MM:SS (as on Slurm)."""
    text = str(value).strip()
    unit = _UNIT.match(text)
    if unit:
        return max(1, math.ceil(float(unit[1]) * {"s": 1, "m": 60, "h": 3600,
                                                   "d": 86400}[unit[2].lower()]))
    clock = _CLOCK.match(text)
    if clock:
        days, first, second, third = (int(g) if g else 0 for g in clock.groups())
        if clock[4] is not None:  # H:M:S
            total = first * 3600 + second * 60 + third
        elif clock[3] is not None:  # M:S, or H:M after a day
            total = first * 3600 + second * 60 if clock[1] else first * 60 + second
        else:
            total = first * 3600 if clock[1] else first * 60  # Slurm: a bare number is minutes
        return max(1, total + days * 86400)
    raise UserError(f"resources.time {value!r}: expected HH:MM:SS, D-HH:MM:SS, minutes, or a "
                    "number with s/m/h/d")


def grace_seconds(ckpt_write_s: float | None) -> int:
    """terminationGracePeriodSeconds: the SIGTERM lead, a full checkpoint write plus the time
    to reach the end of a step, never below Kubernetes' own default of 30 s."""
    write = DEFAULT_CKPT_WRITE_S if ckpt_write_s is None else max(0.0, ckpt_write_s)
    return max(30, math.ceil(write + STEP_MARGIN_S))


def require_digest(image: str | None, where: str) -> str:
    """U30: the image is the environment; a tag can move under a running sweep, a digest not."""
    if not image:
        raise UserError(f"{where}: Kubernetes runs a container image; name one pinned by digest "
                        "(the spec's kubernetes.image: registry/name@sha256:<64 hex>, or "
                        "--image on `rgt up` / `rgt render`)")
    if not DIGEST.search(image):
        raise UserError(f"{where}: image {image!r} is not pinned by digest (U30: a tag moves "
                        "and the next pod may run other code); use name@sha256:<digest> — "
                        "`docker buildx imagetools inspect IMAGE` prints it")
    return image


# ----------------------------------------------------------------------------- the claim


def pvc_manifest(name: str, box: str, size: str, *, storage_class: str | None = None,
                 access_mode: str = "ReadWriteOnce") -> dict[str, Any]:
    if access_mode not in ("ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"):
        raise UserError(f"--access-mode {access_mode!r}: expected ReadWriteOnce or "
                        "ReadWriteMany")
    spec: dict[str, Any] = {"accessModes": [access_mode],
                            "resources": {"requests": {"storage": quantity(size, "disk")}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "labels": labels(box)}, "spec": spec}


# ----------------------------------------------------------------------------- the job


_SECRETS_LOOP = r"""if [ -f "$RGT_RUN_DIR/secrets.env" ]; then
  while IFS= read -r rgt_l || [ -n "$rgt_l" ]; do
    rgt_n=${rgt_l%%=*}
    case $rgt_l in *=*) ;; *) continue ;; esac
    case $rgt_n in ""|[0-9]*|*[!A-Za-z0-9_]*) continue ;; esac
    export "$rgt_n=${rgt_l#*=}"
  done < "$RGT_RUN_DIR/secrets.env"
  unset rgt_l rgt_n
fi"""

_RUN_AND_WAIT = r"""rgt_child=
trap '[ -n "$rgt_child" ] && kill -TERM "$rgt_child" 2>/dev/null' TERM INT
bash -o pipefail -c "$rgt_command" &
rgt_child=$!
while :; do
  wait "$rgt_child"; rgt_rc=$?
  kill -0 "$rgt_child" 2>/dev/null || break
done
echo "[rgt] trainer exited $rgt_rc at $(date -u +%FT%TZ)"
"""


def pod_script(*, run: str, setup: str, outputs: Sequence[str], cells: Sequence[Mapping[str,
               Any]] | None = None, lib: str | None = None,
               rank_lines: Sequence[str] = ()) -> str:
    """What every pod of the Job runs (bash is PID 1: it forwards SIGTERM to the trainer, whose
    rgt.ckpt checkpoints and exits 85, and exits with the trainer's code).

    `rank_lines` (a multi-node job): they set the pod's rank first; node 0 writes the run's
    log, node i its own `log.node-<i>` beside it (the pods share the claim, and appends from
    several machines to one file interleave or, on NFS, overwrite), and only node 0 copies
    the outputs (every pod sees the same workdir on the claim)."""
    lines = ["set -u"]
    if rank_lines:
        lines += [*rank_lines,
                  '[ "$RGT_NODE_RANK" = 0 ] || RGT_LOG="$RGT_LOG.node-$RGT_NODE_RANK"']
    lines += ['exec > >(tee -a "$RGT_LOG") 2>&1  # the PVC keeps the log past the pod',
              'echo "[rgt] pod $RGT_POD_NAME'
              + (' (node $RGT_NODE_RANK of $RGT_NUM_NODES)' if rank_lines else '')
              + ' on node ${RGT_NODE_NAME:-?} at $(date -u +%FT%TZ)"']
    if cells is not None:
        lines += ['rgt_cell=${JOB_COMPLETION_INDEX:?not an Indexed Job pod}',
                  'case "$rgt_cell" in']
        for i, cell in enumerate(cells):
            exports = " ".join(f"RGT_PARAM_{k.upper()}={shlex.quote(str(v))}"
                               for k, v in cell.items())
            lines.append(f"  {i}) export {exports} ;;")
        lines += ['  *) echo "[rgt] no cell $rgt_cell in this sweep" >&2; exit 2 ;;', "esac",
                  'export RGT_CELL_DIR="$RGT_DURABLE_DIR/cells/$rgt_cell"',
                  'export RGT_CKPT_DIR="$RGT_CELL_DIR/ckpt" RGT_OUT_DIR="$RGT_CELL_DIR/out"']
    lines.append(_SECRETS_LOOP)
    if lib:
        lines.append(f'export PYTHONPATH={shlex.quote(lib)}"${{PYTHONPATH:+:$PYTHONPATH}}"')
    lines += ['mkdir -p "$RGT_CKPT_DIR" "$RGT_OUT_DIR"',
              'cd "$RGT_CODE_DIR" || { echo "[rgt] no code at $RGT_CODE_DIR" >&2; exit 1; }']
    if setup.strip():
        lines += ["{", setup.strip(), '} || { rgt_rc=$?; echo "[rgt] setup failed (exit '
                  '$rgt_rc)" >&2; exit $rgt_rc; }']
    lines.append(f"rgt_command={shlex.quote(run)}")
    lines.append(_RUN_AND_WAIT.rstrip("\n"))
    if outputs and cells is None:
        globs = " ".join(shlex.quote(o) for o in outputs)
        lines += ['if [ "$rgt_rc" -eq 0 ]' + (' && [ "$RGT_NODE_RANK" = 0 ]' if rank_lines
                                               else "") + '; then',
                  "  shopt -s nullglob globstar",
                  f'  for rgt_o in {globs}; do cp -a --parents "$rgt_o" "$RGT_OUT_DIR"/ '
                  "|| rgt_rc=$?; done",
                  "fi"]
    lines.append('exit "$rgt_rc"')
    return "\n".join(lines) + "\n"


def container_resources(gpus: int, cpus: int | None, mem: str | None,
                        disk: str | None = None) -> dict[str, Any]:
    """GPUs in limits, requests equal (the device plugin refuses anything else); memory as a
    hard limit (an OOM names itself), CPUs as a request only (a CPU limit throttles); a job's
    `disk` is its ephemeral-storage (the pod's own layer, logs, emptyDir), requested and
    capped, so a runaway write ends this pod with a reason instead of the node's (K8S5)."""
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = requests["nvidia.com/gpu"] = str(gpus)
    if cpus:
        requests["cpu"] = str(cpus)
    if mem:
        limits["memory"] = requests["memory"] = quantity(mem, "resources.mem")
    if disk:
        limits["ephemeral-storage"] = requests["ephemeral-storage"] = quantity(
            disk, "resources.disk")
    out: dict[str, Any] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def node_selector(text: str) -> dict[str, str]:
    """RGT_K8S_NODE_SELECTOR: `key=value,key2=value2` (e.g. the GPU product label)."""
    pairs = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"RGT_K8S_NODE_SELECTOR {text!r}: expected key=value[,key=value]")
        pairs[key.strip()] = value.strip()
    return pairs


def job_manifest(*, name: str, box: str, run_id: str, image: str, script: str,
                 env: Mapping[str, str], claim: str, mount_path: str, gpus: int = 0,
                 cpus: int | None = None, mem: str | None = None, disk: str | None = None,
                 nodes: int = 1, service: str | None = None,
                 time_limit: str | None = None, ckpt_write_s: float | None = None,
                 backoff_limit: int = DEFAULT_BACKOFF, ttl_s: int = DEFAULT_TTL_S,
                 cells: int | None = None, max_parallel: int | None = None,
                 selector: Mapping[str, str] | None = None,
                 pull_secret: str | None = None, service_account: str | None = None,
                 tolerations: Sequence[Mapping[str, Any]] = (),
                 priority_class: str | None = None,
                 extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The run's Job. `service_account`, `tolerations`, `priority_class` and `extra_labels`
    come from the spec's `kubernetes:` section; rgt's own labels win over the user's.
    `nodes` > 1: an Indexed Job of that many pods under the headless Service `service`
    (rgt.platforms.k8s.group)."""
    if nodes > 1 and (not service or cells is not None):
        raise UserError(f"resources.nodes={nodes}: a multi-node Job needs its headless "
                        "Service and cannot be a sweep")
    pod_labels = {**(extra_labels or {}), **labels(box, run_id, "job")}
    container: dict[str, Any] = {
        "name": CONTAINER, "image": image, "command": ["bash", "-c", script],
        "env": [{"name": k, "value": str(v)} for k, v in env.items()] + [
            {"name": "RGT_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "RGT_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "volumeMounts": [{"name": "data", "mountPath": mount_path}],
    }
    resources = container_resources(gpus, cpus, mem, disk)
    if resources:
        container["resources"] = resources
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace_seconds(ckpt_write_s),
        "containers": [container],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
    }
    tolerate = [dict(t) for t in tolerations]
    if gpus:  # GPU node pools are commonly tainted so that only GPU pods land there (K8S1)
        tolerate.insert(0, {"key": "nvidia.com/gpu", "operator": "Exists",
                            "effect": "NoSchedule"})
    if tolerate:
        pod["tolerations"] = tolerate
    if selector:
        pod["nodeSelector"] = dict(selector)
    if pull_secret:
        pod["imagePullSecrets"] = [{"name": pull_secret}]
    if service_account:
        pod["serviceAccountName"] = service_account
    if priority_class:
        pod["priorityClassName"] = priority_class
    spec: dict[str, Any] = {
        "backoffLimit": backoff_limit,
        "ttlSecondsAfterFinished": ttl_s,
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                      "status": "True"}]},
            {"action": "Ignore", "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                                                 "values": [EXIT_PREEMPTED]}},
        ]},
        "template": {"metadata": {"labels": pod_labels}, "spec": pod},
    }
    if time_limit:
        spec["activeDeadlineSeconds"] = seconds_of(time_limit)
    if cells is not None:
        spec.update(completionMode="Indexed", completions=cells,
                    parallelism=min(cells, max_parallel or cells))
    if nodes > 1 and service:
        from rgt.platforms.k8s.group import group_spec  # it builds on this module's names

        job_fields, pod_fields = group_spec(nodes, service)
        spec.update(job_fields)
        pod.update(pod_fields)
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": dict(pod_labels)}, "spec": spec}


# ----------------------------------------------------------------------------- the door


DOOR_TOKEN_KEY = "token"


def door_secret_manifest(*, name: str, box: str, token: str) -> dict[str, Any]:
    """The Secret that holds a door's token, created just before its pod and deleted with it:
    the pod spec only names it (secretKeyRef), so reading pods does not give the token away;
    reading the Secret takes the `get secrets` right, which RBAC grants apart."""
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "labels": labels(box, None, "door")},
            "type": "Opaque", "immutable": True,
            "data": {DOOR_TOKEN_KEY: base64.b64encode(token.encode()).decode()}}


def door_manifest(*, name: str, box: str, image: str, claim: str, mount_path: str,
                  source: str, secret: str, pull_secret: str | None = None) -> dict[str, Any]:
    """The pod rgt moves files and runs short commands through; it binds to its own pod IP
    (downward API) and answers only requests carrying the token in the Secret `secret`."""
    container = {
        "name": "door", "image": image,
        # the image's Python, whichever name it has; the server's source is $0
        "command": ["sh", "-c", 'exec "$(command -v python3 || command -v python)" -c "$0"',
                    source],
        "env": [{"name": "RGT_DOOR_TOKEN", "valueFrom": {"secretKeyRef": {
                    "name": secret, "key": DOOR_TOKEN_KEY}}},
                {"name": "RGT_DOOR_PORT", "value": str(DOOR_PORT)},
                {"name": "RGT_DOOR_HOST", "valueFrom": {"fieldRef":
                                                        {"fieldPath": "status.podIP"}}}],
        "ports": [{"containerPort": DOOR_PORT, "name": "door", "protocol": "TCP"}],
        "volumeMounts": [{"name": "data", "mountPath": mount_path}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"memory": "1Gi"}},
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
        "activeDeadlineSeconds": DOOR_DEADLINE_S, "containers": [container],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
    }
    if pull_secret:
        spec["imagePullSecrets"] = [{"name": pull_secret}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels(box, None, "door")}, "spec": spec}
