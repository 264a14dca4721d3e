"""The user's kubeconfig, read the way kubectl reads it.

* Files: `$KUBECONFIG` (a list joined by the OS path separator; the first file to define a
  context, cluster or user wins, and the first `current-context` wins), else ~/.kube/config.
* A context names a cluster, a user and a namespace; `--context` picks one, else the
  current-context.
* A user authenticates with a bearer `token`, a `tokenFile`, a client certificate and key
  (files or `-data`), a username/password, or an `exec` plugin that prints an ExecCredential
  (client.authentication.k8s.io/v1 or v1beta1) — how EKS, GKE and AKS log in.
* Relative file paths are relative to the kubeconfig file that names them.

Secrets read here (tokens, keys) stay in memory or in a private temp file the TLS library
loads and that is deleted at once; they never reach argv or a log.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from rgt.errors import UserError

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_TIMEOUT_S = 60


def kubeconfig_paths(explicit: str | None = None) -> list[Path]:
    """The files kubectl would read: --kubeconfig, else $KUBECONFIG's list, else ~/.kube/config."""
    if explicit:
        return [Path(explicit).expanduser()]
    env = os.environ.get("KUBECONFIG", "")
    if env.strip():
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]
    return [Path.home() / ".kube" / "config"]


@dataclass
class Named:
    """One entry of `contexts`, `clusters` or `users`, with the file it came from."""

    data: dict[str, Any]
    source: Path


@dataclass
class KubeConfig:
    """The merged kubeconfig."""

    contexts: dict[str, Named] = field(default_factory=dict)
    clusters: dict[str, Named] = field(default_factory=dict)
    users: dict[str, Named] = field(default_factory=dict)
    current: str | None = None
    files: list[Path] = field(default_factory=list)


def load_kubeconfig(explicit: str | None = None) -> KubeConfig:
    paths = kubeconfig_paths(explicit)
    config = KubeConfig(files=paths)
    found = False
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            if explicit:
                raise UserError(f"kubeconfig {path} does not exist; pass the file kubectl "
                                "uses (--kubeconfig) or unset it") from None
            continue
        except OSError as err:
            raise UserError(f"cannot read kubeconfig {path}: {err}") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as err:
            raise UserError(f"kubeconfig {path} is not valid YAML: {err}") from None
        if not isinstance(data, dict):
            raise UserError(f"kubeconfig {path} is not a kubeconfig (expected a mapping)")
        found = True
        for key, into in (("contexts", config.contexts), ("clusters", config.clusters),
                          ("users", config.users)):
            for entry in data.get(key) or []:
                name = entry.get("name") if isinstance(entry, dict) else None
                body = entry.get(key[:-1]) if isinstance(entry, dict) else None
                if name and isinstance(body, dict) and name not in into:
                    into[name] = Named(body, path)
        if not config.current and data.get("current-context"):
            config.current = str(data["current-context"])
    if not found:
        where = " or ".join(str(p) for p in paths)
        raise UserError(f"no kubeconfig found ({where}): rgt uses your kubectl setup; get one "
                        "from your cluster (`gcloud container clusters get-credentials`, `aws "
                        "eks update-kubeconfig`, `az aks get-credentials`) or pass --kubeconfig")
    return config


@dataclass
class Credentials:
    """Everything needed to call one cluster as one user."""

    context: str
    server: str
    namespace: str
    user: str
    ssl_context: ssl.SSLContext | bool
    headers: dict[str, str]
    tls_server_name: str | None = None
    exec_plugin: dict[str, Any] | None = None
    exec_cluster: dict[str, Any] | None = None
    expires: float | None = None

    def auth_headers(self) -> dict[str, str]:
        """The bearer token header, refreshed from the exec plugin once it expires."""
        if self.exec_plugin is not None and self.expires is not None and \
                time.time() > self.expires - 30:
            token, _, self.expires = run_exec_plugin(self.exec_plugin, self.user,
                                                     self.exec_cluster)
            if token:
                self.headers["Authorization"] = f"Bearer {token}"
        return self.headers


def resolve(config: KubeConfig, context: str | None = None,
            namespace: str | None = None) -> Credentials:
    """The credentials for `context` (default: the current-context)."""
    name = context or config.current
    if not name:
        raise UserError("the kubeconfig sets no current-context; pass --context (one of "
                        f"{', '.join(sorted(config.contexts)) or 'none defined'})")
    if name not in config.contexts:
        known = ", ".join(sorted(config.contexts)) or "none"
        raise UserError(f"context {name!r} is not in your kubeconfig (contexts: {known}); "
                        "`kubectl config get-contexts` lists them")
    ctx = config.contexts[name].data
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if cluster_name not in config.clusters:
        raise UserError(f"context {name!r} names cluster {cluster_name!r}, which the "
                        "kubeconfig does not define")
    cluster = config.clusters[cluster_name]
    server = str(cluster.data.get("server") or "").rstrip("/")
    if not server.startswith(("https://", "http://")):
        raise UserError(f"cluster {cluster_name!r} has no usable server URL ({server!r})")
    user = config.users.get(user_name) if user_name else None
    if user_name and user is None:
        raise UserError(f"context {name!r} names user {user_name!r}, which the kubeconfig "
                        "does not define")
    creds = Credentials(context=name, server=server,
                        namespace=namespace or ctx.get("namespace") or "default",
                        user=user_name or "", ssl_context=True, headers={},
                        tls_server_name=cluster.data.get("tls-server-name"))
    creds.ssl_context = _tls(cluster, user)
    if user is not None:
        _authenticate(creds, user, cluster)
    return creds


def _file_or_data(entry: Named, key: str) -> bytes | None:
    data = entry.data.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except ValueError:
            raise UserError(f"kubeconfig {entry.source}: {key}-data is not base64") from None
    path = entry.data.get(key)
    if not path:
        return None
    full = Path(path).expanduser()
    if not full.is_absolute():
        full = entry.source.parent / full
    try:
        return full.read_bytes()
    except OSError as err:
        raise UserError(f"kubeconfig {entry.source}: cannot read {key} {full}: "
                        f"{err.strerror or err}") from None


def _tls(cluster: Named, user: Named | None) -> ssl.SSLContext | bool:
    if not cluster.data.get("server", "").startswith("https://"):
        return True
    if cluster.data.get("insecure-skip-tls-verify"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        ca = _file_or_data(cluster, "certificate-authority")
        context = ssl.create_default_context(cadata=ca.decode("ascii", "replace") if ca
                                             else None)
    if user is not None:
        cert = _file_or_data(user, "client-certificate")
        key = _file_or_data(user, "client-key")
        if cert and key:
            load_client_pair(context, cert, key)
    return context


def load_client_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """The TLS library loads a client pair only from files: a private temp dir, gone at once."""
    with tempfile.TemporaryDirectory(prefix="rgt-kube-") as tmp:
        cert_path, key_path = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as err:
            raise UserError(f"the kubeconfig's client certificate and key do not load: "
                            f"{err}") from None


def _authenticate(creds: Credentials, user: Named, cluster: Named) -> None:
    data = user.data
    if data.get("auth-provider"):
        provider = (data["auth-provider"] or {}).get("name", "?")
        raise UserError(f"user {creds.user!r} logs in with the removed auth-provider "
                        f"{provider!r}; switch to its exec plugin (e.g. gke-gcloud-auth-plugin, "
                        "kubelogin) as kubectl >= 1.26 requires")
    token = data.get("token")
    if not token and data.get("tokenFile"):
        raw = _file_or_data(Named({"token-file": data["tokenFile"]}, user.source), "token-file")
        token = (raw or b"").decode().strip()
    if token:
        creds.headers["Authorization"] = f"Bearer {token}"
    elif data.get("username") and data.get("password") is not None:
        pair = f"{data['username']}:{data['password']}".encode()
        creds.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    elif isinstance(data.get("exec"), dict):
        plugin = {**data["exec"], "_source": str(user.source)}
        info = None
        if plugin.get("provideClusterInfo"):
            info = {"server": cluster.data.get("server"),
                    "insecure-skip-tls-verify": bool(cluster.data.get("insecure-skip-tls-verify"))}
            ca = _file_or_data(cluster, "certificate-authority")
            if ca:
                info["certificate-authority-data"] = base64.b64encode(ca).decode()
        token, pair, expires = run_exec_plugin(plugin, creds.user, info)
        if token:
            creds.headers["Authorization"] = f"Bearer {token}"
        if pair and isinstance(creds.ssl_context, ssl.SSLContext):
            load_client_pair(creds.ssl_context, *pair)
        creds.exec_plugin, creds.exec_cluster, creds.expires = plugin, info, expires


def run_exec_plugin(plugin: dict[str, Any], user: str, cluster: dict[str, Any] | None
                    ) -> tuple[str | None, tuple[bytes, bytes] | None, float | None]:
    """Run a client-go credential plugin; return (token, (cert, key), expiry)."""
    version = plugin.get("apiVersion") or ""
    if version not in EXEC_API_VERSIONS:
        raise UserError(f"user {user!r}: exec plugin apiVersion {version!r} is not supported "
                        f"(rgt speaks {', '.join(EXEC_API_VERSIONS)})")
    if plugin.get("interactiveMode") == "Always":
        raise UserError(f"user {user!r}: the exec plugin needs an interactive terminal "
                        "(interactiveMode: Always); log in with kubectl once, then retry")
    command = str(plugin.get("command") or "")
    if not command:
        raise UserError(f"user {user!r}: exec plugin has no command")
    if "/" in command and not os.path.isabs(command):  # relative to the kubeconfig's folder
        command = str(Path(plugin["_source"]).parent / command)
    spec: dict[str, Any] = {"interactive": False}
    if cluster is not None:
        spec["cluster"] = cluster
    env = {**os.environ,
           **{e["name"]: str(e.get("value", "")) for e in plugin.get("env") or []
              if isinstance(e, dict) and e.get("name")},
           "KUBERNETES_EXEC_INFO": json.dumps({"apiVersion": version,
                                               "kind": "ExecCredential", "spec": spec})}
    try:
        done = subprocess.run([command, *map(str, plugin.get("args") or [])], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=EXEC_TIMEOUT_S, check=False)
    except FileNotFoundError:
        hint = plugin.get("installHint") or "install it, or fix the kubeconfig's exec.command"
        raise UserError(f"user {user!r}: exec plugin {command!r} is not installed: "
                        f"{str(hint).strip()}") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"user {user!r}: exec plugin {command!r} did not answer within "
                        f"{EXEC_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise UserError(f"user {user!r}: exec plugin {command!r} failed (exit "
                        f"{done.returncode}): {tail[0]}")
    try:
        status = json.loads(done.stdout)["status"]
    except (ValueError, KeyError, TypeError):
        raise UserError(f"user {user!r}: exec plugin {command!r} printed no ExecCredential "
                        "status") from None
    pair = None
    if status.get("clientCertificateData") and status.get("clientKeyData"):
        pair = (status["clientCertificateData"].encode(), status["clientKeyData"].encode())
    token = status.get("token")
    if not token and pair is None:
        raise UserError(f"user {user!r}: exec plugin {command!r} returned neither a token nor "
                        "a client certificate")
    expires = None
    if status.get("expirationTimestamp"):
        try:
            expires = datetime.fromisoformat(
                str(status["expirationTimestamp"]).replace("Z", "+00:00")).timestamp()
        except ValueError:
            expires = None
    return token, pair, expires
