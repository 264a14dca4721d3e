"""RunPod's control plane: its REST API v2, and what its answers mean for the bill.

Which API, and why v2 (https://api.runpod.io/v2; spec: https://api.runpod.io/v2/openapi.json,
carried by github.com/runpod/docs api-reference-v2/openapi.json):

- REST v1 (https://rest.runpod.io/v1) is deprecated: RunPod's migration guide
  (docs api-reference-v2/migrate-from-v1.mdx) retires it on 2026-11-15 (a later copy of the page
  says 2026-12-01). Code written against it stops working within days of this module.
- The `runpod` Python SDK (1.12) speaks the legacy GraphQL API with query strings built by
  hand (runpod/api/ctl_commands.py, mutations/pods.py), and installs boto3, fastapi[all],
  paramiko, aiohttp … for its serverless half: not worth carrying for five calls.
- v2 publishes an OpenAPI schema, rejects unknown request fields by name (422 with `errors`),
  answers RFC 9457 problems ({title, status, detail}), has a catalog (GPU types, prices, stock
  per data centre), an `ssh` block with the direct host:port, `runtime.gpus` (how many GPUs the
  running pod really has: RP1) and documented rate limits (RateLimit-Policy: 60/min, 3000/h).
  What v2 lacks: interruptible (spot) pods and bids (v1/GraphQL only), and `reset`.

Calls: GET /v2/catalog/gpus?include=AVAILABILITY&product=POD, GET /v2/network-volumes,
GET /v2/account/ssh-keys, POST /v2/pods (201, PROVISIONING → STARTING → RUNNING), GET /v2/pods
(the name filter for a lost create's answer), GET /v2/pods/{id}, POST /v2/pods/{id}/action
{"action": "stop"|"start"}, DELETE /v2/pods/{id} (204; the pod stays readable a while: RP14).

Pod status → rgt state → what bills (rates: the runpod profile's storage tiers):

    PROVISIONING, STARTING   booting      compute (cost) + disks
    RUNNING, all GPUs        running      compute + container disk + volume disk, $0.10/GB/mo
    RUNNING, fewer GPUs      zero-gpu     the same, for a pod that cannot train (RP1)
    EXITED                   stopped      the volume disk at $0.20/GB/mo, twice the running
                                          rate (RP4); the container disk is already gone (RP2);
                                          purged ~30 days after the stop
    ERROR                    error        treated as billing its disks: terminate it
    TERMINATED, 404          gone         nothing; a network volume bills on its own
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import Unavailable
from rgt.platforms.http import ApiClient, ApiError, RatePolicy

API_URL = "https://api.runpod.io"  # the spec's server; every path starts with /v2
KEY_ENV = "RUNPOD_API_KEY"
URL_ENV = "RGT_RUNPOD_API_URL"
CONSOLE = "https://console.runpod.io/pods"
# The spec's RateLimit-Policy example: 60 a minute, 3000 an hour, 50,000 a day per user; a
# 429 carries an integer Retry-After, which ApiClient honours.
POLICY = RatePolicy(min_interval_s=1.0)
HOURS_PER_MONTH = 730
# $/GB/month, from the runpod profile (storage.tiers) and RunPod's pricing pages it cites.
CONTAINER_DISK = 0.10
VOLUME_DISK = {"running": 0.10, "stopped": 0.20}
NETWORK_VOLUME = {"STANDARD": 0.07, "HIGH_PERFORMANCE": 0.14}
NETWORK_VOLUME_OVER_1TB = 0.05
PURGE_AFTER_DAYS = 30


def client() -> ApiClient:
    return ApiClient(service="RunPod", key_env=KEY_ENV, url_env=URL_ENV, default_url=API_URL,
                     auth="bearer", policy=POLICY, key_refused=(401,))


# the GPU catalog -----------------------------------------------------------------------------

@dataclass
class GpuType:
    id: str                      # what a create names: "NVIDIA GeForce RTX 4090"
    name: str                    # "RTX 4090"
    memory_gb: int
    price: dict[str, float]      # cloud ("secure"/"community") → $ per GPU-hour
    max_count: dict[str, int]    # cloud → most GPUs one pod of this type can have
    availability: str = "NONE"   # for the count and cloud asked: NONE, LOW, MEDIUM, HIGH
    stock: dict[str, str] = field(default_factory=dict)  # data centre → availability

    @classmethod
    def from_api(cls, g: dict[str, Any]) -> GpuType:
        return cls(id=str(g.get("id", "")), name=str(g.get("name", "")),
                   memory_gb=int(g.get("memory") or 0),
                   price={k: float(v or 0) for k, v in (g.get("price") or {}).items()},
                   max_count={k: int(v or 0) for k, v in (g.get("maxCount") or {}).items()},
                   availability=str(g.get("availability") or "NONE"),
                   stock={str(d.get("id")): str(d.get("availability"))
                          for d in g.get("dataCenters") or []})


def catalog(api: ApiClient, *, count: int = 1, cloud: str = "SECURE") -> list[GpuType]:
    """Every GPU type with its price and, for `count` GPUs on `cloud`, the pod stock."""
    data = api.get("/v2/catalog/gpus", include="AVAILABILITY", product="POD", count=count,
                   cloud=cloud) or {}
    return [GpuType.from_api(g) for g in data.get("gpus") or []]


def parse_gpu(gpu: str) -> tuple[str, int]:
    """'RTX4090:2' → ('RTX4090', 2); 'NVIDIA GeForce RTX 4090' → (that, 1)."""
    name, _, count = gpu.rpartition(":") if ":" in gpu else (gpu, "", "1")
    if not name.strip() or not count.isdigit() or int(count) < 1:
        raise UserError(f"--gpu {gpu!r}: write it as TYPE:COUNT, e.g. RTX4090:1 or H100:2, "
                        "or give RunPod's GPU type id ('NVIDIA GeForce RTX 4090')")
    return name.strip(), int(count)


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def named_like(gpu: GpuType, name: str) -> bool:
    """Whether `name`, spelled loosely (h100, rtx-4090), is part of the type's name or id."""
    squashed = _squash(name)
    return bool(squashed) and (squashed in _squash(gpu.name) or squashed in _squash(gpu.id))


def pick_gpu(types: list[GpuType], name: str) -> GpuType:
    """The GPU type the user means: its exact id, its name, or either spelled loosely
    (RTX4090, rtx-4090); a loose name that fits several (H100 → PCIe, SXM, NVL) must be made
    exact. Unknown: one line naming the types there are, before anything is created."""
    exact = [t for t in types if name in (t.id, t.name)]
    squashed = _squash(name)
    loose = exact or [t for t in types if squashed in (_squash(t.id), _squash(t.name))]
    loose = loose or [t for t in types if squashed and (squashed in _squash(t.name)
                                                        or squashed in _squash(t.id))]
    if len(loose) == 1:
        return loose[0]
    known = ", ".join(sorted(t.name for t in types)) or "none listed"
    if loose:
        raise UserError(f"--gpu {name!r} fits several RunPod GPU types "
                        f"({', '.join(t.name for t in loose)}): name one of them")
    raise UserError(f"RunPod has no GPU type {name!r} (types: {known}); nothing was created")


# network volumes -----------------------------------------------------------------------------

def find_volume(api: ApiClient, ref: str) -> dict[str, Any]:
    """The network volume named (or with the id) `ref`."""
    volumes = (api.get("/v2/network-volumes") or {}).get("networkVolumes") or []
    by_id = [v for v in volumes if v.get("id") == ref]
    named = by_id or [v for v in volumes if v.get("name") == ref]
    if len(named) == 1:
        return named[0]
    if named:
        ids = ", ".join(str(v.get("id")) for v in named)
        raise UserError(f"several RunPod network volumes are named {ref!r} ({ids}): give the "
                        "id with --volume")
    yours = ", ".join(f"{v.get('name')} ({v.get('id')}, {v.get('dataCenter')})"
                      for v in volumes) or "none"
    raise UserError(f"no RunPod network volume {ref!r} (yours: {yours}); create it in the "
                    f"console (Storage) in the data centre you will rent in: it attaches only "
                    f"when a pod is created, and only in its own data centre (RP7)")


def volume_usd_per_month(vol: dict[str, Any]) -> float:
    size = float(vol.get("size") or 0)
    if vol.get("type") == "HIGH_PERFORMANCE":
        return size * NETWORK_VOLUME["HIGH_PERFORMANCE"]
    return (min(size, 1000) * NETWORK_VOLUME["STANDARD"]
            + max(size - 1000, 0) * NETWORK_VOLUME_OVER_1TB)


def volume_billing_line(vol: dict[str, Any]) -> str:
    return (f"RunPod network volume {vol.get('name')} ({vol.get('id')}) in "
            f"{vol.get('dataCenter')}, {vol.get('size')} GB: "
            f"${volume_usd_per_month(vol):.2f}/month until you delete it (console → Storage); "
            f"it outlives every pod (RP3, RP7)")


def stopped_disk_line(pod_id: str, volume_gb: float) -> str:
    return (f"RunPod pod {pod_id} is stopped: its {volume_gb:g} GB volume disk bills "
            f"${volume_gb * VOLUME_DISK['stopped']:.2f}/month (twice the running rate, RP4) "
            f"until terminated, and is purged with the pod ~{PURGE_AFTER_DAYS} days after the "
            f"stop; the container disk is already wiped (RP2)")


# SSH keys ------------------------------------------------------------------------------------

def registered_keys(api: ApiClient) -> list[str]:
    return [str(k) for k in (api.get("/v2/account/ssh-keys") or {}).get("keys") or []]


def key_body(line: str) -> str:
    """'ssh-ed25519 AAAA… comment' → 'ssh-ed25519 AAAA…': keys compare without comments."""
    return " ".join(line.split()[:2])


# pods ----------------------------------------------------------------------------------------

def get_pod(api: ApiClient, pod_id: str) -> dict[str, Any] | None:
    """The pod, or None once the API answers 404 (the only proof it is gone, RP14)."""
    try:
        return api.get(f"/v2/pods/{pod_id}") or {}
    except ApiError as err:
        if err.status == 404:
            return None
        raise


def named_pods(api: ApiClient, name: str) -> list[dict[str, Any]]:
    return [p for p in (api.get("/v2/pods") or {}).get("pods") or []
            if p.get("name") == name and p.get("status") != "TERMINATED"]


def ssh_direct(pod: dict[str, Any]) -> tuple[str, int, str] | None:
    """(host, port, user) of full SSH on the pod's public 22/tcp mapping; None while it has none
    (provisioning, stopped). Never the proxy: it carries a shell only, no file transfer."""
    direct = (pod.get("ssh") or {}).get("direct")
    if not isinstance(direct, dict) or not direct.get("host") or not direct.get("port"):
        return None
    return str(direct["host"]), int(direct["port"]), str(direct.get("username") or "root")


def gpus_seen(pod: dict[str, Any]) -> int | None:
    """How many GPUs the RUNNING pod really has (one `runtime.gpus` entry each); None when the
    pod does not run. Fewer than it asked for is RP1."""
    runtime = pod.get("runtime")
    if pod.get("status") != "RUNNING" or not isinstance(runtime, dict):
        return None
    gpus = runtime.get("gpus")
    return len(gpus) if isinstance(gpus, list) else None


def gpus_asked(pod: dict[str, Any]) -> int:
    return int((pod.get("gpu") or {}).get("count") or 0)


def pod_state(pod: dict[str, Any] | None, *, volume_gb: float = 0.0) -> dict[str, Any]:
    """What the pod's status means: rgt's state, the gotcha, whether it bills, what to do."""
    if pod is None or pod.get("status") == "TERMINATED":
        return {"state": "gone", "status": "TERMINATED", "gotcha": None, "billing": False,
                "advice": "the pod no longer exists (terminated); its container and volume "
                          "disks went with it (RP3)"}
    status = str(pod.get("status") or "")
    base = {"status": status, "cost_per_hour": pod.get("cost"), "gpus_asked": gpus_asked(pod),
            "gpus_seen": gpus_seen(pod), "data_centre": pod.get("dataCenterId")}
    if status in ("PROVISIONING", "STARTING"):
        return {**base, "state": "booting", "gotcha": None, "billing": True,
                "advice": "being placed and started; it bills from here"}
    if status == "RUNNING":
        seen, asked = base["gpus_seen"], base["gpus_asked"]
        if seen is not None and seen < asked:
            return {**base, "state": "zero-gpu" if seen == 0 else "fewer-gpus", "gotcha": "RP1",
                    "billing": True,
                    "advice": f"running with {seen} of its {asked} GPU(s): the host's GPU was "
                              f"rented to someone else while the pod was stopped (RP1). It "
                              f"cannot train here and still bills: pull what is on /workspace "
                              f"(`rgt pull`), then `rgt down` and rent a new pod; resume there "
                              f"from the checkpoints"}
        return {**base, "state": "running", "gotcha": None, "billing": True,
                "advice": "running and billing (compute, container disk, volume disk)"}
    if status == "EXITED":
        disk = (f"the volume disk bills at twice the running rate "
                f"(${volume_gb * VOLUME_DISK['stopped']:.2f}/month for {volume_gb:g} GB, RP4)"
                if volume_gb else "its network volume keeps billing on its own")
        return {**base, "state": "stopped", "gotcha": "RP4", "billing": True,
                "advice": f"stopped: compute is off, but {disk} and the pod is purged "
                          f"~{PURGE_AFTER_DAYS} days after the stop; the container disk is "
                          f"wiped (RP2). Start it "
                          f"again (it may come back with zero GPUs, RP1), or pull and "
                          f"`rgt down`"}
    if status == "ERROR":
        return {**base, "state": "error", "gotcha": None, "billing": True,
                "advice": "the container is in an unrecoverable error state (a driver too old "
                          "for the image, RP9, or an ENTRYPOINT that never starts sshd, RP10): "
                          "read the pod's logs in the console, then `rgt down`"}
    return {**base, "state": status.lower() or "unknown", "gotcha": None, "billing": True,
            "advice": "an unrecognised status: treated as billing; check the console"}


# renting -------------------------------------------------------------------------------------

MOUNT = "/workspace"


def check_login_key(api: ApiClient, identity: str | None) -> None:
    """`startSsh` gives the pod the account's registered keys and nothing else: with none the
    pod has no SSH at all, and a key rgt logs in with that is not among them is refused by
    the pod's sshd after the meter started. Both are said before anything is rented."""
    keys = {key_body(k) for k in registered_keys(api)}
    if not keys:
        raise UserError("your RunPod account has no SSH public key registered: a pod gets only "
                        "those, so rgt could not log in. Add yours in the console (Settings → "
                        "SSH Public Keys); nothing was created")
    if identity:
        pub = Path(identity).expanduser().with_name(Path(identity).name + ".pub")
        if pub.is_file() and key_body(pub.read_text()) not in keys:
            raise UserError(f"{pub} is not among the SSH keys registered with RunPod, so the "
                            f"pod would refuse it: add it in the console (Settings → SSH "
                            f"Public Keys), or pass the --identity of a key that is; nothing "
                            f"was created")


def create_body(name: str, gpu: GpuType, count: int, image: str, *, cloud: str,
                container_disk_gb: int, volume_gb: int, volume: dict[str, Any] | None,
                data_centre: str | None, env: dict[str, str]) -> dict[str, Any]:
    """POST /v2/pods: only fields CreatePodRequest names (v2 refuses any other by name)."""
    body: dict[str, Any] = {
        "name": name, "image": image, "gpu": {"id": gpu.id, "count": count},
        "cloud": cloud, "disk": container_disk_gb,
        "ports": ["22/tcp"],  # full SSH on the public IP: file transfer works (RP6)
        "startSsh": True,
    }
    if volume is not None:  # replaces the volume disk at /workspace and outlives terminate
        body["mounts"] = {"network": [{"volumeId": volume["id"], "path": MOUNT}]}
        body["dataCenterIds"] = [volume["dataCenter"]]  # RP7: the volume's data centre only
    else:
        body["mounts"] = {"persistent": {"size": volume_gb, "path": MOUNT}}
        if data_centre:
            body["dataCenterIds"] = [data_centre]
    if env:
        body["env"] = env
    return body


def placeable(types: list[GpuType], gpu_name: str, count: int, cloud: str,
               where: str | None, vol: dict[str, Any] | None) -> GpuType:
    """The GPU type asked for, refused before anything is created when RunPod cannot place it
    as asked: no such type (Unavailable: another choice may be), more GPUs than one pod of it
    holds, or no stock for the count and cloud (in `where`, if pinned)."""
    try:
        chosen = pick_gpu(types, gpu_name)
    except UserError as err:
        raise Unavailable(str(err), why=str(err).removesuffix("; nothing was created")
                          ) from None
    most = chosen.max_count.get(cloud.lower(), 0)
    if count > most:
        raise Unavailable(f"RunPod pods of {chosen.name} hold at most {most} GPUs on the "
                          f"{cloud.lower()} cloud, not {count}; nothing was created",
                          why=f"RunPod pods of {chosen.name} hold at most {most} GPUs on "
                              f"the {cloud.lower()} cloud, not {count}")
    if where and chosen.stock.get(where, "NONE") == "NONE":
        stocked = ", ".join(sorted(chosen.stock)) or "nowhere right now"
        why = (f"RunPod lists no {chosen.name} stock for {count} GPU(s) in {where} (it has "
               f"some in: {stocked})")
        raise Unavailable(f"{why}; nothing was created"
                          + (" — the network volume pins the data centre (RP7)" if vol else ""),
                          why=why)
    if not where and chosen.availability == "NONE" and not chosen.stock:
        why = (f"RunPod lists no {chosen.name} stock for {count} GPU(s) on the "
               f"{cloud.lower()} cloud in any data centre right now")
        raise Unavailable(f"{why}; nothing was created", why=why)
    return chosen
