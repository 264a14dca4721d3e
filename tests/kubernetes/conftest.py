"""Fixtures for the Kubernetes tests: a fake API server with a cluster behind it (fakes/),
a kubeconfig pointing at it, and an isolated RGT_HOME."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))        # tests/: cli.py
sys.path.insert(0, str(HERE / "fakes"))     # kube_api, kube_cluster, kube_jobs, kube_routes

from kube_api import FakeKubeApi  # noqa: E402
from kube_cluster import Cluster  # noqa: E402
from kubekit import IMAGE, make_tls, write_kubeconfig  # noqa: E402


class FakeKube:
    def __init__(self, api: FakeKubeApi, cluster: Cluster, kubeconfig: Path) -> None:
        self.api, self.cluster, self.kubeconfig = api, cluster, kubeconfig

    def pods(self, ns: str = "ml", labels: str | None = None) -> list[dict]:
        return self.api.list("pods", ns, labels)

    def jobs(self, ns: str = "ml") -> list[dict]:
        return self.api.list("jobs", ns)


@pytest.fixture
def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cert, key, ca = make_tls(tmp_path / "tls")
    api = FakeKubeApi(namespaces=("default", "ml")).start(tls=(cert, key))
    cluster = Cluster(api, tmp_path / "cluster", nodes={"gpu-node-1": 1, "gpu-node-2": 1},
                      images={IMAGE})
    config = write_kubeconfig(tmp_path / "kubeconfig", api.url, ca=ca)
    monkeypatch.setenv("KUBECONFIG", str(config))
    yield FakeKube(api, cluster, config)
    cluster.stop()
    api.stop()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "rgt-home"
    monkeypatch.setenv("RGT_HOME", str(home))
    return home
