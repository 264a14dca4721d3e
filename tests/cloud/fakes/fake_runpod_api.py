"""A fake RunPod REST API v2, with the request/response shapes of RunPod's published OpenAPI spec.

Source: RunPod's OpenAPI document for REST v2 (`https://api.runpod.io/v2/openapi.json`), as
carried by the docs repository github.com/runpod/docs, api-reference-v2/openapi.json at commit
a900806e (2026-08-20), and its pages api-reference-v2/migrate-from-v1.mdx and pods/*.mdx.
Base https://api.runpod.io, paths under /v2, `Authorization: Bearer KEY`.

- GET    /v2/catalog/gpus          ?include=AVAILABILITY&product=POD[&count=N&cloud=SECURE]
                                   → {"gpus": [GpuType]}: id (what a create names), name,
                                   memory, price {secure, community} per GPU-hour, maxCount
                                   {secure, community}, and with include: availability
                                   (NONE|LOW|MEDIUM|HIGH) and dataCenters [{id, name,
                                   availability}]. include without product, or product/count/
                                   cloud without include, is a 400 (GpuProductFilter).
- GET    /v2/network-volumes       → {"networkVolumes": [{id, name, size, dataCenter, type}]}
- GET    /v2/network-volumes/{id}  → NetworkVolume, 404 when there is none
- GET    /v2/account/ssh-keys      → {"keys": ["ssh-ed25519 AAAA… comment", …]}: the keys a pod
                                   created with `startSsh` gets (none registered: no SSH at all)
- POST   /v2/pods                  CreatePodRequest → 201 Pod (status PROVISIONING). The body is
                                   checked against CREATE_POD below (unevaluatedProperties:
                                   false, so an unknown field is a 422 naming it, as the
                                   migration guide says v2 does); cross-field rules are 400
                                   (exactly one of gpu/cpu, persistent XOR network mount, CUDA
                                   set XOR floor), an unknown GPU type or no stock in the data
                                   centres allowed is 400 (the spec: "this GPU and data center
                                   combination could not be placed"), gpu.count above maxCount
                                   is 400, a network volume the caller does not have is 404, a
                                   network volume in a data centre the request excludes is 400
                                   (NetworkMount: "in the same data center as the pod", RP7),
                                   an empty balance is 402.
- GET    /v2/pods                  → {"pods": [Pod]}
- GET    /v2/pods/{id}             → Pod; 404 once it is gone
- POST   /v2/pods/{id}/action      {"action": start|stop|restart|terminate} (PodActionRequest,
                                   additionalProperties false) → 200 Pod, 204 for terminate;
                                   409 when the action is not in the pod's `actions` (RUNNING:
                                   stop/restart/terminate; EXITED, ERROR: start/terminate;
                                   PROVISIONING, STARTING: stop/terminate)
- DELETE /v2/pods/{id}             → 204 with no body. The pod stays readable for
                                   `delete_polls` more GETs before they answer 404 (RP14: an OK
                                   from delete does not mean the pod is gone).

Pods: `ssh.direct` {host, port, username, command} exists only while the pod RUNS with 22/tcp
published; `runtime` is null unless RUNNING, and lists one entry per GPU the pod really has
(`runtime.gpus`), which is how a pod started again with ZERO GPUs (RP1) shows: RUNNING, gpu
{id, count: 1} as asked, runtime.gpus []. `cost` is the compute rate, 0.0 when EXITED.
Every (re)start publishes 22/tcp on a NEW public port (RP6): the fake opens a fresh TCP relay
to the real sshd each time, and a stopped pod's port answers nothing.

- POST   /graphql                  the GraphQL API the official `runpod` SDK calls (GPU types,
                                   pods, create/stop/resume/terminate): fake_runpod_graphql.py,
                                   over the same pods and GPU types as the routes above

Errors are RFC 9457 problems, {"title", "status", "detail", "errors"?}; 401 for a missing or
wrong key; 429 with an integer Retry-After and the RateLimit/RateLimit-Policy headers when the
per-minute quota (`per_minute`, the policy example: 60) is spent.

Honest on purpose: it rejects what the real API rejects, so rgt cannot pass by sending
something the real service would refuse.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import fake_runpod_graphql as graphql
from fake_http import FakeApi, Request

# The request schemas, transcribed from the spec (allOf parts merged into one object) --------
_STR: dict[str, Any] = {"type": "string"}
_CUDA = {"type": "string", "pattern": r"^\d+\.\d+$"}

CREATE_POD: dict[str, Any] = {  # CreatePodRequest (ContainerConfig + its own properties)
    "type": "object",
    "required": ["name"],
    "closed": True,  # unevaluatedProperties: false
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "image": _STR, "args": _STR,
        "disk": {"type": "integer", "minimum": 1},
        "env": {"type": "object", "values": _STR},
        "ports": {"type": "array", "items": _STR},
        "registry": {"type": ["string", "null"]},
        "cloud": {"enum": ["SECURE", "COMMUNITY"]},
        "cpu": {"type": "object"},
        "dataCenterIds": {"type": "array", "items": _STR},
        "globalNetworking": {"type": "boolean"},
        "gpu": {  # CreateGpuConfig = GpuConfig + CUDA constraints, unevaluatedProperties: false
            "type": "object", "required": ["id"], "closed": True,
            "properties": {"id": _STR, "count": {"type": "integer", "minimum": 1},
                           "allowedCudaVersions": {"type": "array", "items": _CUDA},
                           "minCudaVersion": _CUDA}},
        "mounts": {  # Mounts, additionalProperties: false
            "type": "object", "closed": True,
            "properties": {
                "persistent": {"type": "object", "required": ["size", "path"], "closed": True,
                               "properties": {"size": {"type": "integer", "minimum": 10},
                                              "path": _STR}},
                "network": {"type": "array", "maxItems": 1, "items": {
                    "type": "object", "required": ["volumeId", "path"], "closed": True,
                    "properties": {"volumeId": _STR, "path": _STR}}}}},
        "startJupyter": {"type": "boolean"},
        "startSsh": {"type": "boolean"},
        "templateId": {"type": "string", "minLength": 1},
    },
}
POD_ACTION: dict[str, Any] = {"type": "object", "required": ["action"], "closed": True,
                              "properties": {"action": {"enum": ["start", "stop", "restart",
                                                                 "terminate"]}}}
_TYPES: dict[str, Any] = {"string": str, "integer": int, "boolean": bool, "object": dict,
                          "array": list, "null": type(None)}


def schema_errors(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """The JSON Schema subset above, with messages shaped like the spec's example
    (`$: additional properties 'bogus' not allowed`)."""
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: value must be one of {', '.join(map(repr, schema['enum']))}"]
    kinds = schema.get("type")
    if kinds:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not any(isinstance(value, _TYPES[k]) and not (k == "integer" and
                   isinstance(value, bool)) for k in kinds):
            return [f"{where}: expected {' or '.join(kinds)}, but got {type(value).__name__}"]
    errors: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{where}: missing property '{k}'" for k in schema.get("required", [])
                   if k not in value]
        if schema.get("closed"):
            extra = [k for k in value if k not in props]
            if extra:
                errors.append(f"{where}: additional properties "
                              f"{', '.join(repr(k) for k in extra)} not allowed")
        for key, sub in props.items():
            if key in value:
                errors += schema_errors(value[key], sub, f"{where}.{key}")
        if "values" in schema:
            for key, item in value.items():
                errors += schema_errors(item, schema["values"], f"{where}.{key}")
    elif isinstance(value, list):
        if len(value) > schema.get("maxItems", math.inf):
            errors.append(f"{where}: maximum {schema['maxItems']} items allowed")
        for i, item in enumerate(value):
            errors += schema_errors(item, schema.get("items", {}), f"{where}[{i}]")
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: minLength {schema['minLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: does not match pattern {schema['pattern']}")
    elif isinstance(value, int) and not isinstance(value, bool) \
            and value < schema.get("minimum", -math.inf):
        errors.append(f"{where}: minimum {schema['minimum']}")
    return errors


def problem(status: int, detail: str, errors: list[str] | None = None) -> tuple[int, Any]:
    titles = {400: "Bad Request", 401: "Unauthorized", 402: "Payment Required",
              403: "Forbidden", 404: "Not Found", 409: "Conflict",
              422: "Unprocessable Entity", 429: "Too Many Requests"}
    body: dict[str, Any] = {"title": titles.get(status, "Error"), "status": status,
                            "detail": detail}
    if errors:
        body["errors"] = errors
    return status, body


class Relay:
    """127.0.0.1:<new port> → 127.0.0.1:<target>: the pod's published 22/tcp for one start."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """The container stopped: its port answers nothing, open sessions drop."""
        self.sock.close()
        for s in self.open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
                s.close()


def gpu_type(id: str, name: str, *, memory: int, secure: float, community: float,
             max_count: int = 8, stock: dict[str, str] | None = None) -> dict[str, Any]:
    """A catalog entry; `stock` is data centre → availability level (pods, one GPU)."""
    return {"id": id, "name": name, "pool": None, "manufacturer": "NVIDIA", "memory": memory,
            "secure": True, "community": True,
            "price": {"secure": secure, "community": community},
            "maxCount": {"secure": max_count, "community": max_count},
            "_stock": dict(stock or {"US-TX-3": "HIGH", "EU-RO-1": "MEDIUM"})}


DATA_CENTRES = {"US-TX-3": "US Texas 3", "EU-RO-1": "EU Romania 1", "US-KS-2": "US Kansas 2"}
ACTIONS = {"RUNNING": ["stop", "restart", "terminate"], "EXITED": ["start", "terminate"],
           "ERROR": ["start", "terminate"], "PROVISIONING": ["stop", "terminate"],
           "STARTING": ["stop", "terminate"], "TERMINATED": []}


class FakeRunPod(FakeApi):
    prefix = ""

    def __init__(self, key: str, *, ssh_port: int = 22) -> None:
        super().__init__(key)
        self.ssh_port = ssh_port  # the real sshd every pod's 22/tcp leads to
        self.gpus = [
            gpu_type("NVIDIA GeForce RTX 4090", "RTX 4090", memory=24, secure=0.69,
                     community=0.34),
            gpu_type("NVIDIA H100 80GB HBM3", "H100 SXM", memory=80, secure=2.69,
                     community=2.39),
            gpu_type("NVIDIA RTX A6000", "RTX A6000", memory=48, secure=0.49, community=0.33,
                     stock={"EU-RO-1": "LOW"}),
        ]
        self.volumes: dict[str, dict[str, Any]] = {}
        self.ssh_keys: list[str] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self.boot_polls = 2      # GETs a (re)started pod stays PROVISIONING/STARTING
        self.delete_polls = 2    # GETs a deleted pod stays readable (RP14)
        self.balance_empty = False  # every create answers 402
        self.per_minute: int | None = None  # the RateLimit-Policy's minute quota, if enforced
        self.window_s = 60.0
        self.stamps: list[float] = []
        self.rate_limited = 0
        self.next_start_gpus: int | None = None  # GPUs the next start finds free (RP1: 0)
        self.on_stop: Callable[[str], None] | None = None  # the container's processes die
        # (host, port) of the k-th pod's full SSH, reached directly rather than through a
        # relay (several machines: a group's nodes); empty: relays to 127.0.0.1:ssh_port
        self.hosts: list[tuple[str, int]] = []
        self._ids = (f"pod{n:06d}rgt" for n in itertools.count(1))
        self._vol_ids = (f"vol{n:04d}" for n in itertools.count(1))

    # fixture-facing helpers ----------------------------------------------------------------

    def add_volume(self, name: str, data_centre: str, size: int = 100,
                   type: str = "STANDARD") -> dict[str, Any]:
        vol = {"id": next(self._vol_ids), "name": name, "size": size,
               "dataCenter": data_centre, "type": type}
        self.volumes[vol["id"]] = vol
        return vol

    def add_pod(self, name: str = "rp", *, gpu: int = 0, count: int = 1,
                volume: str | None = None, disk_gb: int = 50) -> dict[str, Any]:
        """A pod created as `POST /v2/pods` would, already RUNNING (tests that need no boot)."""
        mounts = ({"network": [{"volumeId": volume, "path": "/workspace"}]} if volume
                  else {"persistent": {"size": disk_gb, "path": "/workspace"}})
        status, pod = self._create({"name": name, "image": "img", "ports": ["22/tcp"],
                                    "startSsh": True, "mounts": mounts,
                                    "gpu": {"id": self.gpus[gpu]["id"], "count": count}})
        assert status == 201, pod
        for _ in range(self.boot_polls + 1):
            self._get(self.pods[pod["id"]])
        return self.pods[pod["id"]]

    def stop_by_platform(self, pod_id: str) -> None:
        """RunPod stops the pod itself (spot reclaimed, balance ran low): EXITED."""
        self._stop(self.pods[pod_id])

    def start_by_host(self, pod_id: str, gpus: int | None = None) -> None:
        """A stopped pod starts again (someone pressed start in the console)."""
        self._start(self.pods[pod_id], gpus)

    def restart_by_host(self, pod_id: str, gpus: int | None = None) -> None:
        """The pod restarts on its own (host maintenance, a stop and start by someone else):
        the container's processes die, the port changes, and it may come back with `gpus`."""
        pod = self.pods[pod_id]
        self._stop(pod)
        self._start(pod, gpus)

    # auth and rate limits ------------------------------------------------------------------

    def unauthorized(self) -> tuple[int, Any]:
        return problem(401, "invalid bearer token")

    def _throttle(self) -> tuple[Any, ...] | None:
        if self.per_minute is None:
            return None
        now = time.monotonic()
        self.stamps = [t for t in self.stamps if now - t < self.window_s]
        if len(self.stamps) >= self.per_minute:
            self.rate_limited += 1
            wait = max(1, math.ceil(self.window_s - (now - self.stamps[0])))
            status, body = problem(429, "rate limit exceeded for the minute window")
            return status, body, {"Retry-After": str(wait),
                                  "RateLimit": f'"minute";r=0;t={wait}',
                                  "RateLimit-Policy": f'"minute";q={self.per_minute};'
                                                      f"w={int(self.window_s)}"}
        self.stamps.append(now)
        return None

    # routes --------------------------------------------------------------------------------

    def handle(self, req: Request) -> tuple[Any, ...]:
        if (limited := self._throttle()) is not None:
            return limited
        parts = req.path.rstrip("/").split("/")[1:]  # ['v2', 'pods', id, 'action']
        route = (req.method, "/".join(parts[:2]), len(parts))
        if route == ("GET", "v2/catalog", 3) and parts[2] == "gpus":
            return self._catalog(req.query)
        if route == ("GET", "v2/network-volumes", 2):
            return 200, {"networkVolumes": list(self.volumes.values())}
        if route == ("GET", "v2/network-volumes", 3):
            vol = self.volumes.get(parts[2])
            return (200, vol) if vol else problem(404, "network volume not found")
        if route == ("GET", "v2/account", 3) and parts[2] == "ssh-keys":
            return 200, {"keys": list(self.ssh_keys)}
        if route == ("GET", "v2/pods", 2):
            return 200, {"pods": [self._public(p) for p in self.pods.values()]}
        if route == ("POST", "v2/pods", 2):
            return self._create(req.body)
        if parts[:2] == ["v2", "pods"] and len(parts) >= 3:
            pod = self.pods.get(parts[2])
            if pod is None:
                return problem(404, "pod not found")
            if route == ("GET", "v2/pods", 3):
                return self._get(pod)
            if route == ("DELETE", "v2/pods", 3):
                return self._delete(pod)
            if route == ("POST", "v2/pods", 4) and parts[3] == "action":
                return self._action(pod, req.body)
        if route == ("POST", "graphql", 1):  # the official SDK's API (fake_runpod_graphql.py)
            return graphql.answer(self, req.body)
        return problem(404, f"no route {req.method} {req.path}")

    def _catalog(self, query: dict[str, str]) -> tuple[int, Any]:
        include = query.get("include")
        if include is not None and include != "AVAILABILITY":
            return problem(422, f"include: unknown value {include!r}")
        if include and "product" not in query:
            return problem(400, "product is required with include=AVAILABILITY")
        if not include and any(k in query for k in ("product", "count", "cloud")):
            return problem(400, "product, count and cloud are valid only with "
                                "include=AVAILABILITY")
        count = int(query.get("count") or 1)
        cloud = (query.get("cloud") or "SECURE").lower()
        rows = []
        for gpu in self.gpus:
            row = {k: v for k, v in gpu.items() if not k.startswith("_")}
            if include:
                fits = count <= gpu["maxCount"][cloud]
                centres = [{"id": dc, "name": DATA_CENTRES[dc], "availability": level}
                           for dc, level in gpu["_stock"].items() if fits and level != "NONE"]
                row["availability"] = max((c["availability"] for c in centres),
                                          key=["NONE", "LOW", "MEDIUM", "HIGH"].index,
                                          default="NONE")
                if centres:
                    row["dataCenters"] = centres
            rows.append(row)
        return 200, {"gpus": rows}

    def _create(self, body: Any) -> tuple[int, Any]:
        errors = schema_errors(body, CREATE_POD)
        if not errors and "templateId" not in body and "image" not in body:
            errors.append("$: missing property 'image'")  # the schema's if/then
        if errors:
            return problem(422, "Request validation failed.", errors)
        if ("gpu" in body) == ("cpu" in body):
            return problem(400, "exactly one of gpu or cpu must be set")
        mounts = body.get("mounts") or {}
        if "persistent" in mounts and mounts.get("network"):
            return problem(400, "mounts.persistent and mounts.network are mutually exclusive")
        gpu_req = body["gpu"]
        if gpu_req.get("allowedCudaVersions") and "minCudaVersion" in gpu_req:
            return problem(400, "allowedCudaVersions and minCudaVersion are mutually exclusive")
        if self.balance_empty:
            return problem(402, "insufficient balance to deploy this pod")
        gpu = next((g for g in self.gpus if g["id"] == gpu_req["id"]), None)
        if gpu is None:
            return problem(400, f"unknown GPU type {gpu_req['id']!r}")
        cloud = body.get("cloud", "SECURE")
        count = gpu_req.get("count", 1)
        if count > gpu["maxCount"][cloud.lower()]:
            return problem(400, f"{gpu['id']} pods hold at most "
                                f"{gpu['maxCount'][cloud.lower()]} GPUs on {cloud}")
        allowed = body.get("dataCenterIds") or list(DATA_CENTRES)
        network = mounts.get("network") or []
        if network:
            vol = self.volumes.get(network[0]["volumeId"])
            if vol is None:
                return problem(404, f"network volume {network[0]['volumeId']} not found")
            if vol["dataCenter"] not in allowed:
                return problem(400, f"network volume {vol['id']} is in {vol['dataCenter']}; "
                                    f"a pod can only mount a network volume in its own data "
                                    f"center")
            allowed = [vol["dataCenter"]]
        placed = next((dc for dc in allowed if gpu["_stock"].get(dc, "NONE") != "NONE"), None)
        if placed is None:
            return problem(400, "There are no instances currently available")
        pod_id = next(self._ids)
        pod = {"id": pod_id, "name": body["name"], "image": body.get("image", ""),
               "args": body.get("args", ""), "disk": body.get("disk", 50),
               "ports": body.get("ports", []), "env": body.get("env", {}),
               "registry": body.get("registry"), "status": "PROVISIONING",
               "mounts": mounts, "gpu": {"id": gpu["id"], "count": count}, "cloud": cloud,
               "dataCenterId": placed, "cudaVersion": "12.8", "template": None,
               "locked": False, "globalNetworking": {"enabled": False},
               "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "startedAt": None, "_rate": gpu["price"][cloud.lower()] * count,
               "_polls": 0, "_gpus": count, "_relay": None, "_deleted": None,
               "_ssh": bool(body.get("startSsh")) and bool(self.ssh_keys),
               "_endpoint": self.hosts[len(self.pods) % len(self.hosts)] if self.hosts
               else None}
        self.pods[pod_id] = pod
        return 201, self._public(pod)

    def _get(self, pod: dict[str, Any]) -> tuple[int, Any]:
        if pod["_deleted"] is not None:
            pod["_deleted"] -= 1
            if pod["_deleted"] < 0:
                del self.pods[pod["id"]]
                return problem(404, "pod not found")
            return 200, self._public(pod)
        pod["_polls"] += 1
        if pod["status"] in ("PROVISIONING", "STARTING") and pod["_polls"] > self.boot_polls:
            pod["status"] = "RUNNING"
            pod["startedAt"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            pod["_relay"] = None if pod["_endpoint"] else Relay(self.ssh_port)
        elif pod["status"] == "PROVISIONING" and pod["_polls"] > self.boot_polls // 2:
            pod["status"] = "STARTING"
        return 200, self._public(pod)

    def _action(self, pod: dict[str, Any], body: Any) -> tuple[int, Any]:
        errors = schema_errors(body, POD_ACTION)
        if errors:
            return problem(422, "Request validation failed.", errors)
        action = body["action"]
        if pod["_deleted"] is not None or action not in ACTIONS[pod["status"]]:
            return problem(409, f"action {action!r} is not valid for a pod that is "
                                f"{pod['status']}")
        if action == "terminate":
            return self._delete(pod)
        if action == "stop":
            self._stop(pod)
        elif action == "start":
            self._start(pod)
        else:  # restart: the container starts over in place
            self._stop(pod)
            self._start(pod)
        return 200, self._public(pod)

    def _delete(self, pod: dict[str, Any]) -> tuple[Any, ...]:
        self._close(pod)
        if pod["_deleted"] is None:
            pod["_deleted"] = self.delete_polls
        return 204, None

    def _stop(self, pod: dict[str, Any]) -> None:
        self._close(pod)
        if self.on_stop is not None:
            self.on_stop(pod["id"])  # the container dies: its processes, its container disk
        pod["status"] = "EXITED"

    def _start(self, pod: dict[str, Any], gpus: int | None = None) -> None:
        if gpus is None:
            gpus = self.next_start_gpus
            self.next_start_gpus = None
        pod.update(status="STARTING", _polls=0, _gpus=pod["gpu"]["count"] if gpus is None
                   else gpus)

    @staticmethod
    def _close(pod: dict[str, Any]) -> None:
        if pod["_relay"] is not None:
            pod["_relay"].close()
            pod["_relay"] = None

    def _public(self, pod: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in pod.items() if not k.startswith("_")}
        running = pod["status"] == "RUNNING"
        out["actions"] = [] if pod["_deleted"] is not None else ACTIONS[pod["status"]]
        out["cost"] = pod["_rate"] if pod["status"] in ("RUNNING", "STARTING",
                                                        "PROVISIONING") else 0.0
        relay = pod["_relay"]
        direct = None
        host, port = pod["_endpoint"] or ("127.0.0.1", relay.port if relay else None)
        if running and port and "22/tcp" in pod["ports"] and pod["_ssh"]:
            direct = {"host": host, "port": port, "username": "root",
                      "command": f"ssh root@{host} -p {port}"}
        proxy = {"host": "ssh.runpod.io", "port": 22, "username": f"{pod['id']}-64411eb2",
                 "command": f"ssh {pod['id']}-64411eb2@ssh.runpod.io"}
        out["ssh"] = {"proxy": proxy, "direct": direct}
        out["runtime"] = None
        if running:
            out["runtime"] = {
                "uptime": 1, "gpus": [{"util": 0, "memoryUtil": 0}] * pod["_gpus"],
                "cpu": {"util": 1}, "memory": {"util": 1},
                "ports": [{"private": 22, "public": port, "type": "tcp", "ip": host}]}
        return out
