"""The GraphQL routes of the fake RunPod API: what the official `runpod` SDK calls.

Source: github.com/runpod/runpod-python at commit 07fc6e2b (2026-08-10; PyPI runpod 1.12.0):
runpod/api/graphql.py posts {"query": TEXT} to `$RUNPOD_API_BASE_URL/graphql` with
`Authorization: Bearer KEY` (a 401 is its AuthenticationError, any "errors" its QueryError);
runpod/api/queries/{gpus,pods}.py and runpod/api/mutations/pods.py build the documents:

- query  gpuTypes                          → [GpuType] (get_gpus)
- query  gpuTypes(input: {id})             → [GpuType] with lowestPrice(input: {gpuCount})
                                             (get_gpu; create_pod checks the type with it)
- query  myself { pods }                   → [Pod] (get_pods)
- query  pod(input: {podId})               → Pod or null (get_pod)
- mutation podFindAndDeployOnDemand(input) → Pod (create_pod with a gpu_type_id)
- mutation podStop / podResume / podTerminate (input: {podId[, gpuCount]})

The same pods and GPU types as the REST routes (fake_runpod_api.py): a pod the SDK creates is
one `GET /v2/pods/{id}` reads, and the REST create's refusals (unknown GPU type, no stock, empty
balance) come back as GraphQL errors. Each answer holds exactly the fields the document selects,
and a field the type does not have is refused as a GraphQL server refuses it ("Cannot query
field"), so the fake cannot answer more than RunPod's schema has.
"""

from __future__ import annotations

import re
from typing import Any

TOKEN = re.compile(r'\s+|,|#[^\n]*|(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+(?:\.\d+)?)'
                   r'|(?P<name>[A-Za-z_]\w*)|(?P<punct>[{}()\[\]:])')


class GraphQLError(Exception):
    pass


class Parser:
    """The part of GraphQL the SDK's documents use: one operation, fields with arguments and
    selection sets, and literal values (strings, numbers, booleans, null, enums, lists,
    objects)."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, Any]] = []
        pos = 0
        while pos < len(text):
            m = TOKEN.match(text, pos)
            if m is None:
                raise GraphQLError(f"Syntax Error: Unexpected character {text[pos]!r}.")
            pos = m.end()
            if m.lastgroup == "str":
                self.tokens.append(("value", bytes(m.group()[1:-1], "utf-8")
                                    .decode("unicode_escape")))
            elif m.lastgroup == "num":
                num = m.group()
                self.tokens.append(("value", float(num) if "." in num else int(num)))
            elif m.lastgroup in ("name", "punct"):
                self.tokens.append((m.lastgroup, m.group()))
        self.at = 0

    def _peek(self) -> tuple[str, Any]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("eof", None)

    def _take(self, kind: str, text: str | None = None) -> Any:
        got = self._peek()
        if got[0] != kind or (text is not None and got[1] != text):
            raise GraphQLError(f"Syntax Error: Expected {text or kind}, found {got[1]!r}.")
        self.at += 1
        return got[1]

    def document(self) -> tuple[str, list[dict[str, Any]]]:
        kind = "query"
        if self._peek()[0] == "name":
            kind = self._take("name")
            if self._peek()[0] == "name":
                self._take("name")  # the operation's name
        fields = self.selection()
        self._take("eof")
        return kind, fields

    def selection(self) -> list[dict[str, Any]]:
        self._take("punct", "{")
        fields = []
        while self._peek() != ("punct", "}"):
            name = self._take("name")
            args: dict[str, Any] = {}
            if self._peek() == ("punct", "("):
                self._take("punct", "(")
                while self._peek() != ("punct", ")"):
                    key = self._take("name")
                    self._take("punct", ":")
                    args[key] = self.value()
                self._take("punct", ")")
            sub = self.selection() if self._peek() == ("punct", "{") else None
            fields.append({"name": name, "args": args, "fields": sub})
        self._take("punct", "}")
        return fields

    def value(self) -> Any:
        kind, text = self._peek()
        if kind == "value":
            self.at += 1
            return text
        if kind == "name":
            self.at += 1
            return {"true": True, "false": False, "null": None}.get(text, text)  # or an enum
        if (kind, text) == ("punct", "["):
            self._take("punct", "[")
            items = []
            while self._peek() != ("punct", "]"):
                items.append(self.value())
            self._take("punct", "]")
            return items
        if (kind, text) == ("punct", "{"):
            self._take("punct", "{")
            obj = {}
            while self._peek() != ("punct", "}"):
                key = self._take("name")
                self._take("punct", ":")
                obj[key] = self.value()
            self._take("punct", "}")
            return obj
        raise GraphQLError(f"Syntax Error: Unexpected {text!r}.")


def select(type_name: str, obj: dict[str, Any] | None, fields: list[dict[str, Any]] | None,
           ) -> Any:
    """`obj` cut to the selected fields; a field the type lacks is the server's refusal."""
    if obj is None:
        return None
    if fields is None:
        raise GraphQLError(f'Field of type "{type_name}" must have a selection of subfields.')
    out = {}
    for f in fields:
        if f["name"] not in obj:
            raise GraphQLError(f'Cannot query field "{f["name"]}" on type "{type_name}".')
        value = obj[f["name"]]
        if callable(value):  # a field with arguments (lowestPrice(input: …))
            value = value(f["args"])
        if isinstance(value, dict) and "__typename" in value:
            value = select(value["__typename"], value, f["fields"])
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            value = [select(v["__typename"], v, f["fields"]) for v in value]
        out[f["name"]] = value
    return out


def gpu_type(gpu: dict[str, Any]) -> dict[str, Any]:
    def lowest(args: dict[str, Any]) -> dict[str, Any]:
        count = (args.get("input") or {}).get("gpuCount", 1)
        in_stock = any(level != "NONE" for level in gpu["_stock"].values())
        return {"__typename": "LowestPrice", "gpuName": gpu["name"], "gpuTypeId": gpu["id"],
                "minimumBidPrice": round(gpu["price"]["community"] * 0.6 * count, 3),
                "uninterruptablePrice": round(gpu["price"]["community"] * count, 3),
                "stockStatus": max(gpu["_stock"].values(), key=["NONE", "LOW", "MEDIUM",
                                                                 "HIGH"].index)
                if in_stock else None}
    return {"__typename": "GpuType", "id": gpu["id"], "displayName": gpu["name"],
            "manufacturer": gpu["manufacturer"], "memoryInGb": gpu["memory"],
            "cudaCores": 16384, "secureCloud": gpu["secure"], "communityCloud": gpu["community"],
            "securePrice": gpu["price"]["secure"], "communityPrice": gpu["price"]["community"],
            "secureSpotPrice": round(gpu["price"]["secure"] * 0.6, 3),
            "communitySpotPrice": round(gpu["price"]["community"] * 0.6, 3),
            "oneWeekPrice": round(gpu["price"]["secure"] * 0.95, 3),
            "oneMonthPrice": round(gpu["price"]["secure"] * 0.9, 3),
            "threeMonthPrice": round(gpu["price"]["secure"] * 0.85, 3),
            "maxGpuCount": max(gpu["maxCount"].values()),
            "maxGpuCountSecureCloud": gpu["maxCount"]["secure"],
            "maxGpuCountCommunityCloud": gpu["maxCount"]["community"], "lowestPrice": lowest}


def pod_view(fake: Any, pod: dict[str, Any]) -> dict[str, Any]:
    """A pod as the GraphQL Pod type shows it (the REST pod's fields under their old names)."""
    public = fake._public(pod)
    gpu = next(g for g in fake.gpus if g["id"] == pod["gpu"]["id"])
    desired = {"RUNNING": "RUNNING", "STARTING": "RUNNING", "PROVISIONING": "RUNNING",
               "EXITED": "EXITED", "ERROR": "EXITED"}.get(pod["status"], "TERMINATED")
    persistent = (pod["mounts"] or {}).get("persistent") or {}
    ports = []
    for port in (public["runtime"] or {}).get("ports", []):
        ports.append({"__typename": "PodRuntimePorts", "ip": port["ip"], "isIpPublic": True,
                      "privatePort": port["private"], "publicPort": port["public"],
                      "type": port["type"]})
    runtime = None
    if public["runtime"] is not None:
        runtime = {"__typename": "PodRuntime", "uptimeInSeconds": public["runtime"]["uptime"],
                   "ports": ports,
                   "gpus": [{"__typename": "PodRuntimeGpus", "id": f"GPU-{i}",
                             "gpuUtilPercent": 0, "memoryUtilPercent": 0}
                            for i in range(pod["_gpus"])]}
    return {"__typename": "Pod", "id": pod["id"], "name": pod["name"],
            "imageName": pod["image"], "dockerArgs": pod["args"], "dockerId": None,
            "env": [f"{k}={v}" for k, v in pod["env"].items()], "machineId": "m-4242",
            "machine": {"__typename": "PodMachineInfo", "podHostId": f"{pod['id']}-64411eb2",
                        "gpuDisplayName": gpu["name"]},
            "containerDiskInGb": pod["disk"], "volumeInGb": persistent.get("size", 0),
            "volumeMountPath": persistent.get("path", "/workspace"),
            "costPerHr": public["cost"], "desiredStatus": desired, "gpuCount": pod["gpu"]["count"],
            "lastStatusChange": pod["createdAt"], "memoryInGb": 62, "vcpuCount": 16,
            "podType": "RESERVED", "port": None, "ports": ",".join(pod["ports"]),
            "uptimeSeconds": public["runtime"]["uptime"] if public["runtime"] else 0,
            "runtime": runtime}


def create_body(args: dict[str, Any]) -> dict[str, Any]:
    """podFindAndDeployOnDemand's input as the REST create's body (the same checks apply)."""
    given = args.get("input") or {}
    known = {"name", "imageName", "cloudType", "startSsh", "gpuTypeId", "supportPublicIp",
             "gpuCount", "volumeInGb", "minVcpuCount", "minMemoryInGb", "allowedCudaVersions",
             "dataCenterId", "dockerArgs", "countryCode", "containerDiskInGb", "ports",
             "volumeMountPath", "env", "templateId", "networkVolumeId", "minDownload",
             "minUpload"}
    unknown = sorted(set(given) - known)
    if unknown:
        raise GraphQLError(f'Field "{unknown[0]}" is not defined by type '
                           f'"PodFindAndDeployOnDemandInput".')
    body: dict[str, Any] = {"name": given.get("name", ""), "image": given.get("imageName", ""),
                            "gpu": {"id": given.get("gpuTypeId", ""),
                                    "count": given.get("gpuCount", 1)},
                            "startSsh": bool(given.get("startSsh")),
                            "ports": [p for p in (given.get("ports") or "").split(",") if p],
                            "env": {e["key"]: e["value"] for e in given.get("env") or []}}
    if given.get("cloudType") in ("SECURE", "COMMUNITY"):
        body["cloud"] = given["cloudType"]
    if given.get("dataCenterId"):
        body["dataCenterIds"] = [given["dataCenterId"]]
    if given.get("dockerArgs"):
        body["args"] = given["dockerArgs"]
    if given.get("containerDiskInGb"):
        body["disk"] = given["containerDiskInGb"]
    if given.get("allowedCudaVersions"):
        body["gpu"]["allowedCudaVersions"] = given["allowedCudaVersions"]
    path = given.get("volumeMountPath") or "/workspace"
    if given.get("networkVolumeId"):
        body["mounts"] = {"network": [{"volumeId": given["networkVolumeId"], "path": path}]}
    elif given.get("volumeInGb"):
        body["mounts"] = {"persistent": {"size": given["volumeInGb"], "path": path}}
    return body


def answer(fake: Any, body: Any) -> tuple[int, Any]:
    """POST /graphql: 200 with {"data"} or {"errors": [{"message"}]}, as GraphQL answers."""
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        return 400, {"errors": [{"message": "Must provide query string."}]}
    try:
        kind, fields = Parser(body["query"]).document()
        data = {f["name"]: resolve(fake, kind, f) for f in fields}
    except GraphQLError as e:
        return 200, {"errors": [{"message": str(e)}], "data": None}
    return 200, {"data": data}


def resolve(fake: Any, kind: str, f: dict[str, Any]) -> Any:
    name, args = f["name"], f["args"]
    given = args.get("input") or {}
    if kind == "query" and name == "gpuTypes":
        gpus = [g for g in fake.gpus if "id" not in given or g["id"] == given["id"]]
        return [select("GpuType", gpu_type(g), f["fields"]) for g in gpus]
    if kind == "query" and name == "myself":
        me = {"__typename": "User", "id": "user-rgt",
              "pods": [pod_view(fake, p) for p in fake.pods.values() if p["_deleted"] is None]}
        return select("User", me, f["fields"])
    if kind == "query" and name == "pod":
        pod = fake.pods.get(given.get("podId"))
        if pod is not None:
            fake._get(pod)  # a look moves a booting pod on, as GET /v2/pods/{id} does
        if pod is None or pod["_deleted"] is not None:
            return None
        return select("Pod", pod_view(fake, pod), f["fields"])
    if kind == "mutation" and name == "podFindAndDeployOnDemand":
        status, made = fake._create(create_body(args))
        if status != 201:
            raise GraphQLError(made["detail"])
        return select("Pod", pod_view(fake, fake.pods[made["id"]]), f["fields"])
    if kind == "mutation" and name in ("podStop", "podResume", "podTerminate"):
        pod = fake.pods.get(given.get("podId"))
        if pod is None or pod["_deleted"] is not None:
            raise GraphQLError("Pod not found")
        action = {"podStop": "stop", "podResume": "start", "podTerminate": "terminate"}[name]
        status, result = fake._action(pod, {"action": action})
        if status >= 400:
            raise GraphQLError(result["detail"])
        if name == "podTerminate":
            return None
        return select("Pod", pod_view(fake, pod), f["fields"])
    type_name = "Query" if kind == "query" else "Mutation"
    raise GraphQLError(f'Cannot query field "{name}" on type "{type_name}".')
