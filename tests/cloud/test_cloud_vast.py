"""vast.ai: the real client against the fake API (tests/cloud/fakes/fake_vast_api.py)."""

from __future__ import annotations

import json
import socket

import pytest
from cloudkit import IMAGE, VAST_KEY, rgt_cli
from fake_vast_api import offer

from rgt.errors import UserError
from rgt.platforms.vastai import api as vast
from rgt.platforms.vastai import platform as vastai

SAFE = {"verified": {"eq": True}, "rentable": {"eq": True}, "direct_port_count": {"gte": 1},
        "reliability2": {"gte": 0.98}}


def _market(fake):
    fake.offers = [
        offer(101, dph=0.55), offer(102, dph=0.35, up=0.02, down=0.01),
        offer(103, dph=0.20, verified=False), offer(104, dph=0.25, reliability=0.90),
        offer(105, dph=0.30, direct=0), offer(106, dph=0.45, cuda=12.2),
        offer(107, dph=0.40, gpu="RTX 3090"),
    ]


def test_offer_search_sends_the_safe_filters_and_ranks(vast_api):
    _market(vast_api)
    vast_api.required_query = {**SAFE, "gpu_name": {"eq": "RTX 4090"}}  # the fake asserts q
    rows = vast.offers("RTX_4090", max_price=0.5)
    assert [o.id for o in rows] == [102, 106]  # cheapest first; unsafe hosts and $0.55 gone
    (search,) = vast_api.calls("POST", "/bundles")  # the documented form: the query is the body
    assert vast_api.calls("GET", "/bundles") == [] and search.query == {}
    q = search.body
    assert q["dph_total"] == {"lte": 0.5} and q["order"] == [["dph_total", "asc"]]
    assert rows[0].bandwidth_up_usd_per_gb == 0.02  # VAST9 shown next to $/h
    assert rows[1].cuda_max_good == 12.2 and rows[1].driver_version


def test_offers_filtered_client_side_too(vast_api):
    """A marketplace answer is a claim: unsafe rows are dropped even if the server sends them."""
    _market(vast_api)
    vast_api.ignore_filters = True
    assert [o.id for o in vast.offers("RTX_4090")] == [102, 107, 106, 101]
    assert {o.id for o in vast.offers("RTX_4090", min_reliability=0.5)} >= {104}


def test_offers_cli_json(vast_api):
    _market(vast_api)
    result = rgt_cli("offers", "--gpu", "RTX_4090", "--max-price", "0.5", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["offers"]
    assert [r["id"] for r in rows] == [102, 106]
    assert {"usd_per_hour", "bandwidth_up_usd_per_gb", "reliability", "cuda_max_good",
            "driver_version", "disk_gb"} <= set(rows[0])


def test_offers_cli_says_what_matched_nothing(vast_api):
    _market(vast_api)
    none = rgt_cli("offers", "--gpu", "B200")
    assert none.returncode == 1 and none.stdout == ""
    assert none.stderr.strip() == ("no B200 offers match (reliability ≥ 0.98); check the GPU "
                                   "name (RTX_4090, H100_SXM) or loosen --max-price or "
                                   "--min-reliability")
    capped = rgt_cli("offers", "--max-price", "0.1")
    assert "(max $0.1/h, reliability ≥ 0.98)" in capped.stderr
    bad = rgt_cli("offers", "--limit", "0")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --limit 0: give the number of offers to show, 1 or more"]
    assert len(vast_api.calls("POST", "/bundles")) == 2  # the bad --limit asked nothing


def test_cli_401_names_the_variable_and_never_prints_the_key(vast_api, monkeypatch):
    monkeypatch.setenv("VAST_API_KEY", "bad-" + VAST_KEY)
    result = rgt_cli("offers")
    assert result.returncode == 2
    assert "VAST_API_KEY is missing or wrong" in result.stderr
    assert VAST_KEY not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_create_waits_through_loading_and_registers(vast_api, store, sshd_server, tmp_path,
                                                    monkeypatch):
    _market(vast_api)
    vast_api.ssh_port = sshd_server.port
    monkeypatch.setenv("HF_TOKEN", "hf_s3cr3t_value")
    messages: list[str] = []
    box = vastai.vast_up(store, "v", 102, IMAGE, 40, onstart="echo hello",
                         secrets=("HF_TOKEN",), on_wait=messages.append,
                         identity=str(sshd_server.client_key),
                         data_dir=str(tmp_path / "workspace"))
    (create,) = vast_api.calls("PUT", "/asks/102")
    assert create.body["runtype"] == "ssh_direct" and create.body["disk"] == 40
    assert create.body["env"] == {"HF_TOKEN": "hf_s3cr3t_value"}  # VAST11: env at create
    assert "hf_s3cr3t_value" not in create.body["onstart"] and "HF_TOKEN" not in create.body[
        "onstart"]
    assert "runner.py" in create.body["onstart"] and "echo hello" in create.body["onstart"]
    assert any("loading — Pulling image" in m and "3/10" in m for m in messages)  # VAST13
    assert box.connection["port"] == sshd_server.port  # the mapped port, not 22 (VAST6)
    assert box.extra["instance_id"] == 9000001 and box.extra["ssh"].startswith("direct")
    # the rate includes the 40 GB disk the instance bills: $0.15/GB/month over 730 h
    assert box.rate == pytest.approx(0.35 + 0.15 * 40 / 730) and "uname" in box.extra
    (lookup,) = vast_api.calls("POST", "/bundles")
    assert lookup.body == {"id": {"eq": 102}, "allocated_storage": 40}


def test_an_instance_that_never_answers_ssh_is_reported_billing(vast_api, store):
    _market(vast_api)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        vast_api.ssh_port = sock.getsockname()[1]
    messages: list[str] = []
    with pytest.raises(UserError) as err:
        vastai.vast_up(store, "v", 102, IMAGE, 40, on_wait=messages.append)
    text = str(err.value)
    assert "instance 9000001 is running (and BILLING)" in text and "destroy it" in text
    assert f"ssh -p {vast_api.ssh_port} root@127.0.0.1" in text and "cannot reach" in text
    assert sum("SSH not answering yet" in m for m in messages) == 9  # 10 tries, then the error
    assert store.find_box("v") is None


def test_a_registration_error_other_than_ssh_is_not_retried(vast_api, store, sshd_server):
    _market(vast_api)
    vast_api.ssh_port = sshd_server.port
    messages: list[str] = []
    with pytest.raises(UserError) as err:
        vastai.vast_up(store, "v", 102, IMAGE, 40, on_wait=messages.append,
                       identity=str(sshd_server.client_key), data_dir="/proc/rgt-unwritable")
    assert "(and BILLING)" in str(err.value) and "cannot create /proc/rgt-unwritable" in str(
        err.value)
    assert not any("SSH not answering" in m for m in messages)
    assert store.find_box("v") is None


def test_bid_is_fixed_at_create(vast_api, store, sshd_server, tmp_path):
    _market(vast_api)
    vast_api.ssh_port = sshd_server.port
    with pytest.raises(UserError, match="below"):
        vastai.vast_up(store, "v", 102, IMAGE, 40, bid=0.05)
    messages: list[str] = []
    box = vastai.vast_up(store, "v", 102, IMAGE, 40, bid=0.2, on_wait=messages.append,
                         identity=str(sshd_server.client_key),
                         data_dir=str(tmp_path / "workspace"))
    assert vast_api.calls("PUT", "/asks/102")[-1].body["price"] == 0.2
    assert any("cannot be raised" in m for m in messages)
    assert box.extra["interruptible_bid"] == 0.2
    assert box.rate == pytest.approx(0.2 + 0.15 * 40 / 730)  # the bid is compute; disk on top


def test_image_cuda_newer_than_host_driver_is_refused(vast_api, store):
    _market(vast_api)
    with pytest.raises(UserError) as err:
        vastai.vast_up(store, "v", 106, IMAGE, 40)  # host cuda_max_good 12.2 < image 12.4
    assert "VAST5" in str(err.value) and "12.4" in str(err.value) and "12.2" in str(err.value)
    assert not vast_api.calls("PUT", "/asks")


@pytest.mark.parametrize("image,cuda", [
    (IMAGE, 12.4), ("nvidia/cuda:12.1.1-runtime-ubuntu22.04", 12.1),
    ("vastai/pytorch:cuda-11.8", 11.8), ("ubuntu:22.04", None)])
def test_image_cuda_parse(image, cuda):
    assert vast.image_cuda(image) == cuda


def test_secret_in_onstart_is_refused(vast_api, store):
    _market(vast_api)
    with pytest.raises(UserError, match="VAST11"):
        vastai.vast_up(store, "v", 102, IMAGE, 40, onstart="export WANDB_API_KEY=abc123; run")
    assert not vast_api.calls("PUT", "/asks")


def _inst(actual, intended="running", msg="", cur="running"):
    return {"actual_status": actual, "intended_status": intended, "cur_state": cur,
            "status_msg": msg}


def test_status_mapping():
    assert vast.vast_status(_inst("running"))["state"] == "running"
    paused = vast.vast_status(_inst("exited", cur="stopped"))
    assert paused["state"] == "paused" and paused["gotcha"] == "VAST4"
    assert vast.vast_status(_inst("loading", msg="Pulling"))["gotcha"] == "VAST13"
    assert vast.vast_status(_inst("scheduling"), scheduling_for_s=10)["state"] == "scheduling"
    stuck = vast.vast_status(_inst("scheduling"), scheduling_for_s=600)
    assert stuck["state"] == "stuck-scheduling" and stuck["gotcha"] == "VAST3"
    assert "NEW instance" in stuck["advice"]
    offline = vast.vast_status(_inst("offline"))
    assert offline["state"] == "offline" and offline["gotcha"] == "VAST7"
    stopped = vast.vast_status(_inst("exited", intended="stopped", cur="stopped"))
    assert stopped["gotcha"] == "VAST1" and "KEEPS BILLING" in stopped["advice"]
    assert vast.vast_status(None)["state"] == "gone"


def test_preempted_shows_paused_and_scheduling_turns_stuck(vast_api, store):
    from rgt.store import Box

    _market(vast_api)
    instance_id = vast_api.add_instance(102, IMAGE)
    inst = vast_api.instances[instance_id]
    inst.update(_boot=[], actual_status="exited", cur_state="stopped", status_msg="outbid")
    store.add_box(Box("v", "vastai", {"host": "127.0.0.1"}, "/workspace", "/workspace", 0.3,
                      "up", 0, extra={"instance_id": instance_id}))
    assert vastai.instance_status(store, store.box("v"))["state"] == "paused"
    inst.update(actual_status="scheduling", status_msg="Scheduling: waiting for GPU")
    first = vastai.instance_status(store, store.box("v"))
    assert first["state"] == "scheduling" and "scheduling_since" in store.box("v").extra
    assert first["ssh"] == "proxy ssh5.vast.ai:31234"  # the fake's proxy endpoint
    store.update_box("v", extra={**store.box("v").extra, "scheduling_since": 1.0})  # long ago
    stuck = vastai.instance_status(store, store.box("v"))
    assert stuck["state"] == "stuck-scheduling" and stuck["gotcha"] == "VAST3"
    result = rgt_cli("cloud-status", "v")
    assert result.returncode == 0, result.stderr
    assert "stuck-scheduling (VAST3)" in result.stdout and "waiting for GPU" in result.stdout


def test_stop_warns_that_the_disk_keeps_billing(vast_api, store):
    from rgt.store import Box

    _market(vast_api)
    instance_id = vast_api.add_instance(102, IMAGE)
    box = Box("v", "vastai", {"host": "h"}, "/w", "/w", 0.3, "up", 0,
              extra={"instance_id": instance_id})
    message = vastai.set_state(box, "stopped")
    assert "KEEPS BILLING" in message and "VAST1" in message
    assert vast_api.instances[instance_id]["intended_status"] == "stopped"


def test_down_on_a_hand_registered_box_says_what_to_do(vast_api, store):
    """A vastai box registered with `rgt up` has no instance id: say the manual step, call
    nothing (the API is not touched)."""
    from rgt.platforms import platform_for
    from rgt.store import Box

    box = Box("h", "vastai", {"host": "h"}, "/w", "/w", 0.3, "up", 0)
    message = platform_for("vastai").release(store, box).what
    assert "destroy it yourself" in message and "VAST1" in message
    assert vast_api.requests == []
