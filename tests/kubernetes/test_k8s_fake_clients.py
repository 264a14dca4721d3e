"""The fake API server is checked by the clients people really use, unmodified: the official
`kubernetes` Python client and `kubectl` (v1.32 here; Debian's 1.20 in CI works the same way).
If the fake's paths or shapes drift from the real API, these fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import kubernetes
import pytest
from kubekit import IMAGE
from kubernetes.client.rest import ApiException

from rgt.platforms.k8s.manifests import job_manifest, pvc_manifest


def wait_for(predicate, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def small_job(name: str, command: str, **more) -> dict:
    return job_manifest(name=name, box="b", run_id=name, image=IMAGE, script=command,
                        env={"GREETING": "hello"}, claim="rgt-b", mount_path="/tmp/rgt-k8s-ckpt",
                        **more)


@pytest.fixture
def client(kube):
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kube.kubeconfig),
                                       client_configuration=config)
    api = kubernetes.client.ApiClient(config)
    yield api
    api.close()


def test_official_client_runs_a_job_through_the_fake(kube, client):
    core, batch = kubernetes.client.CoreV1Api(client), kubernetes.client.BatchV1Api(client)
    authz = kubernetes.client.AuthorizationV1Api(client)
    core.create_namespaced_persistent_volume_claim("ml", pvc_manifest("rgt-b", "b", "1G"))
    wait_for(lambda: core.read_namespaced_persistent_volume_claim("rgt-b", "ml").status.phase
             == "Bound")
    batch.create_namespaced_job("ml", small_job("hello", 'echo "$GREETING from $RGT_POD_NAME"'
                                                "; ls /tmp/rgt-k8s-ckpt"))
    job = wait_for(lambda: (lambda j: j if j.status.succeeded else None)(
        batch.read_namespaced_job("hello", "ml")))
    assert any(c.type == "Complete" for c in job.status.conditions)
    pods = core.list_namespaced_pod("ml", label_selector="job-name=hello").items
    assert len(pods) == 1 and pods[0].status.phase == "Succeeded"
    assert pods[0].status.container_statuses[0].state.terminated.exit_code == 0
    # raw: client 36 returns a str log as the repr of its bytes (its own deserializer skips
    # decoding for "str"), whatever the server sends
    log = core.read_namespaced_pod_log(pods[0].metadata.name, "ml",
                                       _preload_content=False).data.decode()
    assert log.startswith(f"hello from {pods[0].metadata.name}")
    events = core.list_namespaced_event(
        "ml", field_selector=f"involvedObject.name={pods[0].metadata.name}").items
    assert {"Scheduled", "Started"} <= {e.reason for e in events}
    review = authz.create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"namespace": "ml", "verb": "create",
                                         "resource": "jobs", "group": "batch"}}})
    assert review.status.allowed is True
    nodes = core.list_node().items
    assert [n.status.allocatable["nvidia.com/gpu"] for n in nodes] == ["1", "1"]
    batch.delete_namespaced_job("hello", "ml", propagation_policy="Background")
    with pytest.raises(ApiException) as gone:
        batch.read_namespaced_job("hello", "ml")
    assert gone.value.status == 404
    wait_for(lambda: not core.list_namespaced_pod("ml", label_selector="job-name=hello").items)


def test_official_client_sees_the_fake_refuse_what_the_api_refuses(kube, client):
    batch = kubernetes.client.BatchV1Api(client)
    bad = small_job("always", "true")
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    del bad["spec"]["podFailurePolicy"]
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_job("ml", bad)
    assert refused.value.status == 422
    assert 'restartPolicy: Unsupported value: "Always": supported values: "OnFailure", ' \
           '"Never"' in json.loads(refused.value.body)["message"]
    gpu = small_job("gpu", "true", gpus=1)
    gpu["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "nvidia.com/gpu"] = "2"
    with pytest.raises(ApiException) as unequal:
        batch.create_namespaced_job("ml", gpu)
    assert "must be equal to nvidia.com/gpu limit of 1" in json.loads(unequal.value.body)[
        "message"]
    unknown = small_job("typo", "true")
    unknown["spec"]["backofLimit"] = 3
    with pytest.raises(ApiException) as strict:
        batch.create_namespaced_job("ml", unknown, field_validation="Strict")
    assert strict.value.status == 400
    with pytest.raises(ApiException) as missing:
        batch.create_namespaced_job("nowhere", small_job("x", "true"))
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["message"] == 'namespaces "nowhere" not found'
    kube.api.forbidden.add(("alice", "create", "jobs"))
    with pytest.raises(ApiException) as forbidden:
        batch.create_namespaced_job("ml", small_job("y", "true"))
    assert forbidden.value.status == 403
    assert 'User "alice" cannot create resource "jobs" in API group "batch" in the namespace ' \
           '"ml"' in json.loads(forbidden.value.body)["message"]


def kubectl(kube, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    # RGT_TEST_KUBECTL picks another build (e.g. Debian bookworm's 1.20 beside a newer one)
    binary = os.environ.get("RGT_TEST_KUBECTL") or shutil.which("kubectl")
    assert binary, "kubectl is missing: scripts/test installs Debian's kubernetes-client"
    done = subprocess.run([binary, "--kubeconfig", str(kube.kubeconfig), *args],
                          capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_kubectl_talks_to_the_fake(kube, tmp_path):
    (tmp_path / "pvc.json").write_text(json.dumps(pvc_manifest("rgt-b", "b", "1G")))
    (tmp_path / "job.json").write_text(json.dumps(small_job("kubectl-job",
                                                            'echo "$GREETING via kubectl"')))
    kubectl(kube, "create", "--validate=false", "-f", str(tmp_path / "pvc.json"))
    kubectl(kube, "create", "--validate=false", "-f", str(tmp_path / "job.json"))
    assert kubectl(kube, "auth", "can-i", "create", "jobs").stdout.strip() == "yes"
    kube.api.forbidden.add(("alice", "get", "pods/log"))
    assert kubectl(kube, "auth", "can-i", "get", "pods", "--subresource=log",
                   check=False).stdout.strip() == "no"
    kube.api.forbidden.clear()
    wait_for(lambda: kubectl(kube, "get", "job", "kubectl-job", "-o",
                                    "jsonpath={.status.succeeded}").stdout.strip() == "1")
    pods = json.loads(kubectl(kube, "get", "pods", "-l", "job-name=kubectl-job",
                              "-o", "json").stdout)["items"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]
    name = pods[0]["metadata"]["name"]
    assert kubectl(kube, "logs", name).stdout == "hello via kubectl\n"
    nodes = kubectl(kube, "get", "nodes", "-o",
                    "jsonpath={.items[*].status.allocatable.nvidia\\.com/gpu}").stdout
    assert nodes.split() == ["1", "1"]
    kubectl(kube, "delete", "job", "kubectl-job", "--wait=false")
    assert "NotFound" in kubectl(kube, "get", "job", "kubectl-job", check=False).stderr


def _pod(name: str, command: str, *, env=None, volumes=None, mounts=None) -> dict:
    container = {"name": "c", "image": IMAGE, "command": ["sh", "-c", command],
                 "env": env or [], "volumeMounts": mounts or []}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [container],
                     "volumes": volumes or []}}


def _log(core, pod: str) -> str:
    return core.read_namespaced_pod_log(pod, "ml", _preload_content=False).data.decode()


def test_secrets_as_the_api_server_and_kubelet_handle_them(kube, client):
    """Create, get, 409 on a second create, refused bad data; a pod naming a Secret that is
    not there waits in CreateContainerConfigError and starts once it exists; secretKeyRef and
    a secret volume both hand the value to the container; delete, then 404."""
    core = kubernetes.client.CoreV1Api(client)
    made = core.create_namespaced_secret("ml", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tok"},
        "stringData": {"token": "s3cret"}, "data": {"other": "b3RoZXI="}})
    assert made.data == {"token": "czNjcmV0", "other": "b3RoZXI="} and made.string_data is None
    assert core.read_namespaced_secret("tok", "ml").type == "Opaque"
    with pytest.raises(ApiException) as twice:
        core.create_namespaced_secret("ml", {"apiVersion": "v1", "kind": "Secret",
                                             "metadata": {"name": "tok"}, "data": {}})
    assert twice.value.status == 409 and "already exists" in twice.value.body
    for data, status in (({"t": "not base64!"}, 400), ({"bad/key": "eA=="}, 422)):
        with pytest.raises(ApiException) as bad:
            core.create_namespaced_secret("ml", {"apiVersion": "v1", "kind": "Secret",
                                                 "metadata": {"name": "bad"}, "data": data})
        assert bad.value.status == status
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "token"}}}]
    core.create_namespaced_pod("ml", _pod("waits", 'echo "got $TOKEN"', env=env))
    waiting = wait_for(lambda: (lambda s: s if s and s[0].state.waiting and
                                s[0].state.waiting.reason == "CreateContainerConfigError"
                                else None)(core.read_namespaced_pod("waits", "ml").status
                                           .container_statuses))
    assert waiting[0].state.waiting.message == 'secret "later" not found'
    core.create_namespaced_secret("ml", {"apiVersion": "v1", "kind": "Secret",
                                         "metadata": {"name": "later"},
                                         "stringData": {"token": "now"}})
    wait_for(lambda: core.read_namespaced_pod("waits", "ml").status.phase == "Succeeded")
    assert _log(core, "waits") == "got now\n"
    core.create_namespaced_pod("ml", _pod(
        "mounted", "cat /etc/tok/token; echo; stat -c %a /etc/tok/token",
        volumes=[{"name": "t", "secret": {"secretName": "tok", "defaultMode": 0o400}}],
        mounts=[{"name": "t", "mountPath": "/etc/tok", "readOnly": True}]))
    wait_for(lambda: core.read_namespaced_pod("mounted", "ml").status.phase == "Succeeded")
    assert _log(core, "mounted").split() == ["s3cret", "400"]
    core.delete_namespaced_secret("tok", "ml")
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_secret("tok", "ml")
    assert gone.value.status == 404


def test_kubectl_reads_and_deletes_a_secret(kube, tmp_path):
    (tmp_path / "secret.json").write_text(json.dumps({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "door-x"},
        "stringData": {"token": "abc"}}))
    kubectl(kube, "-n", "ml", "create", "--validate=false", "-f", str(tmp_path / "secret.json"))
    shown = json.loads(kubectl(kube, "-n", "ml", "get", "secret", "door-x", "-o",
                               "json").stdout)
    assert shown["data"] == {"token": "YWJj"} and "stringData" not in shown
    again = kubectl(kube, "-n", "ml", "create", "--validate=false", "-f",
                    str(tmp_path / "secret.json"), check=False)
    assert again.returncode != 0 and "already exists" in again.stderr
    kubectl(kube, "-n", "ml", "delete", "secret", "door-x")
    assert kube.api.get("secrets", "ml", "door-x") is None


def test_kubectl_merge_patches_a_headless_service_and_reads_discovery(kube, tmp_path):
    """The fake's Service, JSON merge patch (the patch rgt sends to give a multi-node Job's
    Service its owner) and extra API groups (what `rgt audit` looks for), as kubectl sees them."""
    from rgt.platforms.k8s.group import service_manifest

    (tmp_path / "svc.json").write_text(json.dumps(service_manifest(name="rgt-ddp", box="b",
                                                                   run_id="ddp-1")))
    kubectl(kube, "create", "--validate=false", "-f", str(tmp_path / "svc.json"))
    kubectl(kube, "patch", "service", "rgt-ddp", "--type", "merge", "-p",
            json.dumps({"metadata": {"ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "rgt-ddp", "uid": "u-1"}]}}))
    svc = json.loads(kubectl(kube, "get", "service", "rgt-ddp", "-o", "json").stdout)
    assert svc["spec"]["clusterIP"] == "None" and svc["metadata"]["ownerReferences"][0]["uid"] \
        == "u-1" and svc["metadata"]["labels"]["rgt.dev/run"] == "ddp-1"
    bad = kubectl(kube, "patch", "service", "rgt-ddp", "--type", "merge", "-p",
                  '{"spec": {"clusterIPx": "None"}}', check=False)
    assert bad.returncode != 0 and "clusterIPx" in bad.stderr, bad.stderr  # strict, as real
    portless = kubectl(kube, "patch", "service", "rgt-ddp", "--type", "merge", "-p",
                       '{"spec": {"clusterIP": null}}', check=False)  # headless no more
    assert portless.returncode != 0 and "is invalid" in portless.stderr, portless.stderr
    kube.api.extra_groups = {"jobset.x-k8s.io": ("v1alpha2", {"jobsets": "JobSet"})}
    groups = json.loads(kubectl(kube, "get", "--raw", "/apis").stdout)["groups"]
    assert {"name": "jobset.x-k8s.io", "versions": [{"groupVersion": "jobset.x-k8s.io/v1alpha2",
                                                     "version": "v1alpha2"}],
            "preferredVersion": {"groupVersion": "jobset.x-k8s.io/v1alpha2",
                                 "version": "v1alpha2"}} in groups
    served = json.loads(kubectl(kube, "get", "--raw", "/apis/jobset.x-k8s.io/v1alpha2").stdout)
    assert [(r["name"], r["kind"]) for r in served["resources"]] == [("jobsets", "JobSet")]
