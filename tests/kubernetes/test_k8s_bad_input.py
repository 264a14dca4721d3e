"""Bad input on Kubernetes: each mistake is one clear line and exit 2, and nothing is left
behind in the cluster that `rgt ls` does not show (no PVC, no door pod, no Job)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from cli import rgt
from kubekit import IMAGE, job_spec, up, up_cli, write_kubeconfig


def nothing_left(kube) -> None:
    """No claim, pod or Job stays (what rgt deleted may take a moment to go, as it does on a
    real cluster: a claim in use is removed once its last pod is gone)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (kube.api.list("persistentvolumeclaims", "ml")
                                           or kube.pods() or kube.jobs()):
        time.sleep(0.05)
    assert kube.api.list("persistentvolumeclaims", "ml") == []
    assert kube.pods() == [] and kube.jobs() == []
    listed = rgt("ls")
    assert listed.returncode == 0 and "k8s" not in listed.stdout, listed.stdout


def refused(tmp_path: Path, match: str, *flags: str, image: str = IMAGE) -> str:
    """`rgt up` through the CLI: exit 2, one line on stderr matching MATCH, no traceback."""
    done = up_cli(tmp_path, *flags, image=image)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip()
    assert "Traceback" not in done.stderr and re.search(match, line), line
    return line


def test_no_kubeconfig(kube, home, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    refused(tmp_path, "no kubeconfig found")
    nothing_left(kube)


def test_unknown_context(kube, home, tmp_path):
    refused(tmp_path, r"context 'prod' is not in your kubeconfig \(contexts: fake\)",
            "--context", "prod")
    nothing_left(kube)


def test_wrong_token(kube, home, tmp_path, monkeypatch):
    bad = write_kubeconfig(tmp_path / "bad", kube.api.url, token="expired",
                           ca=_ca(kube))
    monkeypatch.setenv("KUBECONFIG", str(bad))
    refused(tmp_path, "refused our credentials")
    nothing_left(kube)


def _ca(kube) -> bytes:
    import base64

    import yaml

    data = yaml.safe_load(Path(kube.kubeconfig).read_text())
    return base64.b64decode(data["clusters"][0]["cluster"]["certificate-authority-data"])


def test_forbidden_verbs(kube, home, tmp_path):
    kube.api.forbidden |= {("alice", "create", "jobs"), ("alice", "get", "pods/log")}
    line = refused(tmp_path, "RBAC: user alice may not create jobs.batch, get pods/log in "
                             "namespace ml")
    assert "kubectl auth can-i" in line
    nothing_left(kube)


def test_missing_namespace(kube, home, tmp_path):
    refused(tmp_path, "namespace 'nowhere' does not exist", "--namespace", "nowhere")
    nothing_left(kube)


def test_no_storage_class(kube, home, tmp_path):
    kube.api.remove("storageclasses", "", "standard")
    refused(tmp_path, "no default storage class: rgt's PVC would stay Pending forever")
    refused(tmp_path, r"--storage-class fast: no such storage class", "--storage-class", "fast")
    nothing_left(kube)


def test_image_not_found_at_up_undoes_the_claim(kube, home, tmp_path, monkeypatch):
    monkeypatch.setenv("RGT_K8S_DOOR_TIMEOUT_S", "20")
    line = refused(tmp_path, "K8S3", image=IMAGE[:-4] + "0000")
    assert "not found" in line
    nothing_left(kube)


def test_image_tag_is_refused_before_anything_is_made(kube, home, tmp_path):
    refused(tmp_path, "not pinned by digest", image="pytorch/pytorch:latest")
    nothing_left(kube)


def test_run_with_an_image_that_does_not_exist(kube, home, tmp_path):
    up(tmp_path)
    missing = IMAGE[:-4] + "0000"
    spec = job_spec(tmp_path)
    spec.write_text(spec.read_text().replace('resources: {gpu: "A100:1", time: "10m"}',
                                             f'resources: {{gpu: "A100:1", image: "{missing}"}}'))
    done = rgt("run", "k8s", str(spec))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot be pulled" in done.stderr and "K8S3" in done.stderr
    assert "rgt deleted the Job" in done.stderr
    assert kube.jobs() == []
    assert "RUNS" in rgt("ls").stdout and rgt("watch", "k8s").returncode == 2  # no run kept


def test_multi_node_on_a_read_write_once_claim_is_refused(kube, home, tmp_path):
    """The pods of a multi-node job all mount the box's claim, each from its own node: a
    ReadWriteOnce claim would leave all but one waiting forever (Multi-Attach)."""
    up(tmp_path)
    spec = job_spec(tmp_path)
    spec.write_text(spec.read_text().replace('time: "10m"', 'time: "10m", nodes: 2'))
    done = rgt("run", "k8s", str(spec))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "PVC rgt-k8s is ReadWriteOnce" in done.stderr and "--access-mode ReadWriteMany" \
        in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert kube.jobs() == [] and kube.api.list("services", "ml") == []
