"""A fake Kubernetes API server on 127.0.0.1 that speaks the real REST paths and JSON shapes
for what rgt uses: jobs, pods (log, proxy, eviction), persistentvolumeclaims, events,
namespaces, nodes, storageclasses, selfsubjectaccessreviews, and the discovery documents
kubectl reads first. It is checked by talking to it with the official `kubernetes` Python
client and with `kubectl`, unmodified (tests/kubernetes/test_k8s_fake_clients.py).

Sources for paths and shapes: kubernetes.io/docs/reference/kubernetes-api/ and the official
client's generated code (kubernetes-client/python: CoreV1Api, BatchV1Api,
AuthorizationV1Api); failure bodies are `Status` objects with the reasons the API server uses
(Unauthorized 401, Forbidden 403 with the RBAC sentence, NotFound 404, AlreadyExists 409,
Invalid 422). It rejects what the real API rejects for these objects: every create is
validated against the official 1.32 schema (kubernetes-validate, strict: unknown fields
refused), plus the semantic rules a schema cannot say (a Job's restartPolicy, GPU requests
equal to limits, Indexed Jobs need completions, podFailurePolicy needs restartPolicy Never,
names are RFC 1123, a Service has ports unless it is headless).

The cluster behind it (scheduler, Job controller, kubelet running pods as real local
processes) lives in kube_cluster.py.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate

SCHEMA_VERSION = "1.32.0"
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# plural → (group path, kind, namespaced, api group)
RESOURCES = {
    "pods": ("/api/v1", "Pod", True, ""),
    "persistentvolumeclaims": ("/api/v1", "PersistentVolumeClaim", True, ""),
    "events": ("/api/v1", "Event", True, ""),
    "services": ("/api/v1", "Service", True, ""),
    "secrets": ("/api/v1", "Secret", True, ""),
    "namespaces": ("/api/v1", "Namespace", False, ""),
    "nodes": ("/api/v1", "Node", False, ""),
    "jobs": ("/apis/batch/v1", "Job", True, "batch"),
    "storageclasses": ("/apis/storage.k8s.io/v1", "StorageClass", False, "storage.k8s.io"),
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def now_iso(at: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at or time.time()))


def status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


class ApiFailure(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.body = status(code, reason, message, details)
        self.code = code


def kind_ref(plural: str) -> str:
    group = RESOURCES[plural][3]
    return f"{plural}.{group}" if group else plural


def match_labels(obj: dict, selector: str | None) -> bool:
    if not selector:
        return True
    have = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if have.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if have.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in have:
                return False
        elif term not in have:
            return False
    return True


def field_value(obj: dict, path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def match_fields(obj: dict, selector: str | None) -> bool:
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        negate = "!=" in term
        key, value = re.split(r"!=|==|=", term, maxsplit=1)
        same = str(field_value(obj, key.strip()) or "") == value.strip()
        if same == negate:
            return False
    return True


class FakeKubeApi:
    """The object store and the HTTP front; `cluster` (kube_cluster.Cluster) acts on it."""

    def __init__(self, *, tokens: dict[str, str] | None = None,
                 namespaces: tuple[str, ...] = ("default",)) -> None:
        self.tokens = tokens or {"rgt-test-token": "alice"}
        self.forbidden: set[tuple[str, str, str]] = set()  # (user, verb, resource[/sub])
        self.objects: dict[tuple[str, str, str], dict] = {}  # (plural, ns, name) → object
        self.lock = threading.RLock()
        self.version = 1000
        self.requests: list[tuple[str, str]] = []
        self.cluster: Any = None
        self.server: ThreadingHTTPServer | None = None
        self.scheme = "http"
        self.cut_proxy_after: list[int] = []  # the next proxied /file answers stop after N bytes
        # API groups served besides the built-in ones, for discovery only (a cluster with JobSet
        # or the training operator installed): group → (version, {plural: kind})
        self.extra_groups: dict[str, tuple[str, dict[str, str]]] = {}
        for ns in namespaces:
            self.put("namespaces", "", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": ns},
                                        "status": {"phase": "Active"}})

    # ------------------------------------------------------------------ the store

    def stamp(self, obj: dict, plural: str, namespace: str) -> dict:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_iso())
        if RESOURCES[plural][2]:
            meta["namespace"] = namespace
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        obj["apiVersion"] = obj.get("apiVersion") or RESOURCES[plural][0].split("/", 2)[-1]
        obj["kind"] = RESOURCES[plural][1]
        return obj

    def put(self, plural: str, namespace: str, obj: dict) -> dict:
        with self.lock:
            self.stamp(obj, plural, namespace)
            self.objects[(plural, namespace, obj["metadata"]["name"])] = obj
            return obj

    def get(self, plural: str, namespace: str, name: str) -> dict | None:
        with self.lock:
            return self.objects.get((plural, namespace, name))

    def list(self, plural: str, namespace: str | None = None, labels: str | None = None,
             fields: str | None = None) -> list[dict]:
        with self.lock:
            return [o for (p, ns, _), o in sorted(self.objects.items(),
                                                  key=lambda kv: kv[1]["metadata"]
                                                  ["resourceVersion"])
                    if p == plural and (namespace is None or ns == namespace)
                    and match_labels(o, labels) and match_fields(o, fields)]

    def remove(self, plural: str, namespace: str, name: str) -> dict | None:
        with self.lock:
            return self.objects.pop((plural, namespace, name), None)

    def touch(self, obj: dict) -> None:
        with self.lock:
            self.version += 1
            obj["metadata"]["resourceVersion"] = str(self.version)

    def event(self, obj: dict, reason: str, message: str, kind: str = "Normal",
              component: str = "kubelet") -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        with self.lock:
            same = [e for e in self.list("events", ns) if e["reason"] == reason and
                    e["message"] == message and e["involvedObject"]["uid"] == meta["uid"]]
            if same:
                same[0]["count"] += 1
                same[0]["lastTimestamp"] = now_iso()
                self.touch(same[0])
                return
            self.put("events", ns, {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}"},
                "involvedObject": {"kind": obj["kind"], "namespace": ns, "name": meta["name"],
                                   "uid": meta["uid"], "apiVersion": obj["apiVersion"]},
                "reason": reason, "message": message, "type": kind, "count": 1,
                "source": {"component": component}, "reportingComponent": component,
                "firstTimestamp": now_iso(), "lastTimestamp": now_iso()})

    # ------------------------------------------------------------------ authn / authz

    def user_of(self, headers: dict[str, str], peer: dict | None = None) -> str:
        auth = headers.get("authorization", "")
        if auth.startswith("Bearer ") and auth[7:] in self.tokens:
            return self.tokens[auth[7:]]
        for rdn in (peer or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName" and not auth:
                    return value
        raise ApiFailure(401, "Unauthorized", "Unauthorized")

    def allowed(self, user: str, verb: str, resource: str) -> bool:
        return (user, verb, resource) not in self.forbidden and \
            (user, "*", resource) not in self.forbidden

    def authorize(self, user: str, verb: str, plural: str, sub: str, namespace: str,
                  name: str = "") -> None:
        resource = f"{plural}/{sub}" if sub else plural
        if self.allowed(user, verb, resource):
            return
        what = f'{kind_ref(plural)} "{name}"' if name else kind_ref(plural)
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        sub_text = f'resource "{plural}/{sub}"' if sub else f'resource "{plural}"'
        raise ApiFailure(403, "Forbidden",
                         f'{what} is forbidden: User "{user}" cannot {verb} {sub_text} in API '
                         f'group "{RESOURCES[plural][3]}"{where}',
                         {"name": name, "kind": plural} if name else {"kind": plural})

    # ------------------------------------------------------------------ validation

    def validate(self, plural: str, obj: dict, strict: bool) -> None:
        kind = RESOURCES[plural][1]
        name = (obj.get("metadata") or {}).get("name") or ""
        label = f'{kind}{"." + RESOURCES[plural][3] if RESOURCES[plural][3] else ""} "{name}"'
        try:
            kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=strict)
        except kubernetes_validate.ValidationError as err:
            path = ".".join(str(p) for p in err.path)
            if "Additional properties" in err.message:
                raise ApiFailure(400, "BadRequest", f"strict decoding error: {err.message} "
                                 f"(at {path or 'the top level'})") from None
            raise ApiFailure(422, "Invalid", f"{label} is invalid: {path}: {err.message}",
                             {"name": name, "kind": plural}) from None
        problems = []
        if not DNS1123.match(name) or len(name) > 253:
            problems.append(f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 '
                            "subdomain must consist of lower case alphanumeric characters, "
                            "'-' or '.', and must start and end with an alphanumeric character")
        if plural == "jobs":
            problems += job_problems(obj)
        if plural == "pods":
            problems += pod_problems(obj.get("spec") or {}, "spec")
        if plural == "secrets":
            problems += secret_problems(obj)
        if plural == "services":
            problems += service_problems(obj.get("spec") or {})
        if problems:
            raise ApiFailure(422, "Invalid", f"{label} is invalid: " + ", ".join(problems),
                             {"name": name, "kind": plural})

    # ------------------------------------------------------------------ HTTP

    def start(self, tls: tuple[Path, Path] | None = None) -> FakeKubeApi:
        """Serve on 127.0.0.1; with `tls` (cert file, key file) over HTTPS, as every real API
        server does (kubectl sends no bearer token over plain HTTP)."""
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _go(self) -> None:
                api.dispatch(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _go  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            # client certificates signed by the cluster CA authenticate as their CN
            context.load_verify_locations(Path(tls[0]).with_name("ca.crt"))
            context.verify_mode = ssl.CERT_OPTIONAL
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    def dispatch(self, h: BaseHTTPRequestHandler) -> None:
        split = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        headers = {k.lower(): v for k, v in h.headers.items()}
        length = int(headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        self.requests.append((h.command, split.path))
        peer = h.connection.getpeercert() if hasattr(h.connection, "getpeercert") else None
        headers["x-fake-peer"] = peer  # type: ignore[assignment]
        try:
            from kube_routes import route  # the paths, kept apart to keep this file readable

            answer = route(self, h, h.command, split.path, query, headers, raw)
        except ApiFailure as err:
            answer = (err.code, err.body)
        if answer is None:  # the route streamed its own answer
            return
        code, body = answer[0], answer[1]
        ctype = answer[2] if len(answer) > 2 else "application/json"
        data = body if isinstance(body, bytes) else json.dumps(public(body)).encode()
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def public(value: Any) -> Any:
    """The object as the API shows it: the fake's own bookkeeping (keys starting with _) out."""
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [public(v) for v in value]
    return value


# ---------------------------------------------------------------------- semantic rules


def job_problems(job: dict) -> list[str]:
    spec = job.get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    problems = []
    policy = template.get("restartPolicy", "Always")
    if policy not in ("OnFailure", "Never"):
        problems.append(f'spec.template.spec.restartPolicy: Unsupported value: "{policy}": '
                        'supported values: "OnFailure", "Never"')
    if spec.get("podFailurePolicy") and policy != "Never":
        problems.append(f'spec.template.spec.restartPolicy: Invalid value: "{policy}": only '
                        '"Never" is supported when podFailurePolicy is specified')
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        problems.append("spec.completions: Required value: when completion mode is Indexed")
    return problems + pod_problems(template, "spec.template.spec")


def service_problems(spec: dict) -> list[str]:
    """ValidateService's rule for ports: only a headless Service (clusterIP: None) or an
    ExternalName one may have none."""
    if not spec.get("ports") and spec.get("clusterIP") != "None" and \
            spec.get("type") != "ExternalName":
        return ["spec.ports: Required value"]
    return []


SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def secret_problems(secret: dict) -> list[str]:
    """What the API server refuses in a Secret beyond its schema: keys must be
    [-._a-zA-Z0-9]+ (and unique across data and stringData), and `data` values base64."""
    problems = []
    data, text = secret.get("data") or {}, secret.get("stringData") or {}
    for key in [*data, *text]:
        if not SECRET_KEY.match(key) or len(key) > 253:
            problems.append(f'data[{key}]: Invalid value: "{key}": a valid config key must '
                            "consist of alphanumeric characters, '-', '_' or '.'")
    for key, value in data.items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise ApiFailure(400, "BadRequest", f"Secret in version \"v1\" cannot be handled "
                             f"as a Secret: illegal base64 data in data[{key}]") from None
    return problems


def pod_problems(pod: dict, where: str) -> list[str]:
    problems = []
    for i, c in enumerate(pod.get("containers") or []):
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        for key in set(limits) | set(requests):
            if "/" not in key or key.startswith(("kubernetes.io/", "hugepages-")):
                continue  # only extended resources (nvidia.com/gpu) must match
            if key in requests and key not in limits:
                problems.append(f"{where}.containers[{i}].resources.limits: Required value: "
                                f"Limit must be set for non overcommitable resources")
            elif key in requests and str(requests[key]) != str(limits[key]):
                problems.append(f"{where}.containers[{i}].resources.requests: Invalid value: "
                                f'"{requests[key]}": must be equal to {key} limit of '
                                f"{limits[key]}")
    return problems
