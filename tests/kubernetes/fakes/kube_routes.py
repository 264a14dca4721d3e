"""The REST paths of the fake API server (kube_api.FakeKubeApi) and their answers."""

from __future__ import annotations

import http.client
import json
import os
import re
import time
from typing import Any
from urllib.parse import unquote, urlencode

from kube_api import RESOURCES, ApiFailure, kind_ref

PATH = re.compile(r"^(?P<base>/api/v1|/apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?"
                  r"/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+)(?P<rest>/.*)?)?)?$")
VERB = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
SHORT = {"pods": ["po"], "persistentvolumeclaims": ["pvc"], "events": ["ev"], "nodes": ["no"],
         "namespaces": ["ns"], "services": ["svc"], "storageclasses": ["sc"]}
GROUPS = {"batch": "v1", "storage.k8s.io": "v1", "authorization.k8s.io": "v1", "policy": "v1"}


def resource_list(group_version: str) -> dict:
    resources = []
    for plural, (base, kind, namespaced, _) in RESOURCES.items():
        if base == ("/api/v1" if group_version == "v1" else f"/apis/{group_version}"):
            resources.append({"name": plural, "singularName": kind.lower(),
                              "namespaced": namespaced, "kind": kind,
                              "shortNames": SHORT.get(plural, []),
                              "verbs": ["create", "delete", "get", "list", "watch"]})
    if group_version == "v1":
        resources += [
            {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
             "verbs": ["get"]},
            {"name": "pods/proxy", "singularName": "", "namespaced": True,
             "kind": "PodProxyOptions", "verbs": ["create", "delete", "get", "patch", "update"]},
            {"name": "pods/eviction", "singularName": "", "namespaced": True,
             "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}]
    if group_version == "authorization.k8s.io/v1":
        resources.append({"name": "selfsubjectaccessreviews", "singularName": "",
                          "namespaced": False, "kind": "SelfSubjectAccessReview",
                          "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": resources}


def discovery(api, path: str) -> Any:
    if path == "/version":
        return {"major": "1", "minor": "32", "gitVersion": "v1.32.0-rgt-fake",
                "platform": "linux/amd64", "goVersion": "go1.23", "compiler": "gc",
                "gitCommit": "0" * 40, "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z"}
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": api.url.split("//")[1]}]}
    served = {**GROUPS, **{g: v for g, (v, _) in api.extra_groups.items()}}
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
             "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}}
            for g, v in served.items()]}
    if path == "/api/v1":
        return resource_list("v1")
    match = re.match(r"^/apis/([^/]+)/([^/]+)$", path)
    if match and match[1] in api.extra_groups and api.extra_groups[match[1]][0] == match[2]:
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": path[6:],
                "resources": [{"name": plural, "singularName": kind.lower(), "namespaced": True,
                               "kind": kind, "verbs": ["create", "delete", "get", "list",
                                                       "patch", "update", "watch"]}
                              for plural, kind in api.extra_groups[match[1]][1].items()]}
    if match and GROUPS.get(match[1]) == match[2]:
        return resource_list(f"{match[1]}/{match[2]}")
    return None


def route(api, h, method: str, path: str, query: dict, headers: dict, raw: bytes):
    user = api.user_of(headers, headers.pop("x-fake-peer", None))
    if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and method == "POST" \
            and "protobuf" in headers.get("content-type", ""):
        return access_review(api, user, review_from_protobuf(raw))  # kubectl auth can-i
    if raw and "json" not in headers.get("content-type", "application/json") and \
            "/proxy" not in path:  # a proxied body is the pod's business
        # protobuf / CBOR: the fake speaks JSON only; client-go falls back to JSON on a 415
        raise ApiFailure(415, "UnsupportedMediaType",
                         "the body of the request was in an unknown format - accepted media "
                         "types include: application/json, application/yaml")
    if method == "GET":
        found = discovery(api, path)
        if found is not None:
            return 200, found
    if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and method == "POST":
        return access_review(api, user, json.loads(raw or b"{}"))
    match = PATH.match(path)
    if not match or match["plural"] not in RESOURCES or \
            RESOURCES[match["plural"]][0] != match["base"]:
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                     "message": "the server could not find the requested resource",
                     "reason": "NotFound", "code": 404, "metadata": {}}
    plural, ns, name = match["plural"], unquote(match["ns"] or ""), unquote(match["name"] or "")
    sub, rest = match["sub"] or "", match["rest"] or ""
    namespaced = RESOURCES[plural][2]
    if namespaced and not ns and name:
        raise ApiFailure(404, "NotFound", "the server could not find the requested resource")
    verb = VERB[method] if name else {"GET": "list", "POST": "create"}.get(method, "")
    if method == "GET" and not name and query.get("watch") in ("true", "1"):
        verb = "watch"
    if not verb:
        raise ApiFailure(405, "MethodNotAllowed", f"{method} is not supported here")
    if sub == "eviction":
        verb = "create"
    api.authorize(user, verb, plural, sub, ns, name.split(":")[0])
    if sub == "log":
        return pod_log(api, h, ns, name, query)
    if sub == "proxy":
        return proxy(api, h, method, ns, name, rest, query, headers, raw)
    if sub == "eviction":
        api.cluster.evict(ns, name, reason="EvictionByEvictionAPI")
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success",
                     "metadata": {}, "code": 201}
    if sub:
        raise ApiFailure(404, "NotFound", f"subresource {sub} is not served by the fake")
    if verb in ("list", "watch"):
        items = api.list(plural, ns if namespaced else None, query.get("labelSelector"),
                         query.get("fieldSelector"))
        kind = RESOURCES[plural][1] + "List"
        return 200, {"kind": kind, "apiVersion": RESOURCES[plural][0].split("/", 2)[-1],
                     "metadata": {"resourceVersion": str(api.version)}, "items": items}
    if verb == "get":
        obj = api.get(plural, ns, name)
        if obj is None:
            raise ApiFailure(404, "NotFound", f'{kind_ref(plural)} "{name}" not found',
                             {"name": name, "kind": plural})
        return 200, obj
    if verb == "create":
        return create(api, plural, ns, json.loads(raw or b"{}"), query)
    if verb == "patch":
        return patch(api, plural, ns, name, raw, headers, query)
    if verb == "delete":
        options = json.loads(raw or b"{}") if raw else {}
        propagation = options.get("propagationPolicy") or query.get("propagationPolicy")
        grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        return 200, api.cluster.delete(plural, ns, name, propagation=propagation,
                                       grace=None if grace is None else int(grace))
    raise ApiFailure(405, "MethodNotAllowed", f"{method} is not supported by the fake")


def create(api, plural: str, ns: str, obj: dict, query: dict):
    if RESOURCES[plural][2] and api.get("namespaces", "", ns) is None:
        raise ApiFailure(404, "NotFound", f'namespaces "{ns}" not found',
                         {"name": ns, "kind": "namespaces"})
    if not obj.get("kind") or not obj.get("apiVersion"):  # the API server's decoder
        missing = "apiVersion" if obj.get("kind") else "Kind"
        raise ApiFailure(400, "BadRequest",
                         f"Object '{missing}' is missing in '{json.dumps(obj)[:200]}'")
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + os.urandom(3).hex()[:5]
    if meta.get("namespace") and meta["namespace"] != ns:
        raise ApiFailure(400, "BadRequest", "the namespace of the provided object does not "
                         "match the namespace sent on the request")
    api.validate(plural, obj, strict=query.get("fieldValidation", "Strict") == "Strict")
    with api.lock:
        if api.get(plural, ns, meta["name"]) is not None:
            raise ApiFailure(409, "AlreadyExists",
                             f'{kind_ref(plural)} "{meta["name"]}" already exists',
                             {"name": meta["name"], "kind": plural})
        api.cluster.admit(plural, ns, obj)
        api.put(plural, ns, obj)
    return 201, obj


def merged(target, change):
    """RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(change, dict):
        return change
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in change.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


def patch(api, plural: str, ns: str, name: str, raw: bytes, headers: dict, query: dict):
    """PATCH with application/merge-patch+json (the only patch type the fake speaks; the
    real server answers 415 for a type it does not know): validated as a create is."""
    ctype = headers.get("content-type", "")
    if "merge-patch+json" not in ctype:
        raise ApiFailure(415, "UnsupportedMediaType", f"the body of the request was in an "
                         f"unknown format - accepted media types include: "
                         f"application/merge-patch+json (the fake's only patch type), not "
                         f"{ctype!r}")
    with api.lock:
        obj = api.get(plural, ns, name)
        if obj is None:
            raise ApiFailure(404, "NotFound", f'{kind_ref(plural)} "{name}" not found',
                             {"name": name, "kind": plural})
        change = json.loads(raw or b"{}")
        after = merged(obj, change)
        for fixed in ("name", "namespace", "uid"):
            if (after.get("metadata") or {}).get(fixed) != obj["metadata"].get(fixed):
                raise ApiFailure(422, "Invalid", f"metadata.{fixed}: field is immutable")
        api.validate(plural, after, strict=query.get("fieldValidation", "Strict") == "Strict")
        obj.clear()
        obj.update(after)
        api.touch(obj)
    return 200, obj


def access_review(api, user: str, review: dict):
    attrs = (review.get("spec") or {}).get("resourceAttributes") or {}
    resource = attrs.get("resource", "")
    if attrs.get("subresource"):
        resource += "/" + attrs["subresource"]
    allowed = api.allowed(user, attrs.get("verb", ""), resource)
    review["status"] = {"allowed": allowed, **({} if allowed else {"reason": ""})}
    review.setdefault("apiVersion", "authorization.k8s.io/v1")
    review.setdefault("kind", "SelfSubjectAccessReview")
    review.setdefault("metadata", {"creationTimestamp": None})
    return 201, review


def _running_pod(api, ns: str, name: str) -> dict:
    pod = api.get("pods", ns, name)
    if pod is None:
        raise ApiFailure(404, "NotFound", f'pods "{name}" not found',
                         {"name": name, "kind": "pods"})
    return pod


def pod_log(api, h, ns: str, name: str, query: dict):
    pod = _running_pod(api, ns, name)
    container = query.get("container") or pod["spec"]["containers"][0]["name"]
    if query.get("previous") in ("true", "1"):
        raise ApiFailure(400, "BadRequest", f'previous terminated container "{container}" in '
                         f'pod "{name}" not found')
    path = api.cluster.log_path(pod)
    if path is None:
        waiting = api.cluster.waiting_reason(pod) or "ContainerCreating"
        raise ApiFailure(400, "BadRequest", f'container "{container}" in pod "{name}" is '
                         f"waiting to start: {waiting}")
    if query.get("follow") not in ("true", "1"):
        data = path.read_bytes()
        if query.get("tailLines"):
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(query["tailLines"]):]) if int(query["tailLines"]) else b""
        if query.get("limitBytes"):
            data = data[:int(query["limitBytes"])]
        return 200, data, "text/plain"
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    with open(path, "rb") as log:
        while True:
            block = log.read(65536)
            if block:
                h.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                h.wfile.flush()
                continue
            if not api.cluster.running(pod):
                block = log.read()
                if block:
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                break
            time.sleep(0.05)
    h.wfile.write(b"0\r\n\r\n")
    return None


def proxy(api, h, method: str, ns: str, name: str, rest: str, query: dict, headers: dict,
          raw: bytes):
    """The API server's pod proxy: the request goes on to the pod's IP and port as it came."""
    pod_name, _, port = name.partition(":")
    pod = _running_pod(api, ns, pod_name)
    if not port:
        ports = [p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports")
                 or []]
        port = str(ports[0]) if ports else "80"
    ip = (pod.get("status") or {}).get("podIP")
    if not ip or not api.cluster.running(pod):
        raise ApiFailure(503, "ServiceUnavailable", f"error trying to reach service: dial tcp "
                         f"{ip or '<nil>'}:{port}: connect: connection refused")
    forward = {k: v for k, v in headers.items()
               if k in ("content-type", "range", "accept", "x-rgt-door-token")}
    try:
        conn = http.client.HTTPConnection(ip, int(port), timeout=600)
        conn.request(method, (rest or "/") + ("?" + urlencode(query) if query else ""),
                     body=raw or None, headers=forward)
        answer = conn.getresponse()
    except OSError as err:
        raise ApiFailure(503, "ServiceUnavailable",
                         f"error trying to reach service: dial tcp {ip}:{port}: {err}") from None
    h.send_response(answer.status)
    for key in ("Content-Type", "Content-Length", "Content-Range"):
        if answer.getheader(key):
            h.send_header(key, answer.getheader(key))
    h.end_headers()
    budget = api.cut_proxy_after.pop(0) if api.cut_proxy_after and rest == "/file" else None
    while True:
        block = answer.read(1 << 16)
        if not block:
            break
        if budget is not None:  # a test's dropped connection: part of the body, then nothing
            block, budget = block[:budget], budget - len(block)
        try:
            h.wfile.write(block)
        except OSError:
            break
        if budget is not None and budget <= 0:
            h.close_connection = True
            h.connection.shutdown(2)
            break
    conn.close()
    return None


def _fields(data: bytes) -> dict[int, list]:
    """One protobuf message's fields: number → values (varints as int, the rest as bytes)."""
    out: dict[int, list] = {}
    i = 0

    def varint() -> int:
        nonlocal i
        value = shift = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            value: Any = varint()
        elif wire == 2:
            size = varint()
            value, i = data[i:i + size], i + size
        else:
            raise ApiFailure(400, "BadRequest", f"unexpected protobuf wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def review_from_protobuf(raw: bytes) -> dict:
    """A SelfSubjectAccessReview sent as protobuf (the k8s\\0 envelope around runtime.Unknown;
    staging/src/k8s.io/api/authorization/v1/generated.proto), as its JSON form."""
    if not raw.startswith(b"k8s\x00"):
        raise ApiFailure(400, "BadRequest", "protobuf body without the k8s envelope")
    body = _fields(_fields(raw[4:])[2][0])           # Unknown.raw → the review
    spec = _fields(body.get(2, [b""])[0])
    attrs = _fields(spec.get(1, [b""])[0])           # ResourceAttributes
    names = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource",
             6: "subresource", 7: "name"}
    resource = {name: attrs[n][0].decode() for n, name in names.items() if n in attrs}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": None}, "spec": {"resourceAttributes": resource}}
