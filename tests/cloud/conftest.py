"""Fixtures for the cloud control-plane tests: fake Lambda / vast.ai / RunPod APIs on 127.0.0.1, an
isolated RGT_HOME, and (for the boxes that must answer SSH) the real sshd from tests/sshd.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))        # tests/: sshd.py, cli.py
sys.path.insert(0, str(HERE / "fakes"))     # fake_http, fake_lambda_api, fake_vast_api

from cloudkit import LAMBDA_KEY, RUNPOD_KEY, VAST_KEY  # noqa: E402
from fake_lambda_api import FakeLambda  # noqa: E402
from fake_runpod_api import FakeRunPod  # noqa: E402
from fake_vast_api import FakeVast  # noqa: E402
from sshd import SshServer, sshd_keys, sshd_server  # noqa: E402, F401  (fixtures)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "rgt-home"
    monkeypatch.setenv("RGT_HOME", str(home))
    monkeypatch.setenv("RGT_CLOUD_POLL_S", "0.02")
    # the documented pacing (Lambda: 1 req/s, 1 launch / 10 s) at 1/200 of the speed
    monkeypatch.setenv("RGT_CLOUD_RATE_SCALE", "0.005")
    return home


@pytest.fixture
def store(home: Path):
    from rgt.store import Store

    return Store()


@pytest.fixture
def lambda_api(monkeypatch: pytest.MonkeyPatch, home: Path):
    fake = FakeLambda(LAMBDA_KEY).start()
    monkeypatch.setenv("LAMBDA_API_KEY", LAMBDA_KEY)
    monkeypatch.setenv("RGT_LAMBDA_API_URL", fake.url)
    yield fake
    fake.stop()


@pytest.fixture
def vast_api(monkeypatch: pytest.MonkeyPatch, home: Path):
    fake = FakeVast(VAST_KEY).start()
    monkeypatch.setenv("VAST_API_KEY", VAST_KEY)
    monkeypatch.setenv("RGT_VAST_API_URL", fake.url)
    yield fake
    fake.stop()


@pytest.fixture
def runpod_api(monkeypatch: pytest.MonkeyPatch, home: Path):
    fake = FakeRunPod(RUNPOD_KEY).start()
    monkeypatch.setenv("RUNPOD_API_KEY", RUNPOD_KEY)
    monkeypatch.setenv("RGT_RUNPOD_API_URL", fake.url)
    yield fake
    fake.stop()
    for pod in fake.pods.values():  # the relays to sshd of pods a test left running
        fake._close(pod)


@pytest.fixture
def keyed(runpod_api, sshd_server: SshServer):  # noqa: F811  (the fixture above)
    """The RunPod account has the test's login key registered, and pods lead to the real
    sshd."""
    runpod_api.ssh_port = sshd_server.port
    pub = sshd_server.client_key.with_name(sshd_server.client_key.name + ".pub")
    runpod_api.ssh_keys = [pub.read_text().strip()]
    return runpod_api
