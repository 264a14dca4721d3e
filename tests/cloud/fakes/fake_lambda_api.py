"""A fake Lambda Cloud API, with the documented request/response shapes.

Docs: https://docs.lambda.ai/api/cloud (base https://cloud.lambdalabs.com/api/v1; auth: HTTP basic
with the API key as user name and an empty password, or `Authorization: Bearer KEY`):

- GET  /instance-types            → {"data": {name: {"instance_type": {name, description,
                                     price_cents_per_hour, specs},
                                     "regions_with_capacity_available": [{name, description}]}}}
- POST /instance-operations/launch → body {region_name, instance_type_name, ssh_key_names,
                                     file_system_names, quantity, name} → {"data": {"instance_ids"}}
- GET  /instances/{id}            → {"data": {id, name?, ip?, status, region, instance_type
                                     (the whole InstanceType), ssh_key_names, file_system_names,
                                     actions}}: no name unless one was given, no ip before one
                                     is assigned
- POST /instance-operations/terminate → body {instance_ids} → {"data": {"terminated_instances"}}
- GET  /file-systems              → {"data": [{id, name, region: {name, description}, is_in_use,
                                     bytes_used, mount_point, created, created_by}]}

Every answer is validated against the response schemas of Lambda's published spec v1.8.3
(tests/data/lambda_cloud/, by tests/cloud/test_fake_agreement_lambda.py).
- GET  /ssh-keys                  → {"data": [{id, name, public_key}]}

Errors: {"error": {"code", "message", "suggestion"}} — 401 global/invalid-api-key,
400 global/invalid-parameters, 400 instance-operations/launch/insufficient-capacity,
400 instance-operations/launch/file-system-in-wrong-region, 404 global/object-does-not-exist,
403 global/account-inactive (docs.lambda.ai/api/cloud error codes: the account cannot use the
API, e.g. no payment method), 429 rate limited. Rate limits (LambdaLabs/docsy-lambda-docs
content/en/cloud/rate-limiting.md, "Are API requests rate-limited?"): ~1 request/s in general and
1 request per 10 s to /instance-operations/launch, a 429 (Cloudflare "error code: 1015")
otherwise; `launch_interval_s` enforces the launch limit here (tests scale it down with
RGT_CLOUD_RATE_SCALE). Instance status enum (the API spec's InstanceStatus): booting, active,
unhealthy, terminating, terminated, preempted. Filesystem constraints:
docs.lambda.ai/public-cloud/filesystems (region-locked, attach at launch only).

Request bodies of the POSTs served here are checked against Lambda's published request schemas
(LAUNCH_SCHEMA, TERMINATE_SCHEMA below, each citing its source): a missing required field, a
wrong type, a limit broken (name > 64, hostname pattern, tag lengths) or an unknown field is a
400 global/invalid-parameters.

Honest on purpose: it rejects what the real API rejects, so the client cannot pass by sending
something the real service would refuse.
"""

from __future__ import annotations

import base64
import itertools
import re
import time
from typing import Any

from fake_http import FakeApi, Request

REGIONS = {"us-east-1": "Virginia, USA", "us-west-1": "California, USA",
           "us-south-1": "Texas, USA"}


# Request schemas --------------------------------------------------------------------------------
# Source: Lambda's published OpenAPI spec, https://cloud.lambda.ai/api/v1/openapi.json, as carried
# (converted to JSON Schema per operation) by the generated MCP client in github.com/wegotdocs/
# open-mcp, servers/lambda-ai/src/tools/<operation>/schema-json/root.json (launchinstance at commit
# d9b4715c32dccbb48ea3fdbe7c39331cb301028e, terminateinstance at 78a1f694fb47061fa1741fcb4cde706c).
# `quantity` is not in that (current) spec; it is in the older published spec v1.4.0
# (openapi-generator client model LaunchInstanceRequest: "quantity | int | Number of instances to
# launch | [optional] [default to 1]"), and Lambda's own docs example body sends it, so it is kept.
# Unknown fields: neither spec states `additionalProperties: false` for these bodies; the fake
# refuses any field the spec does not name anyway (stricter than documented, on purpose: a
# misspelt field the real API might ignore silently must fail here, loudly).
_STR: dict[str, Any] = {"type": "string"}
_STR_LIST: dict[str, Any] = {"type": "array", "items": _STR}

LAUNCH_SCHEMA: dict[str, Any] = {  # POST /instance-operations/launch (operationId launchInstance)
    "type": "object",
    "required": ["region_name", "instance_type_name", "ssh_key_names"],
    "additionalProperties": False,  # not in the spec: see above
    "properties": {
        "region_name": _STR,  # spec: string enum of region names (REGIONS below is a subset)
        "instance_type_name": _STR,
        "ssh_key_names": _STR_LIST,  # "Currently, exactly one SSH key must be specified."
        "file_system_names": _STR_LIST,  # "you can attach only one filesystem" (default [])
        "hostname": {"type": "string", "minLength": 1, "maxLength": 63,
                     "pattern": r"^[a-z0-9][0-9a-z-]{0,62}$"},
        "name": {"type": "string", "minLength": 0, "maxLength": 64},
        "image": {"anyOf": [
            {"type": "object", "required": ["id"], "additionalProperties": False,
             "properties": {"id": _STR}},
            {"type": "object", "required": ["family"], "additionalProperties": False,
             "properties": {"family": _STR}}]},
        # the spec's description: "plain text and cannot exceed 1MB" (no schema keyword for it)
        "user_data": {"type": "string", "maxBytes": 1_000_000},
        "tags": {"type": "array", "items": {
            "type": "object", "required": ["key", "value"], "additionalProperties": False,
            "properties": {"key": {"type": "string", "maxLength": 55,
                                   "pattern": r"^[a-z][a-z0-9-:]+$"},
                           "value": {"type": "string", "maxLength": 128}}}},
        "quantity": {"type": "integer"},  # spec v1.4.0 only (see above)
    },
}

TERMINATE_SCHEMA: dict[str, Any] = {  # POST /instance-operations/terminate (terminateInstance)
    "type": "object",
    "required": ["instance_ids"],
    "additionalProperties": False,  # not in the spec: see above
    "properties": {"instance_ids": _STR_LIST},
}

_TYPES: dict[str, Any] = {"string": str, "array": list, "object": dict, "integer": int}


def schema_errors(value: Any, schema: dict[str, Any], where: str = "body") -> list[str]:
    """The JSON Schema subset the schemas above use: type, required, properties,
    additionalProperties, items, minLength, maxLength, pattern, anyOf (plus maxBytes)."""
    if "anyOf" in schema:
        tries = [schema_errors(value, s, where) for s in schema["anyOf"]]
        return [] if any(not t for t in tries) else [f"{where}: matches none of the allowed "
                                                      f"shapes ({'; '.join(tries[0])})"]
    want = schema.get("type")
    if want and (not isinstance(value, _TYPES[want]) or isinstance(value, bool)):
        return [f"{where}: expected {want}, got {type(value).__name__}"]
    errors: list[str] = []
    if want == "object":
        props = schema.get("properties", {})
        errors += [f"{where}.{k}: required" for k in schema.get("required", []) if k not in value]
        if schema.get("additionalProperties", True) is False:
            errors += [f"{where}.{k}: unknown field" for k in value if k not in props]
        for k, sub in props.items():
            if k in value:
                errors += schema_errors(value[k], sub, f"{where}.{k}")
    elif want == "array":
        for i, item in enumerate(value):
            errors += schema_errors(item, schema.get("items", {}), f"{where}[{i}]")
    elif want == "string":
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{where}: must be at most {schema['maxLength']} characters")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: does not match {schema['pattern']}")
        if "maxBytes" in schema and len(value.encode()) > schema["maxBytes"]:
            errors.append(f"{where}: larger than {schema['maxBytes']} bytes")
    return errors


def _invalid(body: Any, schema: dict[str, Any]) -> tuple[int, Any] | None:
    errors = schema_errors(body, schema)
    if errors:
        return _err(400, "global/invalid-parameters", "Invalid request body: " + "; ".join(errors))
    return None


def _err(status: int, code: str, message: str, suggestion: str = "") -> tuple[int, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if suggestion:
        body["suggestion"] = suggestion
    return status, {"error": body}


class FakeLambda(FakeApi):
    prefix = "/api/v1"

    def __init__(self, key: str, *, ip: str = "127.0.0.1") -> None:
        super().__init__(key)
        self.ip = ip
        self.types: dict[str, dict[str, Any]] = {
            "gpu_1x_h100_pcie": {"price_cents_per_hour": 249, "description": "1x H100 (80 GB PCIe)",
                                 "gpu_description": "H100 (80 GB PCIe)"},
            "gpu_8x_h100_sxm5": {"price_cents_per_hour": 2392,
                                 "description": "8x H100 (80 GB SXM5)",
                                 "gpu_description": "H100 (80 GB SXM5)"},
            "gpu_1x_a10": {"price_cents_per_hour": 75, "description": "1x A10 (24 GB PCIe)",
                           "gpu_description": "A10 (24 GB PCIe)"},
        }
        self.capacity: dict[str, set[str]] = {name: set() for name in self.types}
        self.grant_after: dict[str, tuple[int, str]] = {}  # type → (after N polls, region)
        self.type_polls = 0
        self.filesystems: list[dict[str, Any]] = []
        self.ssh_keys = [{"id": "key-1", "name": "laptop", "public_key": "ssh-ed25519 AAAA x"}]
        self.instances: dict[str, dict[str, Any]] = {}
        self.boot_polls = 2        # GETs an instance stays booting
        self.terminate_polls = 2   # GETs an instance stays terminating
        self.after_terminate = "terminated"  # or "unhealthy": a box stuck in Alert
        self._ids = (f"inst-{n:04d}" for n in itertools.count(1))
        self.account_inactive = False  # answer every request 403 global/account-inactive
        self.redirect_to: str | None = None  # answer every request 301 Location: …
        self.launch_interval_s: float | None = None  # the documented 1 launch / 10 s
        self.launch_times: list[float] = []
        self.rate_limited = 0  # 429s answered
        # capacity listed by GET /instance-types but gone by the launch (someone else won):
        # the race LAM5 describes, answered as the documented insufficient-capacity
        self.race = False
        # the IP (public and private: one LAN) of the k-th instance launched (several
        # machines: a group's nodes); empty: every instance at `ip`, with no private_ip
        self.hosts: list[str] = []

    # fixtures-facing helpers ---------------------------------------------------------------

    def add_filesystem(self, name: str, region: str, bytes_used: int = 0) -> dict[str, Any]:
        fs = {"id": f"fs-{len(self.filesystems) + 1}", "name": name,
              "region": {"name": region, "description": REGIONS[region]},
              "is_in_use": False, "bytes_used": bytes_used,
              "mount_point": f"/lambda/nfs/{name}", "created": "2026-06-01T00:00:00+00:00",
              "created_by": {"id": "3da5a70a57a7422ea8a7203f98b2198b", "email": "me@example.com",
                             "status": "active"}}
        self.filesystems.append(fs)
        return fs

    def add_instance(self, status: str = "active", **fields: Any) -> dict[str, Any]:
        inst = {"id": next(self._ids), "name": "x", "ip": self.ip, "status": status,
                "region": {"name": "us-east-1", "description": REGIONS["us-east-1"]},
                "instance_type": {"name": "gpu_1x_h100_pcie"}, "ssh_key_names": ["laptop"],
                "file_system_names": [], "_polls": 0, **fields}
        self.instances[inst["id"]] = inst
        return inst

    # auth ------------------------------------------------------------------------------------

    def authorized(self, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        basic = "Basic " + base64.b64encode(f"{self.key}:".encode()).decode()
        return auth in (basic, f"Bearer {self.key}")

    def unauthorized(self) -> tuple[int, Any]:
        return _err(401, "global/invalid-api-key", "API key was invalid, expired, or deleted.",
                    "Check your API key or create a new one, then try again.")

    # routes ----------------------------------------------------------------------------------

    def handle(self, req: Request) -> tuple[Any, ...]:
        if self.redirect_to:
            return 301, {}, {"Location": self.redirect_to}
        if self.account_inactive:
            return _err(403, "global/account-inactive",
                        "Your account is inactive.",
                        "Make sure you have verified your email address and added a payment "
                        "method, or contact support.")
        route = (req.method, req.path)
        if route == ("POST", "/instance-operations/launch") and self.launch_interval_s:
            now = time.monotonic()
            if self.launch_times and now - self.launch_times[-1] < self.launch_interval_s:
                self.rate_limited += 1
                return 429, "error code: 1015"
            self.launch_times.append(now)
        if route == ("GET", "/instance-types"):
            return self._instance_types()
        if route == ("GET", "/file-systems"):
            return 200, {"data": self.filesystems}
        if route == ("GET", "/ssh-keys"):
            return 200, {"data": self.ssh_keys}
        if route == ("GET", "/instances"):
            return 200, {"data": [self._public(i) for i in self.instances.values()
                                  if i["status"] != "terminated"]}
        if req.method == "GET" and req.path.startswith("/instances/"):
            return self._instance(req.path.split("/")[2])
        if route == ("POST", "/instance-operations/launch"):
            return self._launch(req.body or {})
        if route == ("POST", "/instance-operations/terminate"):
            return self._terminate(req.body or {})
        return _err(404, "global/object-does-not-exist", f"no route {req.method} {req.path}")

    def _instance_types(self) -> tuple[int, Any]:
        self.type_polls += 1
        for name, (after, region) in self.grant_after.items():
            if self.type_polls > after:
                self.capacity[name].add(region)
        data = {}
        for name in self.types:
            data[name] = {
                "instance_type": self._instance_type(name),
                "regions_with_capacity_available": [
                    {"name": r, "description": REGIONS[r]} for r in sorted(self.capacity[name])],
            }
        return 200, {"data": data}

    def _launch(self, body: dict[str, Any]) -> tuple[int, Any]:
        # schema: LAUNCH_SCHEMA (Lambda OpenAPI launchInstance request body, cited above)
        if (refused := _invalid(body, LAUNCH_SCHEMA)) is not None:
            return refused
        region, itype = body.get("region_name"), body.get("instance_type_name")
        if region not in REGIONS:
            return _err(400, "global/invalid-parameters", f"Invalid region name {region!r}")
        if itype not in self.types:
            return _err(400, "global/invalid-parameters", f"Invalid instance type {itype!r}")
        keys = body.get("ssh_key_names")
        if not isinstance(keys, list) or len(keys) != 1:
            return _err(400, "global/invalid-parameters", "Exactly one SSH key name is required")
        if keys[0] not in {k["name"] for k in self.ssh_keys}:
            return _err(400, "global/invalid-parameters", f"SSH key {keys[0]!r} does not exist")
        if body.get("quantity", 1) != 1:
            return _err(400, "global/invalid-parameters", "quantity must be 1 here")
        fs_names = body.get("file_system_names") or []
        if len(fs_names) > 1:
            return _err(400, "global/invalid-parameters",
                        "Currently, only one (if any) file system may be specified")
        for fs_name in fs_names:
            fs = next((f for f in self.filesystems if f["name"] == fs_name), None)
            if fs is None:
                return _err(400, "global/invalid-parameters",
                            f"File system {fs_name!r} does not exist")
            if fs["region"]["name"] != region:
                return _err(400, "instance-operations/launch/file-system-in-wrong-region",
                            "File system is in a different region than the instance.",
                            "Launch in the file system's region.")
        if self.race or region not in self.capacity[itype]:
            return _err(400, "instance-operations/launch/insufficient-capacity",
                        "Not enough capacity to fulfill launch request.",
                        "Choose an instance type with more availability, or try again later.")
        inst = self.add_instance(status="booting", name=body.get("name") or "",
                                 ip=None, region={"name": region,
                                                  "description": REGIONS[region]},
                                 instance_type={"name": itype}, ssh_key_names=keys,
                                 file_system_names=fs_names,
                                 _host=self.hosts[len(self.instances) % len(self.hosts)]
                                 if self.hosts else None)
        for fs in self.filesystems:
            if fs["name"] in fs_names:
                fs["is_in_use"] = True
        return 200, {"data": {"instance_ids": [inst["id"]]}}

    def _instance(self, instance_id: str) -> tuple[int, Any]:
        inst = self.instances.get(instance_id)
        if inst is None:
            return _err(404, "global/object-does-not-exist", "Specified instance does not exist.")
        inst["_polls"] += 1
        if inst["status"] == "booting" and inst["_polls"] > self.boot_polls:
            inst.update(status="active", ip=inst.get("_host") or self.ip)
            if inst.get("_host"):
                inst["private_ip"] = inst["_host"]
        elif inst["status"] == "terminating" and inst["_polls"] > self.terminate_polls:
            inst["status"] = self.after_terminate
        return 200, {"data": self._public(inst)}

    def _terminate(self, body: dict[str, Any]) -> tuple[int, Any]:
        # schema: TERMINATE_SCHEMA (Lambda OpenAPI terminateInstance request body, cited above)
        if (refused := _invalid(body, TERMINATE_SCHEMA)) is not None:
            return refused
        ids = body.get("instance_ids")
        if not isinstance(ids, list) or not ids:
            return _err(400, "global/invalid-parameters", "instance_ids is required")
        done = []
        for instance_id in ids:
            inst = self.instances.get(instance_id)
            if inst is None or inst["status"] == "terminated":
                return _err(404, "global/object-does-not-exist",
                            f"Instance {instance_id} does not exist.")
            inst.update(status="terminating", _polls=0)
            done.append(self._public(inst))
        return 200, {"data": {"terminated_instances": done}}

    def _public(self, inst: dict[str, Any]) -> dict[str, Any]:
        """An Instance as the spec (v1.8.3, tests/data/lambda_cloud/) shapes it: the whole
        instance_type (description, price, specs), the actions it allows, no `name` when none
        was given ("If set, the user-provided name") and no `ip` before it has one (a string,
        never null)."""
        out = {k: v for k, v in inst.items() if not k.startswith("_")}
        out["instance_type"] = self._instance_type(out["instance_type"]["name"])
        if not out.get("name"):
            out.pop("name", None)
        if out.get("ip") is None:
            out.pop("ip", None)
        out["actions"] = _actions(out["status"])
        return out

    def _instance_type(self, name: str) -> dict[str, Any]:
        t = self.types[name]
        return {"name": name, "description": t["description"],
                "gpu_description": t["gpu_description"],
                "price_cents_per_hour": t["price_cents_per_hour"],
                "specs": {"vcpus": 26, "memory_gib": 200, "storage_gib": 1024, "gpus": 1}}


def _actions(status: str) -> dict[str, Any]:
    """InstanceActionAvailability: what the console's buttons allow in this status."""
    if status == "booting":
        blocked = {"available": False, "reason_code": "vm-has-not-launched",
                   "reason_description": "The instance has not launched yet."}
    elif status in ("terminating", "terminated"):
        blocked = {"available": False, "reason_code": "vm-is-terminating",
                   "reason_description": "The instance is terminating."}
    else:
        blocked = None
    free = {"available": True}
    return {"migrate": {"available": False, "reason_code": "vm-is-too-old",
                        "reason_description": "This instance cannot be migrated."},
            "rebuild": blocked or free, "restart": blocked or free,
            "cold_reboot": blocked or free, "terminate": blocked if status == "terminated"
            else free}
