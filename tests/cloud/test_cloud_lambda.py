"""Lambda Cloud: the real client against the fake API (tests/cloud/fakes/fake_lambda_api.py)."""

from __future__ import annotations

import httpx
import pytest
from cloudkit import LAMBDA_KEY, rgt_cli

from rgt.errors import UserError
from rgt.lifecycle import down as down_mod
from rgt.platforms import platform_for
from rgt.platforms.http import ApiClient, ApiError
from rgt.platforms.lambda_cloud import platform as lambda_cloud
from rgt.store import Box


def _up(store, sshd, tmp_path, **kwargs):
    messages: list[str] = []
    box = lambda_cloud.lambda_up(
        store, "lam", "H100:1", on_wait=messages.append, poll_s=0.02,
        identity=str(sshd.client_key), ssh_user="root", ssh_port=sshd.port,
        data_dir=str(tmp_path / "nvme"), **kwargs)
    return box, messages


def test_launches_the_moment_capacity_appears(lambda_api, store, sshd_server, tmp_path):
    lambda_api.grant_after["gpu_1x_h100_pcie"] = (3, "us-west-1")  # no capacity for 3 polls
    lambda_api.add_filesystem("ckpts", "us-west-1", bytes_used=50 * 2**30)
    box, messages = _up(store, sshd_server, tmp_path, filesystem="ckpts", ssh_key="laptop",
                        durable_dir=str(tmp_path / "nfs"))
    assert lambda_api.type_polls == 4
    assert sum("no capacity" in m and "LAM5" in m for m in messages) == 3
    (launch,) = lambda_api.calls("POST", "/instance-operations/launch")
    assert launch.body == {"region_name": "us-west-1", "instance_type_name": "gpu_1x_h100_pcie",
                           "ssh_key_names": ["laptop"], "file_system_names": ["ckpts"],
                           "name": "lam"}  # only fields Lambda's current spec names
    assert box.state == "up" and box.profile == "lambda"
    assert box.connection["host"] == "127.0.0.1"  # read from GET /instances/{id} (LAM10)
    assert box.extra["instance_id"] == "inst-0001"
    assert box.extra["filesystem"]["region"] == "us-west-1"
    assert box.rate == pytest.approx(2.49)
    assert "uname" in box.extra  # boxes.up really reached the box over SSH
    assert any("booting" in m for m in messages)


def test_no_capacity_is_a_clear_bounded_error(lambda_api, store):
    with pytest.raises(UserError) as err:
        lambda_cloud.lambda_up(store, "lam", "H100:1", wait_s=0.2, poll_s=0.02)
    text = str(err.value)
    assert "no Lambda capacity for H100:1 in any region" in text and "LAM5" in text
    assert "nothing was launched" in text
    assert not lambda_api.calls("POST", "/instance-operations/launch")


def test_unknown_gpu_names_the_types(lambda_api, store):
    with pytest.raises(UserError, match="gpu_1x_a10"):
        lambda_cloud.lambda_up(store, "lam", "B200:1", wait_s=0.1, poll_s=0.02)


def test_filesystem_in_another_region_refused_before_launch(lambda_api, store):
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-east-1", "us-west-1"}
    lambda_api.add_filesystem("ckpts", "us-east-1")
    with pytest.raises(UserError) as err:
        lambda_cloud.lambda_up(store, "lam", "H100:1", region="us-west-1", filesystem="ckpts")
    assert "us-east-1" in str(err.value) and "us-west-1" in str(err.value)
    assert "LAM2" in str(err.value)
    assert not lambda_api.calls("POST", "/instance-operations/launch")
    assert not lambda_api.calls("GET", "/instance-types")


def test_unknown_ssh_key_refused_before_waiting_for_capacity(lambda_api, store):
    with pytest.raises(UserError, match="no SSH key named 'desktop' \\(yours: laptop\\)"):
        lambda_cloud.lambda_up(store, "lam", "H100:1", ssh_key="desktop")
    assert lambda_api.calls("GET", "/ssh-keys")
    assert not lambda_api.calls("GET", "/instance-types")


def test_fake_rejects_what_lambda_rejects(lambda_api):
    """The stub is honest: a wrong-region filesystem, no capacity, bad names are refused."""
    lambda_api.add_filesystem("ckpts", "us-east-1")
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-west-1"}
    body = {"region_name": "us-west-1", "instance_type_name": "gpu_1x_h100_pcie",
            "ssh_key_names": ["laptop"], "file_system_names": ["ckpts"], "quantity": 1}
    api = lambda_cloud.client()
    with pytest.raises(ApiError) as err:
        api.post("/instance-operations/launch", body)
    assert err.value.code == "instance-operations/launch/file-system-in-wrong-region"
    with pytest.raises(ApiError) as err:
        api.post("/instance-operations/launch", {**body, "file_system_names": [],
                                                 "region_name": "us-east-1"})
    assert err.value.code == "instance-operations/launch/insufficient-capacity"
    lambda_api.add_filesystem("more", "us-east-1")
    for bad in ({"region_name": "mars-1"}, {"instance_type_name": "gpu_9x_nope"},
                {"ssh_key_names": ["laptop", "laptop"]}, {"ssh_key_names": ["desktop"]},
                {"file_system_names": ["ckpts", "more"], "region_name": "us-east-1"}):
        with pytest.raises(ApiError) as err:
            api.post("/instance-operations/launch", {**body, **bad})
        assert err.value.status == 400 and err.value.code == "global/invalid-parameters"


def _raw_post(lambda_api, path: str, body: object) -> httpx.Response:
    """Plain httpx, none of rgt's client code: what the fake itself accepts or refuses."""
    return httpx.post(lambda_api.url + path, json=body, auth=(LAMBDA_KEY, ""), timeout=5)


def _refused(resp: httpx.Response, *words: str) -> None:
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "global/invalid-parameters"
    for word in words:
        assert word in error["message"], error["message"]


def test_fake_launch_validates_against_lambdas_request_schema(lambda_api):
    """LAUNCH_SCHEMA (Lambda's OpenAPI launchInstance body): unknown field, wrong type, missing
    required field and the documented limits are refused before any launch logic runs."""
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-east-1"}
    good = {"region_name": "us-east-1", "instance_type_name": "gpu_1x_h100_pcie",
            "ssh_key_names": ["laptop"]}
    launch = "/instance-operations/launch"
    _refused(_raw_post(lambda_api, launch, {**good, "gpu_count": 1}), "gpu_count", "unknown field")
    _refused(_raw_post(lambda_api, launch, {**good, "ssh_key_names": "laptop"}),
             "ssh_key_names", "expected array")
    _refused(_raw_post(lambda_api, launch, {**good, "ssh_key_names": [7]}), "expected string")
    _refused(_raw_post(lambda_api, launch, {**good, "quantity": "1"}), "expected integer")
    _refused(_raw_post(lambda_api, launch, {**good, "quantity": True}), "expected integer")
    missing = {k: v for k, v in good.items() if k != "instance_type_name"}
    _refused(_raw_post(lambda_api, launch, missing), "instance_type_name", "required")
    _refused(_raw_post(lambda_api, launch, None), "region_name", "required")
    _refused(_raw_post(lambda_api, launch, {**good, "name": "n" * 65}), "at most 64")
    _refused(_raw_post(lambda_api, launch, {**good, "hostname": "Head_Node"}), "hostname")
    _refused(_raw_post(lambda_api, launch, {**good, "image": {"id": "x", "family": "y"}}),
             "image")
    _refused(_raw_post(lambda_api, launch, {**good, "tags": [{"key": "k1"}]}), "value", "required")
    assert not lambda_api.instances  # nothing refused was launched
    ok = _raw_post(lambda_api, launch, {**good, "name": "n" * 64, "hostname": "head-1",
                                        "image": {"family": "lambda-stack"}, "user_data": "#!",
                                        "tags": [{"key": "team", "value": "ml"}],
                                        "file_system_names": [], "quantity": 1})
    assert ok.status_code == 200, ok.text
    assert ok.json()["data"]["instance_ids"] == ["inst-0001"]


def test_fake_terminate_validates_against_lambdas_request_schema(lambda_api):
    inst = lambda_api.add_instance("active")
    terminate = "/instance-operations/terminate"
    _refused(_raw_post(lambda_api, terminate, {"instance_ids": [inst["id"]], "force": True}),
             "force", "unknown field")
    _refused(_raw_post(lambda_api, terminate, {"instance_ids": inst["id"]}), "expected array")
    _refused(_raw_post(lambda_api, terminate, {}), "instance_ids", "required")
    assert inst["status"] == "active"
    ok = _raw_post(lambda_api, terminate, {"instance_ids": [inst["id"]]})
    assert ok.status_code == 200, ok.text


def _rented_box(store, lambda_api, *, filesystem: str | None = None) -> Box:
    inst = lambda_api.add_instance("active", file_system_names=[filesystem] if filesystem else [])
    extra = {"platform": "lambda", "instance_id": inst["id"]}
    if filesystem:
        fs = next(f for f in lambda_api.filesystems if f["name"] == filesystem)
        extra["filesystem"] = {"name": fs["name"], "id": fs["id"], "region": "us-east-1"}
    box = Box(name="lam", profile="lambda", connection={"host": "127.0.0.1", "user": "ubuntu"},
              data_dir="/home/ubuntu", durable_dir="/lambda/nfs/ckpts", rate=2.49, state="up",
              created=0, extra=extra)
    store.add_box(box)
    return box


def test_down_terminates_confirms_and_keeps_the_filesystem_billing(lambda_api, store):
    lambda_api.add_filesystem("ckpts", "us-east-1", bytes_used=100 * 2**30)
    box = _rented_box(store, lambda_api, filesystem="ckpts")
    plan = down_mod.plan_down(store, "lam")  # no runs: nothing to verify
    assert plan.safe and plan.automated
    outcome = down_mod.execute_down(store, plan, discarded=False)
    assert "terminated" in outcome and box.extra["instance_id"] in outcome
    (terminate,) = lambda_api.calls("POST", "/instance-operations/terminate")
    assert terminate.body == {"instance_ids": [box.extra["instance_id"]]}
    assert lambda_api.instances[box.extra["instance_id"]]["status"] == "terminated"
    # confirmed through terminating → terminated, not taken on trust
    gets = lambda_api.calls("GET", f"/instances/{box.extra['instance_id']}")
    assert len(gets) == lambda_api.terminate_polls + 1
    after = store.box("lam")
    assert after.state == "down"
    (billing,) = after.extra["still_billing"]
    assert "ckpts" in billing and "100.0 GiB" in billing and "$0.20/GiB/month" in billing
    assert "$20.00/month" in billing and "LAM6" in billing
    listing = rgt_cli("ls")  # a down box that still bills stays on the default listing
    assert listing.returncode == 0
    assert "ckpts" in listing.stdout and "still billing" in listing.stdout


def test_terminate_that_ends_unhealthy_is_not_called_down(lambda_api, store):
    lambda_api.after_terminate = "unhealthy"  # Alert: still billing (LAM3)
    _rented_box(store, lambda_api)
    platform = platform_for("lambda")
    with pytest.raises(UserError, match="LAM3"):
        platform.release(store, store.box("lam"))
    assert store.box("lam").state == "up"


def test_status_reads_the_api(lambda_api, store):
    box = _rented_box(store, lambda_api)
    status = lambda_cloud.instance_status(box)
    assert status["status"] == "active" and status["billing"] is True
    lambda_api.instances[box.extra["instance_id"]]["status"] = "unhealthy"
    assert "LAM3" in lambda_cloud.instance_status(box)["advice"]


def test_401_names_the_variable_and_never_the_key(lambda_api, monkeypatch, caplog):
    monkeypatch.setenv("LAMBDA_API_KEY", "wrong-" + LAMBDA_KEY)
    with pytest.raises(UserError) as err:
        lambda_cloud.capacity("H100:1")
    assert "LAMBDA_API_KEY is missing or wrong" in str(err.value)
    assert LAMBDA_KEY not in str(err.value) and LAMBDA_KEY not in caplog.text
    assert err.value.exit_code == 2


def test_missing_key_fails_before_any_request(lambda_api, monkeypatch):
    monkeypatch.delenv("LAMBDA_API_KEY")
    with pytest.raises(UserError, match="LAMBDA_API_KEY is not set"):
        lambda_cloud.capacity()
    assert lambda_api.requests == []


def test_429_is_retried_then_succeeds(lambda_api):
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-east-1"}
    lambda_api.fail_next(429, times=2)
    lambda_api.fail_next(503)
    (h100,) = lambda_cloud.capacity("H100:1")
    assert h100.regions == ["us-east-1"]
    assert len(lambda_api.calls("GET", "/instance-types")) == 4


def test_retries_are_bounded(lambda_api, monkeypatch):
    slept: list[float] = []
    api = ApiClient(service="Lambda Cloud", key_env="LAMBDA_API_KEY",
                    url_env="RGT_LAMBDA_API_URL", default_url="http://unused", auth="basic",
                    retries=3, sleep=slept.append)
    lambda_api.fail_next(429, times=10)
    with pytest.raises(ApiError, match="after 4 tries"):
        api.get("/instance-types")
    assert len(lambda_api.requests) == 4 and len(slept) == 3


def test_backoff_is_exponential_and_capped():
    import os

    os.environ.setdefault("RGT_TEST_DUMMY_KEY", "k")
    api = ApiClient(service="x", key_env="RGT_TEST_DUMMY_KEY", url_env="RGT_TEST_NO_URL",
                    default_url="http://127.0.0.1:9", backoff_s=0.5, max_backoff_s=4)
    caps = [0.5, 1, 2, 4, 4]
    for _ in range(20):  # jittered: between half and all of the capped exponential
        assert all(cap / 2 <= api._delay(n, None) <= cap for n, cap in enumerate(caps))
    api.jitter = False
    assert [api._delay(n, None) for n in range(5)] == caps


def test_up_cli_capacity_timeout_and_status(lambda_api, store):
    result = rgt_cli("up", "lam", "--profile", "lambda", "--gpu", "H100:1", "--wait", "0.2")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no Lambda capacity" in result.stderr and "LAM5" in result.stderr
    assert LAMBDA_KEY not in result.stderr + result.stdout
    _rented_box(store, lambda_api)
    status = rgt_cli("cloud-status", "lam")
    assert status.returncode == 0, status.stderr
    assert "active" in status.stdout and "billing" in status.stdout
