"""rgt reads the user's kubeconfig the way kubectl does, and each way of logging in works
against the fake API server (TLS, CA from the kubeconfig): a token, a token file, a client
certificate, an exec credential plugin (client.authentication.k8s.io/v1 and v1beta1); several
files merge through KUBECONFIG, the first to define a name winning."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from kubekit import TOKEN, write_kubeconfig

from rgt.errors import UserError
from rgt.platforms.k8s.api import Kube
from rgt.platforms.k8s.kubeconfig import load_kubeconfig, resolve


def ca_of(kube) -> bytes:
    data = yaml.safe_load(Path(kube.kubeconfig).read_text())
    return base64.b64decode(data["clusters"][0]["cluster"]["certificate-authority-data"])


def whoami(creds) -> bool:
    """Any authenticated call: a SelfSubjectAccessReview the fake answers."""
    with Kube(creds) as kube:
        return kube.can_i("create", "jobs", "batch")[0]


def plugin(tmp_path: Path, version: str, body: str) -> Path:
    script = tmp_path / "login-plugin"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_token_token_file_and_client_certificate(kube, tmp_path):
    creds = resolve(load_kubeconfig())
    assert (creds.context, creds.namespace, creds.user) == ("fake", "ml", "alice")
    assert whoami(creds)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token").write_text(TOKEN + "\n")
    by_file = write_kubeconfig(tmp_path / "by-file", kube.api.url, ca=ca_of(kube),
                               user={"tokenFile": "secrets/token"})  # relative to the file
    assert whoami(resolve(load_kubeconfig(str(by_file))))
    tls = kube.kubeconfig.parent / "tls"
    by_cert = write_kubeconfig(tmp_path / "by-cert", kube.api.url, ca=ca_of(kube), user={
        "client-certificate-data": base64.b64encode((tls / "bob.crt").read_bytes()).decode(),
        "client-key": str(tls / "bob.key")})
    kube.api.forbidden.add(("bob", "create", "jobs"))
    assert whoami(resolve(load_kubeconfig(str(by_cert)))) is False  # bob, by his certificate


@pytest.mark.parametrize("version", ["client.authentication.k8s.io/v1",
                                     "client.authentication.k8s.io/v1beta1"])
def test_exec_plugin(kube, tmp_path, version):
    seen = tmp_path / "exec-info.json"
    script = plugin(tmp_path, version, f"""printf '%s' "$KUBERNETES_EXEC_INFO" > {seen}
printf '{{"apiVersion": "{version}", "kind": "ExecCredential", "status": {{"token": "%s",
 "expirationTimestamp": "2099-01-01T00:00:00Z"}}}}' "$FAKE_TOKEN"
""")
    config = write_kubeconfig(tmp_path / "exec", kube.api.url, ca=ca_of(kube), user={"exec": {
        "apiVersion": version, "command": str(script), "args": ["get-token"],
        "env": [{"name": "FAKE_TOKEN", "value": TOKEN}], "interactiveMode": "Never",
        "provideClusterInfo": True}})
    creds = resolve(load_kubeconfig(str(config)))
    assert whoami(creds)
    info = json.loads(seen.read_text())
    assert info["apiVersion"] == version and info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == kube.api.url
    assert TOKEN not in " ".join(os.environ.values())  # it came from the plugin, not us


def test_exec_plugin_problems_are_one_line(kube, tmp_path):
    missing = write_kubeconfig(tmp_path / "missing", kube.api.url, user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "rgt-test-no-such-auth-plugin",
        "interactiveMode": "IfAvailable",
        "installHint": "Install it: gcloud components install gke-gcloud-auth-plugin"}})
    with pytest.raises(UserError, match="is not installed: Install it: gcloud components"):
        resolve(load_kubeconfig(str(missing)))
    failing = plugin(tmp_path, "", "echo 'token expired, run login' >&2; exit 1\n")
    broken = write_kubeconfig(tmp_path / "broken", kube.api.url, user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": str(failing),
        "interactiveMode": "Never"}})
    with pytest.raises(UserError, match="failed \\(exit 1\\): token expired, run login"):
        resolve(load_kubeconfig(str(broken)))
    legacy = write_kubeconfig(tmp_path / "legacy", kube.api.url,
                              user={"auth-provider": {"name": "gcp"}})
    with pytest.raises(UserError, match="removed auth-provider 'gcp'"):
        resolve(load_kubeconfig(str(legacy)))


def test_kubeconfig_files_merge_first_wins(kube, tmp_path, monkeypatch):
    first = write_kubeconfig(tmp_path / "a", kube.api.url, namespace="ml", ca=ca_of(kube))
    second = write_kubeconfig(tmp_path / "b", "https://elsewhere.invalid", namespace="other",
                              context="fake")
    extra = yaml.safe_load(second.read_text())
    extra["contexts"].append({"name": "staging", "context": {"cluster": "fake-cluster",
                                                             "user": "alice"}})
    extra["current-context"] = "staging"
    second.write_text(yaml.safe_dump(extra))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    config = load_kubeconfig()
    assert config.current == "fake" and set(config.contexts) == {"fake", "staging"}
    creds = resolve(config)
    assert creds.server == kube.api.url and creds.namespace == "ml"
    assert resolve(config, "staging").namespace == "default"  # no namespace: "default"
    assert resolve(config, "staging", "team").namespace == "team"  # --namespace wins
    with pytest.raises(UserError, match="context 'nope' is not in your kubeconfig"):
        resolve(config, "nope")
