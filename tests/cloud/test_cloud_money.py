"""Control planes that never pay twice (issue 12): a create is never retried blindly, a capacity
race is paced to Lambda's documented limits within --wait, a vast.ai list that pages is read to
the end, and errors name their real cause. The real client code runs against the fake servers."""

from __future__ import annotations

import json
import time

import pytest
from cloudkit import IMAGE, rgt_cli
from fake_vast_api import offer

from rgt.errors import UserError
from rgt.platforms.http import ApiError
from rgt.platforms.lambda_cloud import platform as lambda_cloud
from rgt.platforms.vastai import api as vast
from rgt.platforms.vastai import platform as vastai
from rgt.store import Box


def _launch_events(store, box: str) -> list[dict]:
    rows = store.db.execute("SELECT detail FROM events WHERE box=? AND kind='cloud-launch'",
                            (box,)).fetchall()
    return [json.loads(r["detail"]) for r in rows]


# item 2: creates are idempotent ----------------------------------------------------------

@pytest.mark.parametrize("answer", [502, 0], ids=["502-after-launch", "dropped-after-launch"])
def test_lambda_launch_answer_lost_after_work_gives_one_instance_recorded(
        lambda_api, store, sshd_server, tmp_path, answer):
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-east-1"}
    lambda_api.add_instance("active", name="lam")  # an older one of the same name: not ours
    lambda_api.fail_after("POST", "/instance-operations/launch", answer)
    box = lambda_cloud.lambda_up(store, "lam", "H100:1", poll_s=0.02, ssh_user="root",
                                 identity=str(sshd_server.client_key), ssh_port=sshd_server.port,
                                 data_dir=str(tmp_path / "nvme"))
    assert len(lambda_api.calls("POST", "/instance-operations/launch")) == 1  # never twice
    assert len(lambda_api.instances) == 2  # the older one and exactly one new one
    new = [i for i in lambda_api.instances.values() if i["id"] != "inst-0001"]
    assert box.extra["instance_id"] == new[0]["id"] == "inst-0002"
    (event,) = _launch_events(store, "lam")
    assert event["instance_id"] == "inst-0002" and event["adopted"] is True


def test_lambda_lost_answer_with_nothing_made_never_relaunches(lambda_api, store):
    """A 502 the client cannot tell from a lost answer: it looks (and finds nothing), and
    stops with advice rather than launching a second time."""
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-east-1"}
    lambda_api.fail_before("POST", "/instance-operations/launch", 502)
    with pytest.raises(UserError, match="did not launch again"):
        lambda_cloud.lambda_up(store, "lam", "H100:1", poll_s=0.01)
    assert len(lambda_api.calls("POST", "/instance-operations/launch")) == 1
    assert not lambda_api.instances
    assert len(lambda_api.calls("GET", "/instances")) == 1 + 5  # before, then 5 looks


@pytest.mark.parametrize("answer", [502, 0], ids=["502-after-create", "dropped-after-create"])
def test_vast_create_answer_lost_after_work_gives_one_instance_recorded(
        vast_api, store, sshd_server, tmp_path, answer):
    vast_api.offers = [offer(201)]
    vast_api.ssh_port = sshd_server.port
    vast_api.page_size = 1  # and the listing pages: the adoption must read every page
    other = vast_api.offers[0].copy()
    vast_api.offers.append({**other, "id": 202})
    vast_api.add_instance(202, IMAGE)  # someone else's instance, listed on page one
    vast_api.fail_after("PUT", "/asks/201", answer)
    box = vastai.vast_up(store, "vb", 201, IMAGE, 20, poll_s=0.02,
                         identity=str(sshd_server.client_key), data_dir=str(tmp_path / "ws"))
    assert len(vast_api.calls("PUT", "/asks/")) == 1  # never twice
    assert len(vast_api.instances) == 2
    mine = [i for i in vast_api.instances.values() if i["label"] == "vb"]
    assert len(mine) == 1 and box.extra["instance_id"] == mine[0]["id"]
    (event,) = _launch_events(store, "vb")
    assert event["instance_id"] == mine[0]["id"] and event["adopted"] is True


# item 1: the capacity race -----------------------------------------------------------------

def test_capacity_race_is_paced_and_bounded_by_wait(lambda_api, store, monkeypatch):
    """Capacity listed, every launch refused: one launch per (scaled) 10 s, one request per
    (scaled) 1 s, and the whole --wait honoured. Counts what the fake received."""
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-east-1"}
    lambda_api.launch_interval_s = 10 * 0.005  # the documented limit, at the tests' scale
    lambda_api.race = True
    wait_s = 1.0
    started = time.monotonic()
    with pytest.raises(UserError, match="refused .* launches as insufficient-capacity"):
        lambda_cloud.lambda_up(store, "lam", "H100:1", wait_s=wait_s, poll_s=0.02)
    took = time.monotonic() - started
    launches = len(lambda_api.calls("POST", "/instance-operations/launch"))
    print(f"capacity race: {launches} launches, {len(lambda_api.requests)} requests in "
          f"{took:.2f} s (wait {wait_s} s)")
    assert lambda_api.rate_limited == 0  # never tripped the documented launch limit
    assert 2 <= launches <= wait_s / (10 * 0.005) + 1
    assert len(lambda_api.requests) <= wait_s / 0.005 + 5
    assert took < wait_s + 0.5  # --wait is the whole budget: no launch past it


# item 3: pagination -----------------------------------------------------------------------

def test_vast_lists_every_page_and_missing_is_not_gone(vast_api, store):
    vast_api.offers = [offer(300 + n) for n in range(30)]
    ids = [vast_api.add_instance(300 + n, IMAGE) for n in range(30)]
    vast_api.page_size = 25
    api = vast.client()
    listed = vast.list_instances(api)
    assert [i["id"] for i in listed] == ids  # 25 + 5: both pages
    pages = vast_api.calls("GET", "/instances")
    assert [r.query.get("after_token") for r in pages] == [None, "25"]
    # the last instance is on page two: a one-page reader calls it gone; a direct look does not
    box = Box(name="vb", profile="vastai", connection={"host": "h"}, data_dir="/w",
              durable_dir="/w", rate=0.4, state="up", created=0,
              extra={"platform": "vastai", "instance_id": ids[-1]})
    store.add_box(box)
    status = vastai.instance_status(store, box)
    assert status["state"] != "gone"
    vast_api.instances.pop(ids[-1])  # now really gone: the direct lookup says null
    assert vastai.instance_status(store, box)["state"] == "gone"


def test_vast_destroy_is_confirmed_by_lookup_not_by_a_missing_row(vast_api, store):
    vast_api.offers = [offer(400 + n) for n in range(3)]
    ids = [vast_api.add_instance(400 + n, IMAGE) for n in range(3)]
    vast_api.page_size = 1  # its row is never on page one
    vast_api.destroy_polls = 3
    box = Box(name="vb", profile="vastai", connection={"host": "h"}, data_dir="/w",
              durable_dir="/w", rate=0.4, state="up", created=0,
              extra={"platform": "vastai", "instance_id": ids[-1]})
    store.add_box(box)
    outcome = vastai.VastPlatform().release(store, box).what
    assert "destroyed" in outcome
    looks = vast_api.calls("GET", f"/instances/{ids[-1]}")
    assert len(looks) == 4  # still there for 3 looks, then null: confirmed by the lookup


# item 7 and 6: errors and statuses -------------------------------------------------------

def test_lambda_account_inactive_is_named(lambda_api, store):
    lambda_api.account_inactive = True
    with pytest.raises(ApiError, match="account is inactive") as err:
        lambda_cloud.capacity("H100:1")
    assert "LAMBDA_API_KEY is missing" not in str(err.value)
    result = rgt_cli("up", "lam", "--profile", "lambda", "--gpu", "H100:1", "--wait", "0.2")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "account is inactive" in result.stderr and "global/account-inactive" in result.stderr


def test_a_redirect_is_a_clear_error_never_a_traceback(lambda_api, store):
    lambda_api.redirect_to = "https://cloud.lambda.ai/login"
    with pytest.raises(ApiError, match="redirect .*HTTP 301 to https://cloud.lambda.ai/login"):
        lambda_cloud.capacity("H100:1")
    result = rgt_cli("up", "lam", "--profile", "lambda", "--gpu", "H100:1", "--wait", "0.2")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "redirect" in result.stderr
    assert len(lambda_api.requests) == 2  # one each: a redirect is not retried or followed


def test_vast_429_keeps_the_apis_detail(vast_api, monkeypatch):
    vast_api.offers = [offer(501)]
    vast_api.rate_limit_next = 99
    with pytest.raises(ApiError, match="too frequent: endpoint threshold"):
        vast.offers("RTX_4090")


@pytest.mark.parametrize("status,billing", [("booting", True), ("active", True),
                                            ("unhealthy", True), ("terminating", True),
                                            ("terminated", False), ("preempted", False),
                                            ("surprise", True)])
def test_every_lambda_status_has_a_state_and_a_bill(lambda_api, status, billing):
    inst = lambda_api.add_instance(status)
    box = Box(name="lam", profile="lambda", connection={"host": "h"}, data_dir="/h",
              durable_dir="/h", rate=2.49, state="up", created=0,
              extra={"platform": "lambda", "instance_id": inst["id"]})
    shown = lambda_cloud.instance_status(box)
    assert shown["billing"] is billing
    if status == "preempted":
        assert "preempted" in shown["advice"] and "resume" in shown["advice"]


def test_preempted_while_booting_ends_the_wait(lambda_api):
    inst = lambda_api.add_instance("preempted")
    with pytest.raises(UserError, match="went preempted"):
        lambda_cloud.LambdaPlatform().wait_ready(lambda_cloud.client(), inst["id"], wait_s=5,
                                                 poll_s=0.01, on_wait=lambda _: None)


# item 5: limits the fakes enforce, refused by rgt first ------------------------------------

def test_over_limit_onstart_and_env_refused_before_create(vast_api, store, monkeypatch):
    vast_api.offers = [offer(601)]
    with pytest.raises(UserError, match="at most 4096"):
        vastai.vast_up(store, "vb", 601, IMAGE, 20, onstart="echo " + "x" * 4100)
    monkeypatch.setenv("HF_TOKEN", "h" * 300)
    with pytest.raises(UserError, match="HF_TOKEN is longer than 256"):
        vastai.vast_up(store, "vb", 601, IMAGE, 20, secrets=("HF_TOKEN",))
    assert not vast_api.calls("PUT", "/asks/")
    status, answer = vast_api._create(601, {"image": IMAGE, "disk": 20, "runtype": "ssh",
                                            "onstart": "x" * 4097})
    assert status == 400 and "4096" in answer["msg"]  # the fake refuses it too


def test_lambda_name_over_64_refused_before_launch(lambda_api, store):
    lambda_api.capacity["gpu_1x_h100_pcie"] = {"us-east-1"}
    with pytest.raises(UserError, match="at most 64"):
        lambda_cloud.lambda_up(store, "n" * 65, "H100:1")
    assert not lambda_api.calls("POST", "/instance-operations/launch")


def test_vast_search_quota_429_is_not_retried(vast_api):
    vast_api.offers = [offer(502)]
    vast_api.search_quota_next = 5
    with pytest.raises(ApiError, match="daily search quota.*resets at 20") as err:
        vast.offers("RTX_4090")
    assert "Daily search quota exceeded" in str(err.value)
    assert len(vast_api.calls("POST", "/bundles")) == 1  # a retry would only spend more of it


@pytest.mark.parametrize("intended,state", [("running", "loading"), ("stopped", "stopped")])
def test_vast_null_actual_status_is_billing(vast_api, store, intended, state):
    vast_api.offers = [offer(601)]
    iid = vast_api.add_instance(601, IMAGE)
    vast_api.set_state(iid, actual_status=None, intended_status=intended, status_msg=None)
    box = Box(name="n", profile="vastai", connection={"host": "h"}, data_dir="/w",
              durable_dir="/w", rate=0.4, state="up", created=0,
              extra={"platform": "vastai", "instance_id": iid})
    store.add_box(box)
    status = vastai.instance_status(store, box)
    assert status["actual"] == "" and status["state"] == state and status["billing"] is True
