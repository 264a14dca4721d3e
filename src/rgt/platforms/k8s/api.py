"""The Kubernetes REST API, spoken with httpx (no `kubernetes` package at run time).

Paths and shapes are the documented ones (kubernetes.io/docs/reference/kubernetes-api/ and the
official Python client's generated `CoreV1Api` / `BatchV1Api` / `AuthorizationV1Api`): every
object is JSON, every failure a `Status` object whose `reason` and `message` rgt turns into
one line the user can act on.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx

from rgt.errors import UserError
from rgt.platforms.k8s.kubeconfig import Credentials

CORE = "/api/v1"
BATCH = "/apis/batch/v1"
STORAGE = "/apis/storage.k8s.io/v1"
AUTHZ = "/apis/authorization.k8s.io/v1"


class ApiError(UserError):
    """The API server refused a request: `code` is the HTTP status, `reason` the Status's."""

    def __init__(self, message: str, *, code: int, reason: str = "") -> None:
        super().__init__(message)
        self.code, self.reason = code, reason


class Kube:
    """One cluster, one user, one namespace (the context `rgt up` recorded)."""

    def __init__(self, creds: Credentials, *, timeout: float = 30) -> None:
        self.creds = creds
        self.namespace = creds.namespace
        extensions = {"sni_hostname": creds.tls_server_name} if creds.tls_server_name else {}
        self._extensions = extensions
        self.http = httpx.Client(base_url=creds.server, verify=creds.ssl_context,
                                 timeout=timeout, trust_env=False)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ the one request path

    def request(self, method: str, path: str, *, body: Any = None, params: dict | None = None,
                content: bytes | None = None, headers: dict | None = None,
                timeout: float | None = None, stream: bool = False) -> httpx.Response:
        all_headers = {"Accept": "application/json", **self.creds.auth_headers(),
                       **(headers or {})}
        if body is not None:
            content = json.dumps(body).encode()
            all_headers.setdefault("Content-Type", "application/json")
        request = self.http.build_request(method, path, params=params, content=content,
                                          headers=all_headers, extensions=self._extensions,
                                          timeout=timeout if timeout is not None
                                          else httpx.USE_CLIENT_DEFAULT)
        try:
            response = self.http.send(request, stream=stream)
        except httpx.TimeoutException:
            raise UserError(f"the Kubernetes API at {self.creds.server} (context "
                            f"{self.creds.context}) did not answer in time; is the cluster "
                            "reachable from here (VPN, firewall)?", exit_code=6) from None
        except httpx.TransportError as err:
            raise UserError(f"cannot reach the Kubernetes API at {self.creds.server} (context "
                            f"{self.creds.context}): {err}; check the cluster is up and "
                            "`kubectl get ns` works", exit_code=6) from None
        if response.status_code >= 400:
            if stream:
                response.read()
            raise self._error(response, method, path)
        return response

    def _error(self, response: httpx.Response, method: str, path: str) -> ApiError:
        try:
            status = response.json()
        except ValueError:
            status = {}
        message = str(status.get("message") or response.text[:300] or response.reason_phrase)
        reason = str(status.get("reason") or "")
        code = response.status_code
        where = f"context {self.creds.context}"
        if code == 401:
            text = (f"the API server refused our credentials ({where}, user "
                    f"{self.creds.user or '?'}): {message}; refresh them (`kubectl get ns` "
                    "re-runs a login plugin) and retry")
        elif code == 403:
            text = (f"forbidden: {message} ({where}); ask the cluster admin for a Role "
                    "granting it in this namespace (RBAC)")
        else:
            text = f"{method} {path.split('?')[0]}: {message} ({code} {reason})".strip()
        return ApiError(text, code=code, reason=reason)

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", path, params=params or None).json()

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, body=body,
                            params={"fieldValidation": "Strict"}).json()

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386): the fields given replace the object's."""
        return self.request("PATCH", path, body=body, params={"fieldValidation": "Strict"},
                            headers={"Content-Type": "application/merge-patch+json"}).json()

    def delete(self, path: str, *, propagation: str = "Background") -> bool:
        """True if it was there; a 404 is success (someone already deleted it)."""
        try:
            self.request("DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1",
                                               "propagationPolicy": propagation})
        except ApiError as err:
            if err.code == 404:
                return False
            raise
        return True

    def find(self, path: str) -> dict[str, Any] | None:
        """The object at `path`, or None when it does not exist."""
        try:
            return self.get(path)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    # ------------------------------------------------------------------ paths

    def ns(self, group: str, plural: str, name: str = "") -> str:
        base = f"{group}/namespaces/{quote(self.namespace, safe='')}/{plural}"
        return f"{base}/{quote(name, safe=':')}" if name else base

    def items(self, group: str, plural: str, *, labels: str | None = None,
              fields: str | None = None) -> list[dict[str, Any]]:
        params = {k: v for k, v in (("labelSelector", labels), ("fieldSelector", fields)) if v}
        return self.get(self.ns(group, plural), **params).get("items") or []

    # ------------------------------------------------------------------ what rgt asks

    def can_i(self, verb: str, resource: str, group: str = "",
              subresource: str = "") -> tuple[bool, str]:
        """SelfSubjectAccessReview: may this user do VERB on RESOURCE in the namespace?"""
        attrs = {"namespace": self.namespace, "verb": verb, "resource": resource,
                 "group": group}
        if subresource:
            attrs["subresource"] = subresource
        body = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "spec": {"resourceAttributes": attrs}}
        status = self.request("POST", f"{AUTHZ}/selfsubjectaccessreviews",
                              body=body).json().get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason") or "")

    def log(self, pod: str, *, tail_lines: int | None = None, previous: bool = False,
            limit_bytes: int | None = None) -> str:
        params: dict[str, Any] = {}
        if tail_lines is not None:
            params["tailLines"] = tail_lines
        if previous:
            params["previous"] = "true"
        if limit_bytes:
            params["limitBytes"] = limit_bytes
        response = self.request("GET", self.ns(CORE, "pods", pod) + "/log",
                                params=params or None, headers={"Accept": "*/*"})
        return response.text

    def proxy_path(self, pod: str, port: int, path: str) -> str:
        """The API server's pod proxy: HTTP to a pod's port through the API server itself."""
        return self.ns(CORE, "pods", f"{pod}:{port}") + "/proxy/" + path.lstrip("/")
