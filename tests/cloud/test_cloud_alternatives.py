"""GPU alternatives on the renting platforms (a task's `accelerators: [H100:1, A100:1]`, or
`rgt up --gpu H100:1,A10:1`): the next choice is tried only when the one before has no capacity
or offer, each skip is said with why, one machine is rented at most (a lost create answer is
adopted, never followed by another create), and a request none of whose GPUs is available is
refused by name. Also `rgt offers` and `rgt cloud-status`, dispatched by profile."""

from __future__ import annotations

import json
import time

import pytest
from cloudkit import IMAGE, RUNPOD_IMAGE, rent_runpod, rgt_cli
from fake_vast_api import offer

from rgt.errors import UserError
from rgt.platforms import platform_for
from rgt.platforms.base import Request
from rgt.platforms.lambda_cloud import platform as lambda_cloud
from rgt.platforms.runpod import platform as runpod
from rgt.spec import Resources
from rgt.store import Box


def _events(store, box: str, kind: str = "cloud-launch") -> list[dict]:
    rows = store.db.execute("SELECT detail FROM events WHERE box=? AND kind=?",
                            (box, kind)).fetchall()
    return [json.loads(r["detail"]) for r in rows]


# Lambda ------------------------------------------------------------------------------------

def _lambda_up(store, sshd, tmp_path, gpus, **kwargs):
    messages: list[str] = []
    box = lambda_cloud.lambda_up(
        store, "lam", gpus, on_wait=messages.append, poll_s=0.02,
        identity=str(sshd.client_key), ssh_user="root", ssh_port=sshd.port,
        data_dir=str(tmp_path / "nvme"), **kwargs)
    return box, messages


def test_lambda_takes_the_next_gpu_when_the_first_has_no_capacity(lambda_api, store,
                                                                  sshd_server, tmp_path):
    lambda_api.capacity["gpu_1x_a10"] = {"us-east-1"}  # no H100 anywhere
    box, messages = _lambda_up(store, sshd_server, tmp_path, ["H100:1", "A10:1"])
    (launch,) = lambda_api.calls("POST", "/instance-operations/launch")
    assert launch.body["instance_type_name"] == "gpu_1x_a10"
    assert len(lambda_api.instances) == 1 and box.extra["instance_type"] == "gpu_1x_a10"
    assert any("H100:1: no capacity in any region" in m and "taking A10:1" in m
               for m in messages), messages
    (event,) = _events(store, "lam")
    assert event["asked"] == ["H100:1", "A10:1"] and event["type"] == "gpu_1x_a10"


def test_lambda_prefers_the_first_gpu_when_both_have_capacity(lambda_api, store, sshd_server,
                                                              tmp_path):
    lambda_api.capacity["gpu_1x_a10"] = {"us-east-1"}
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-west-1"}
    box, messages = _lambda_up(store, sshd_server, tmp_path, ["H100:1", "A10:1"])
    assert box.extra["instance_type"] == "gpu_1x_h100_pcie"
    assert not any("skipped" in m for m in messages)


def test_lambda_none_available_is_refused_naming_every_gpu(lambda_api, store):
    messages: list[str] = []
    with pytest.raises(UserError) as err:
        lambda_cloud.lambda_up(store, "lam", ["H100:1", "A10:1"], wait_s=0.2, poll_s=0.02,
                               on_wait=messages.append)
    assert "no Lambda capacity for H100:1, A10:1 in any region" in str(err.value)
    assert "nothing was launched" in str(err.value)
    assert not lambda_api.calls("POST", "/instance-operations/launch")
    tried = [m for m in messages if m.startswith("tried in order")]
    assert len(tried) == 1  # said once, not on every poll
    assert "H100:1: no capacity" in tried[0] and "A10:1: no capacity" in tried[0]


def test_lambda_unknown_alternative_is_skipped_but_all_unknown_refused(lambda_api, store):
    lambda_api.capacity["gpu_1x_a10"] = {"us-east-1"}
    with pytest.raises(UserError, match="no instance type for --gpu B200:1, X9:1"):
        lambda_cloud.lambda_up(store, "lam", ["B200:1", "X9:1"], wait_s=0.1, poll_s=0.02)
    assert not lambda_api.calls("POST", "/instance-operations/launch")


def test_lambda_lost_launch_answer_is_adopted_never_relaunched(lambda_api, store, sshd_server,
                                                               tmp_path):
    lambda_api.capacity["gpu_1x_a10"] = {"us-east-1"}
    lambda_api.fail_after("POST", "/instance-operations/launch", 502)
    box, _ = _lambda_up(store, sshd_server, tmp_path, ["H100:1", "A10:1"])
    assert len(lambda_api.calls("POST", "/instance-operations/launch")) == 1
    assert len(lambda_api.instances) == 1
    (event,) = _events(store, "lam")
    assert event["adopted"] is True and event["instance_id"] == box.extra["instance_id"]


# vast.ai -----------------------------------------------------------------------------------

def _vast_request(tmp_path, sshd, gpus: list[str], **resources) -> Request:
    messages: list[str] = []
    request = Request(name="vb", resources=Resources(gpu=gpus[0], gpu_alternatives=gpus,
                                                     image=IMAGE, disk="20G", **resources),
                      data_dir=str(tmp_path / "ws"),
                      options={"identity": str(sshd.client_key)}, on_wait=messages.append)
    return request


def test_vast_skips_a_gpu_with_no_offer(vast_api, store, sshd_server, tmp_path):
    vast_api.offers = [offer(301, gpu="A100 PCIE", dph=1.1), offer(302, gpu="RTX 4090")]
    vast_api.ssh_port = sshd_server.port
    request = _vast_request(tmp_path, sshd_server, ["H100_SXM:1", "A100_PCIE:1", "RTX_4090:1"])
    said: list[str] = []
    request.on_wait = said.append
    box = platform_for("vastai").provision(store, request)
    (create,) = vast_api.calls("PUT", "/asks/")
    assert create.path.endswith("/asks/301/") and box.extra["offer_id"] == 301
    assert len(vast_api.instances) == 1
    assert any("skipped H100_SXM:1: no verified, reliable offer" in m and
               m.endswith("; trying A100_PCIE:1") for m in said), said


def test_vast_none_available_is_refused_naming_every_gpu(vast_api, store, sshd_server,
                                                          tmp_path):
    vast_api.offers = [offer(302, gpu="RTX 4090")]
    request = _vast_request(tmp_path, sshd_server, ["H100_SXM:1", "A100_PCIE:1"])
    with pytest.raises(UserError) as err:
        platform_for("vastai").provision(store, request)
    text = str(err.value)
    assert "no vast.ai offer for any GPU asked for" in text and "nothing was rented" in text
    assert "H100_SXM:1: no verified" in text and "A100_PCIE:1: no verified" in text
    assert not vast_api.calls("PUT", "/asks/")


def test_vast_offer_taken_before_the_create_tries_the_next(vast_api, store, sshd_server,
                                                           tmp_path):
    vast_api.offers = [offer(301, gpu="H100 SXM", dph=2.0), offer(302, gpu="RTX 4090")]
    vast_api.ssh_port = sshd_server.port
    searched = vast_api.handle

    def handle(req):  # someone else rents 301 between rgt's search and its create
        answer = searched(req)
        if req.method == "POST" and "/bundles" in req.path and \
                (req.body or {}).get("id") == {"eq": 301}:
            vast_api.offers[0]["rented"] = True
        return answer

    vast_api.handle = handle
    request = _vast_request(tmp_path, sshd_server, ["H100_SXM:1", "RTX_4090:1"])
    said: list[str] = []
    request.on_wait = said.append
    box = platform_for("vastai").provision(store, request)
    assert [c.path.rsplit("/", 2)[-2] for c in vast_api.calls("PUT", "/asks/")] == \
        ["301", "302"]
    assert box.extra["offer_id"] == 302 and len(vast_api.instances) == 1
    assert any("taken before the create" in m for m in said), said


def test_vast_offer_with_alternatives_is_refused(vast_api, store, sshd_server, tmp_path):
    request = _vast_request(tmp_path, sshd_server, ["H100_SXM:1", "RTX_4090:1"])
    request.options["offer"] = 301
    with pytest.raises(UserError, match="--offer names one machine"):
        platform_for("vastai").provision(store, request)
    assert not vast_api.requests


def test_up_cli_takes_a_comma_list_of_gpus(vast_api, store, sshd_server, tmp_path):
    vast_api.offers = [offer(302, gpu="RTX 4090")]
    vast_api.ssh_port = sshd_server.port
    result = rgt_cli("up", "vb", "--profile", "vastai", "--gpu", "H100_SXM:1,RTX_4090:1",
                     "--image", IMAGE, "--disk", "20", "--identity", str(sshd_server.client_key),
                     "--data-dir", str(tmp_path / "ws"))
    assert result.returncode == 0, result.stderr
    assert "skipped H100_SXM:1" in result.stderr and "trying RTX_4090:1" in result.stderr
    assert len(vast_api.calls("PUT", "/asks/")) == 1
    bad = rgt_cli("up", "vc", "--profile", "vastai", "--gpu", "H100:1,,A100", "--image", IMAGE)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "several separated by commas" in bad.stderr


# RunPod ------------------------------------------------------------------------------------

def test_runpod_skips_a_gpu_without_stock(keyed, store, sshd_server, tmp_path):
    keyed.gpus[1]["_stock"] = {}  # no H100 SXM anywhere
    box, messages = rent_runpod(store, sshd_server, tmp_path, ["H100 SXM:1", "RTX4090:1"])
    (create,) = keyed.calls("POST", "/v2/pods")
    assert create.body["gpu"] == {"id": "NVIDIA GeForce RTX 4090", "count": 1}
    assert box.extra["gpu"] == "NVIDIA GeForce RTX 4090" and len(keyed.pods) == 1
    assert any(m.startswith("skipped H100 SXM:1: RunPod lists no H100 SXM stock")
               and m.endswith("; trying RTX4090:1") for m in messages), messages


def test_runpod_create_refused_for_want_of_machines_tries_the_next(keyed, store, sshd_server,
                                                                   tmp_path):
    listed = keyed.handle

    def handle(req):  # the H100s listed in stock are taken before rgt's create
        answer = listed(req)
        if req.path.startswith("/v2/catalog"):
            keyed.gpus[1]["_stock"] = {}
        return answer

    keyed.handle = handle
    box, messages = rent_runpod(store, sshd_server, tmp_path, ["H100 SXM:1", "RTX4090:1"])
    creates = keyed.calls("POST", "/v2/pods")
    assert [c.body["gpu"]["id"] for c in creates] == ["NVIDIA H100 80GB HBM3",
                                                     "NVIDIA GeForce RTX 4090"]
    assert len(keyed.pods) == 1 and box.extra["gpu"] == "NVIDIA GeForce RTX 4090"
    assert any("RunPod could not place it" in m for m in messages), messages


def test_runpod_lost_create_answer_is_adopted_never_recreated(keyed, store, sshd_server,
                                                              tmp_path):
    keyed.fail_after("POST", "/v2/pods", 502)
    box, _ = rent_runpod(store, sshd_server, tmp_path, ["H100 SXM:1", "RTX4090:1"])
    assert len(keyed.calls("POST", "/v2/pods")) == 1 and len(keyed.pods) == 1
    (event,) = _events(store, "rp")
    assert event["adopted"] is True and event["gpu"] == "NVIDIA H100 80GB HBM3"
    assert box.extra["instance_id"] == event["instance_id"]


def test_runpod_none_available_is_refused_naming_every_gpu(keyed, store):
    keyed.gpus[1]["_stock"] = {}
    with pytest.raises(UserError) as err:
        runpod.runpod_up(store, "rp", ["H100 SXM:1", "B200:1"], RUNPOD_IMAGE, poll_s=0.02)
    text = str(err.value)
    assert text.startswith("RunPod has none of the GPUs asked for (H100 SXM:1: RunPod lists "
                           "no H100 SXM stock")
    assert "B200:1: RunPod has no GPU type 'B200'" in text and "nothing was created" in text
    assert not keyed.calls("POST", "/v2/pods")


# rgt offers / rgt cloud-status, by profile -------------------------------------------------

def test_offers_lambda_lists_types_with_capacity(lambda_api):
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-west-1", "us-east-1"}
    shown = rgt_cli("offers", "--profile", "lambda", "--gpu", "H100:1")
    assert shown.returncode == 0, shown.stderr
    assert "gpu_1x_h100_pcie" in shown.stdout and "us-east-1, us-west-1" in shown.stdout
    assert "gpu_1x_a10" not in shown.stdout and "--profile lambda" in shown.stdout
    rows = json.loads(rgt_cli("offers", "-p", "lambda", "--json").stdout)["offers"]
    assert [r["id"] for r in rows] == ["gpu_1x_a10", "gpu_1x_h100_pcie", "gpu_8x_h100_sxm5"]
    none = rgt_cli("offers", "-p", "lambda", "--gpu", "H100:1", "--region", "europe-central-1")
    assert none.returncode == 1 and "has capacity in europe-central-1" in none.stderr


def test_offers_runpod_lists_stock(runpod_api):
    shown = rgt_cli("offers", "--profile", "runpod", "--gpu", "A6000", "--json")
    assert shown.returncode == 0, shown.stderr
    (row,) = json.loads(shown.stdout)["offers"]
    assert row["id"] == "NVIDIA RTX A6000" and row["stock"] == {"EU-RO-1": "LOW"}
    table = rgt_cli("offers", "-p", "runpod", "--cloud", "community", "--max-price", "0.5")
    assert table.returncode == 0, table.stderr
    assert "RTX 4090" in table.stdout and "H100" not in table.stdout


def test_offers_take_the_gpu_count_from_num_gpus_alone_or_agreeing(runpod_api, lambda_api):
    runpod_api.gpus[0]["maxCount"] = {"secure": 1, "community": 1}  # RTX 4090: 1 per pod
    shown = rgt_cli("offers", "-p", "runpod", "--num-gpus", "2", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)["offers"]
    assert [r["id"] for r in rows] == ["NVIDIA RTX A6000", "NVIDIA H100 80GB HBM3"], rows
    assert {r["count"] for r in rows} == {2} and rows[0]["usd_per_hour"] == 0.98
    for profile in ("runpod", "vastai", "lambda"):
        both = rgt_cli("offers", "-p", profile, "--gpu", "H100:1", "--num-gpus", "8")
        assert both.returncode == 2, both.stdout + both.stderr
        (line,) = both.stderr.strip().splitlines()
        assert "--gpu H100:1 and --num-gpus 8 disagree" in line
    lambda_api.capacity["gpu_8x_h100_sxm5"] = {"us-east-1"}
    eight = rgt_cli("offers", "-p", "lambda", "--gpu", "H100", "--num-gpus", "8", "--json")
    assert [r["id"] for r in json.loads(eight.stdout)["offers"]] == ["gpu_8x_h100_sxm5"]


def test_offers_on_a_platform_without_them_is_one_line(home):
    for profile, word in (("slurm", "slurm"), ("kubernetes", "kubernetes")):
        result = rgt_cli("offers", "--profile", profile)
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert f"--profile {word} has no offers to list" in line
        assert "lambda" in line and "vastai" in line and "runpod" in line


def test_offers_refuses_another_platforms_filter(lambda_api):
    result = rgt_cli("offers", "-p", "lambda", "--min-reliability", "0.9")
    assert result.returncode == 2 and "--min-reliability does not apply" in result.stderr
    spot = rgt_cli("offers", "-p", "runpod", "--interruptible")
    assert spot.returncode == 2 and "no interruptible" in spot.stderr


def test_cloud_status_dispatches_by_profile(keyed, store):
    pod = keyed.add_pod("rp")
    store.add_box(Box(name="rp", profile="runpod", connection={"host": "127.0.0.1"},
                      data_dir="/workspace", durable_dir="/workspace", rate=None, state="up",
                      created=time.time(), extra={"instance_id": pod["id"]}))
    shown = rgt_cli("cloud-status", "rp", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["instance"]["state"] == "running"
    store.add_box(Box(name="mine", profile="generic-ssh", connection={"host": "x"},
                      data_dir="/d", durable_dir="/d", rate=None, state="up",
                      created=time.time()))
    refused = rgt_cli("cloud-status", "mine")
    assert refused.returncode == 2 and "was not rented through an API" in refused.stderr
