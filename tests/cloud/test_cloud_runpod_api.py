"""RunPod's REST API v2 client and the fake it is tested against: the fake refuses what the
spec says RunPod refuses, and the client reads what it answers (tests/cloud/fakes/
fake_runpod_api.py; no SSH here)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
import types
import zipfile
from pathlib import Path

import httpx
import pytest
from cloudkit import RUNPOD_KEY

from rgt.errors import UserError
from rgt.platforms.http import ApiError
from rgt.platforms.runpod import api as rp

IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"


def test_catalog_and_gpu_names(runpod_api):
    with rp.client() as api:
        types = rp.catalog(api, count=1, cloud="SECURE")
    (call,) = runpod_api.calls("GET", "/v2/catalog/gpus")
    assert call.query == {"include": "AVAILABILITY", "product": "POD", "count": "1",
                          "cloud": "SECURE"}
    rtx = rp.pick_gpu(types, "RTX4090")
    assert rtx.id == "NVIDIA GeForce RTX 4090" and rtx.price["secure"] == pytest.approx(0.69)
    assert rtx.stock == {"US-TX-3": "HIGH", "EU-RO-1": "MEDIUM"}
    assert rp.pick_gpu(types, "NVIDIA GeForce RTX 4090") is rtx  # the exact id
    assert rp.pick_gpu(types, "rtx-4090").id == rtx.id
    assert rp.pick_gpu(types, "H100").name == "H100 SXM"
    with pytest.raises(UserError, match="fits several"):
        rp.pick_gpu(types, "RTX")
    with pytest.raises(UserError, match="no GPU type 'MI300X'"):
        rp.pick_gpu(types, "MI300X")
    assert rp.parse_gpu("H100:2") == ("H100", 2)
    assert rp.parse_gpu("NVIDIA GeForce RTX 4090") == ("NVIDIA GeForce RTX 4090", 1)
    for bad in ("H100:0", ":1", "H100:two"):
        with pytest.raises(UserError, match="TYPE:COUNT"):
            rp.parse_gpu(bad)


def test_pod_states_and_what_they_bill():
    assert rp.pod_state(None)["state"] == "gone" and not rp.pod_state(None)["billing"]
    running = {"status": "RUNNING", "gpu": {"count": 2}, "cost": 1.38,
               "runtime": {"gpus": [{}, {}]}}
    assert rp.pod_state(running)["state"] == "running"
    one = {**running, "runtime": {"gpus": [{}]}}
    assert rp.pod_state(one)["state"] == "fewer-gpus" and rp.pod_state(one)["gotcha"] == "RP1"
    zero = {**running, "runtime": {"gpus": []}}
    assert rp.pod_state(zero)["state"] == "zero-gpu" and rp.pod_state(zero)["billing"]
    stopped = rp.pod_state({"status": "EXITED", "gpu": {"count": 1}, "runtime": None},
                           volume_gb=100)
    assert stopped["state"] == "stopped" and "$20.00/month" in stopped["advice"]
    assert "RP4" in stopped["advice"] and "RP2" in stopped["advice"]
    assert rp.pod_state({"status": "ERROR"})["billing"] is True
    assert rp.pod_state({"status": "STARTING"})["state"] == "booting"
    assert rp.pod_state({"status": "TERMINATED"})["state"] == "gone"


def test_network_volume_prices():
    assert rp.volume_usd_per_month({"size": 100, "type": "STANDARD"}) == pytest.approx(7.0)
    assert rp.volume_usd_per_month({"size": 1500}) == pytest.approx(70 + 25)
    assert rp.volume_usd_per_month({"size": 100, "type": "HIGH_PERFORMANCE"}) == \
        pytest.approx(14.0)


def test_wrong_key_names_the_variable_never_the_key(runpod_api, monkeypatch, caplog):
    monkeypatch.setenv("RUNPOD_API_KEY", "wrong-" + RUNPOD_KEY)
    with rp.client() as api, pytest.raises(UserError) as err:
        rp.catalog(api)
    assert "RUNPOD_API_KEY is missing or wrong" in str(err.value)
    assert RUNPOD_KEY not in str(err.value) + caplog.text
    monkeypatch.delenv("RUNPOD_API_KEY")
    before = len(runpod_api.requests)
    with pytest.raises(UserError, match="RUNPOD_API_KEY is not set"):
        rp.client()
    assert len(runpod_api.requests) == before


def test_validation_failures_are_named_in_the_error(runpod_api):
    with rp.client() as api, pytest.raises(ApiError) as err:
        api.post("/v2/pods", {"name": "x", "image": IMAGE, "gpu": {"id": "y"}, "gpuCount": 1},
                 idempotent=False)
    assert err.value.status == 422 and "'gpuCount' not allowed" in str(err.value)


def test_rate_limit_is_honoured_with_retry_after(runpod_api):
    runpod_api.per_minute, runpod_api.window_s = 2, 1.0
    with rp.client() as api:
        started = time.monotonic()
        for _ in range(3):
            assert api.get("/v2/network-volumes") == {"networkVolumes": []}
        waited = time.monotonic() - started
    assert runpod_api.rate_limited == 1 and waited >= 0.9  # Retry-After: 1, honoured


def test_forbidden_is_the_apis_refusal_not_a_bad_key(runpod_api):
    runpod_api.fail_before("GET", "/v2/network-volumes", 403)
    with rp.client() as api, pytest.raises(ApiError) as err:
        api.get("/v2/network-volumes")
    assert err.value.status == 403 and "missing or wrong" not in str(err.value)


def _raw(runpod_api, method: str, path: str, body: object = None) -> httpx.Response:
    """Plain httpx, none of rgt's client code: what the fake itself accepts or refuses."""
    return httpx.request(method, runpod_api.url + path, json=body, timeout=5,
                         headers={"Authorization": f"Bearer {RUNPOD_KEY}"})


def _refused(resp: httpx.Response, status: int, *words: str) -> None:
    assert resp.status_code == status, resp.text
    text = resp.text
    assert resp.json()["status"] == status and resp.json()["title"]
    for word in words:
        assert word in text, text


def test_fake_rejects_what_runpod_rejects(runpod_api):
    good = {"name": "x", "image": IMAGE, "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 1}}
    vol = runpod_api.add_volume("v", "EU-RO-1")
    _refused(_raw(runpod_api, "POST", "/v2/pods", {**good, "gpuTypeIds": ["x"]}), 422,
             "additional properties 'gpuTypeIds' not allowed")  # a v1 field is refused by name
    _refused(_raw(runpod_api, "POST", "/v2/pods", {**good, "gpu": {"id": "x", "count": 0}}), 422,
             "$.gpu.count: minimum 1")
    _refused(_raw(runpod_api, "POST", "/v2/pods", {"name": "x", "gpu": good["gpu"]}), 422, "image")
    _refused(_raw(runpod_api, "POST", "/v2/pods", {**good, "interruptible": True}), 422,
             "interruptible")  # no spot in v2
    _refused(_raw(runpod_api, "POST", "/v2/pods", {**good, "gpu": {"id": "NVIDIA B300"}}), 400,
             "unknown GPU type")
    _refused(_raw(runpod_api, "POST", "/v2/pods", {**good, "cpu": {"flavor": "x"}}), 400,
             "exactly one of gpu or cpu")
    _refused(_raw(runpod_api, "POST", "/v2/pods", {
        **good, "mounts": {"persistent": {"size": 20, "path": "/workspace"},
                           "network": [{"volumeId": vol["id"], "path": "/workspace"}]}}), 400,
        "mutually exclusive")
    net = {"network": [{"volumeId": vol["id"], "path": "/workspace"}]}
    _refused(_raw(runpod_api, "POST", "/v2/pods", {**good, "mounts": net,
                                              "dataCenterIds": ["US-TX-3"]}), 400, "EU-RO-1")
    _refused(_raw(runpod_api, "POST", "/v2/pods", {
        **good, "mounts": {"network": [{"volumeId": "vol9999", "path": "/w"}]}}), 404, "vol9999")
    nine = {**good, "gpu": {**good["gpu"], "count": 9}}
    _refused(_raw(runpod_api, "POST", "/v2/pods", nine), 400, "at most 8")
    runpod_api.gpus[0]["_stock"] = {}
    _refused(_raw(runpod_api, "POST", "/v2/pods", good), 400, "no instances currently available")
    runpod_api.balance_empty = True
    _refused(_raw(runpod_api, "POST", "/v2/pods", good), 402, "insufficient balance")
    _refused(_raw(runpod_api, "GET", "/v2/catalog/gpus?include=AVAILABILITY"), 400, "product")
    _refused(_raw(runpod_api, "GET", "/v2/catalog/gpus?product=POD"), 400, "include")
    assert not runpod_api.pods  # nothing refused was created
    wrong = httpx.get(runpod_api.url + "/v2/pods", headers={"Authorization": "Bearer nope"})
    _refused(wrong, 401)


def test_fake_pod_actions_follow_the_status_rules(runpod_api):
    runpod_api.balance_empty = False
    resp = _raw(runpod_api, "POST", "/v2/pods", {"name": "x", "image": IMAGE,
                                            "gpu": {"id": "NVIDIA GeForce RTX 4090"}})
    assert resp.status_code == 201 and resp.json()["status"] == "PROVISIONING"
    pod_id = resp.json()["id"]
    _refused(_raw(runpod_api, "POST", f"/v2/pods/{pod_id}/action", {"action": "reset"}), 422,
             "action")  # v2 has no reset
    _refused(_raw(runpod_api, "POST", f"/v2/pods/{pod_id}/action", {"action": "stop", "x": 1}), 422,
             "'x' not allowed")
    _refused(_raw(runpod_api, "POST", f"/v2/pods/{pod_id}/action", {"action": "start"}), 409,
             "PROVISIONING")
    stopped = _raw(runpod_api, "POST", f"/v2/pods/{pod_id}/action", {"action": "stop"})
    assert stopped.status_code == 200 and stopped.json()["status"] == "EXITED"
    assert stopped.json()["actions"] == ["start", "terminate"] and stopped.json()["cost"] == 0
    _refused(_raw(runpod_api, "POST", f"/v2/pods/{pod_id}/action", {"action": "restart"}), 409)
    gone = _raw(runpod_api, "DELETE", f"/v2/pods/{pod_id}")
    assert gone.status_code == 204 and gone.content == b""
    # RP14: the pod stays readable a while after the 204
    assert _raw(runpod_api, "GET", f"/v2/pods/{pod_id}").status_code == 200
    for _ in range(runpod_api.delete_polls):
        _raw(runpod_api, "GET", f"/v2/pods/{pod_id}")
    _refused(_raw(runpod_api, "GET", f"/v2/pods/{pod_id}"), 404)




# The official SDK against the fake --------------------------------------------------------------
# runpod-python 1.12.0 (github.com/runpod/runpod-python at 07fc6e2b) talks to RunPod through its
# GraphQL API (runpod/api/graphql.py, ctl_commands.py). Its package __init__ imports the
# serverless worker (fastapi, aiohttp, paramiko ...), which rgt's test environment does not carry,
# so the SDK's API layer is loaded from its own unmodified files under an empty `runpod` package:
# RGT_TEST_RUNPOD_SDK (a wheel or a directory holding runpod/), an installed runpod, or the
# pinned wheel scripts/test fetches with pip (no dependencies) into the user's cache.
RUNPOD_SDK = "runpod==1.12.0"


@pytest.fixture(scope="session")
def runpod_sdk_root(tmp_path_factory) -> Path:
    given = os.environ.get("RGT_TEST_RUNPOD_SDK")  # scripts/test fetches the wheel and sets it
    installed = importlib.util.find_spec("runpod")
    if given:
        source = Path(given)
    elif installed is not None and installed.origin:
        return Path(installed.origin).parent.parent
    else:
        pytest.fail(f"the official RunPod SDK is not at hand: run scripts/test (it fetches "
                    f"{RUNPOD_SDK} with pip download --no-deps), or set RGT_TEST_RUNPOD_SDK "
                    "to its wheel")
    if source.is_dir():
        return source
    root = tmp_path_factory.mktemp("runpod-sdk")
    with zipfile.ZipFile(source) as wheel:
        wheel.extractall(root)
    return root


@pytest.fixture
def runpod_sdk(runpod_api, runpod_sdk_root, monkeypatch):
    """(ctl_commands, error) of the official SDK, pointed at the fake by RUNPOD_API_BASE_URL."""
    package = types.ModuleType("runpod")
    package.__path__ = [str(runpod_sdk_root / "runpod")]
    package.api_key = RUNPOD_KEY  # what `runpod.api_key = ...` sets in the SDK's own __init__
    monkeypatch.setitem(sys.modules, "runpod", package)
    monkeypatch.setenv("RUNPOD_API_BASE_URL", runpod_api.url)
    try:
        yield (importlib.import_module("runpod.api.ctl_commands"),
               importlib.import_module("runpod.error"))
    finally:
        for name in [n for n in sys.modules if n.startswith("runpod.")]:
            del sys.modules[name]


def test_sdk_reads_the_gpu_catalog(runpod_api, runpod_sdk):
    ctl, _ = runpod_sdk
    gpus = ctl.get_gpus()
    assert gpus[0] == {"id": "NVIDIA GeForce RTX 4090", "displayName": "RTX 4090",
                       "memoryInGb": 24}
    assert [g["id"] for g in gpus] == [g["id"] for g in runpod_api.gpus]
    rtx = ctl.get_gpu("NVIDIA GeForce RTX 4090", 2)
    assert rtx["securePrice"] == pytest.approx(0.69) and rtx["maxGpuCount"] == 8
    assert rtx["lowestPrice"]["uninterruptablePrice"] == pytest.approx(0.68)
    with pytest.raises(ValueError, match="No GPU found"):
        ctl.get_gpu("NVIDIA MI300X")
    (call, *_) = runpod_api.calls("POST", "/graphql")
    assert call.headers["authorization"] == f"Bearer {RUNPOD_KEY}"


def test_sdk_pod_lifecycle_is_the_rest_apis_pod(runpod_api, runpod_sdk):
    ctl, _ = runpod_sdk
    made = ctl.create_pod("sdk-a", IMAGE, "NVIDIA GeForce RTX 4090", cloud_type="SECURE",
                          ports="22/tcp", env={"TZ": "UTC"}, volume_in_gb=20)
    assert made["imageName"] == IMAGE and made["env"] == ["TZ=UTC"]
    assert made["machine"] == {"podHostId": f"{made['id']}-64411eb2"}
    pod = runpod_api.pods[made["id"]]  # the very pod GET /v2/pods/{id} reads
    assert pod["mounts"] == {"persistent": {"size": 20, "path": "/runpod-volume"}}
    assert [p["id"] for p in ctl.get_pods()] == [made["id"]]
    for _ in range(runpod_api.boot_polls + 1):
        shown = ctl.get_pod(made["id"])
    assert shown["desiredStatus"] == "RUNNING" and shown["costPerHr"] == pytest.approx(0.69)
    assert shown["runtime"]["ports"][0]["privatePort"] == 22
    assert ctl.stop_pod(made["id"]) == {"id": made["id"], "desiredStatus": "EXITED"}
    assert pod["status"] == "EXITED"
    assert ctl.resume_pod(made["id"], 1)["desiredStatus"] == "RUNNING"
    ctl.terminate_pod(made["id"])
    assert ctl.get_pod(made["id"]) is None and ctl.get_pods() == []


def test_sdk_hears_what_runpod_refuses(runpod_api, runpod_sdk, monkeypatch):
    ctl, error = runpod_sdk
    for gpu in runpod_api.gpus:
        gpu["_stock"] = {}
    with pytest.raises(error.QueryError, match="no instances currently available"):
        ctl.create_pod("sdk-b", IMAGE, "NVIDIA RTX A6000")
    from runpod.api.graphql import run_graphql_query

    with pytest.raises(error.QueryError, match='Cannot query field "gpuPrice" on type'):
        run_graphql_query("query { gpuTypes { id gpuPrice } }")
    with pytest.raises(error.AuthenticationError):
        ctl.get_gpus(api_key="rpa_not-the-key")
