"""RunPod: the real client against the fake REST API v2 (tests/cloud/fakes/fake_runpod_api.py),
and each "pod" is the real sshd on 127.0.0.1, reached through a port the fake publishes anew on
every start (RP6)."""

from __future__ import annotations

import time

import pytest
from cloudkit import RUNPOD_IMAGE as IMAGE
from cloudkit import RUNPOD_KEY, rent_runpod

from rgt.errors import UserError
from rgt.platforms import platform_for
from rgt.platforms.runpod import platform as runpod
from rgt.store import Box, Run


def test_rents_with_a_network_volume_pinned_to_its_data_centre(keyed, store, sshd_server,
                                                                 tmp_path):
    vol = keyed.add_volume("ckpts", "EU-RO-1", size=200)
    box, messages = rent_runpod(store, sshd_server, tmp_path, volume="ckpts")
    (create,) = keyed.calls("POST", "/v2/pods")
    assert create.body == {
        "name": "rp", "image": IMAGE, "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 1},
        "cloud": "SECURE", "disk": 20, "ports": ["22/tcp"], "startSsh": True,
        "mounts": {"network": [{"volumeId": vol["id"], "path": "/workspace"}]},
        "dataCenterIds": ["EU-RO-1"]}  # RP7: the volume's data centre, attached at creation
    pod_id = box.extra["instance_id"]
    assert keyed.pods[pod_id]["dataCenterId"] == "EU-RO-1"
    assert box.state == "up" and box.profile == "runpod" and "uname" in box.extra
    assert box.connection["port"] == keyed.pods[pod_id]["_relay"].port  # ssh.direct, not 22
    assert box.rate == pytest.approx(0.69)
    assert box.extra["network_volume"]["id"] == vol["id"]
    assert any("PROVISIONING" in m for m in messages) and any("STARTING" in m for m in messages)


def test_without_a_volume_the_pod_gets_a_volume_disk_and_a_note(keyed, store, sshd_server,
                                                                  tmp_path):
    keyed.fail_after("POST", "/v2/pods", 0)  # created, then the connection drops unanswered
    box, _ = rent_runpod(store, sshd_server, tmp_path, gpu="RTX A6000:1", container_disk_gb=30,
                         volume_gb=80, cloud="community")
    (create,) = keyed.calls("POST", "/v2/pods")  # adopted by its name, never sent twice
    assert box.extra["instance_id"] in keyed.pods and len(keyed.pods) == 1
    assert create.body["mounts"] == {"persistent": {"size": 80, "path": "/workspace"}}
    assert create.body["cloud"] == "COMMUNITY" and create.body["disk"] == 30
    assert "dataCenterIds" not in create.body
    assert box.extra["volume_disk_gb"] == 80 and "RP3" in box.extra["notes"][0]


@pytest.mark.parametrize("gpu, words", [
    ("B300:1", ["no GPU type 'B300'", "RTX 4090", "H100 SXM", "nothing was created"]),
    ("RTX:1", ["fits several", "RTX 4090", "RTX A6000"]),
    ("RTX4090:9", ["at most 8 GPUs", "nothing was created"]),
    ("RTX4090:x", ["TYPE:COUNT"]),
])
def test_bad_gpu_is_one_clear_line_and_nothing_is_created(keyed, store, gpu, words):
    with pytest.raises(UserError) as err:
        runpod.runpod_up(store, "rp", gpu, IMAGE)
    for word in words:
        assert word in str(err.value), str(err.value)
    assert err.value.exit_code == 2
    assert not keyed.calls("POST", "/v2/pods") and not keyed.pods


def test_volume_in_another_data_centre_is_refused_before_create(keyed, store):
    keyed.add_volume("ckpts", "EU-RO-1")
    with pytest.raises(UserError) as err:
        runpod.runpod_up(store, "rp", "RTX4090:1", IMAGE, volume="ckpts", data_centre="US-TX-3")
    assert "EU-RO-1" in str(err.value) and "US-TX-3" in str(err.value) and "RP7" in str(err.value)
    with pytest.raises(UserError, match="no RunPod network volume 'nope'.*ckpts"):
        runpod.runpod_up(store, "rp", "RTX4090:1", IMAGE, volume="nope")
    keyed.gpus[2]["_stock"] = {"US-TX-3": "LOW"}  # no A6000 where the volume lives
    with pytest.raises(UserError, match="no RTX A6000 stock .* in EU-RO-1.*RP7"):
        runpod.runpod_up(store, "rp", "A6000:1", IMAGE, volume="ckpts")
    assert not keyed.calls("POST", "/v2/pods")


def test_login_key_must_be_registered_before_anything_is_rented(keyed, store, sshd_server,
                                                                 tmp_path):
    registered = keyed.ssh_keys
    keyed.ssh_keys = []
    with pytest.raises(UserError, match="no SSH public key registered"):
        runpod.runpod_up(store, "rp", "RTX4090:1", IMAGE)
    keyed.ssh_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyOnly someone@else"]
    with pytest.raises(UserError, match="not among the SSH keys registered"):
        runpod.runpod_up(store, "rp", "RTX4090:1", IMAGE, identity=str(sshd_server.client_key))
    assert not keyed.calls("POST", "/v2/pods")
    keyed.ssh_keys = [registered[0].rsplit(" ", 1)[0]]  # the same key without its comment
    box, _ = rent_runpod(store, sshd_server, tmp_path)
    assert box.state == "up"


def test_a_lost_create_answer_is_adopted_never_repeated(keyed, store, sshd_server, tmp_path):
    keyed.fail_after("POST", "/v2/pods", 502)  # created, then the answer is lost
    box, _ = rent_runpod(store, sshd_server, tmp_path)
    assert len(keyed.calls("POST", "/v2/pods")) == 1 and len(keyed.pods) == 1
    (pod_id,) = keyed.pods
    assert box.extra["instance_id"] == pod_id


def test_wrong_key_names_the_variable_never_the_key(keyed, store, monkeypatch, caplog):
    monkeypatch.setenv("RUNPOD_API_KEY", "wrong-" + RUNPOD_KEY)
    with pytest.raises(UserError) as err:
        runpod.runpod_up(store, "rp", "RTX4090:1", IMAGE)
    assert "RUNPOD_API_KEY is missing or wrong" in str(err.value)
    assert RUNPOD_KEY not in str(err.value) + caplog.text
    monkeypatch.delenv("RUNPOD_API_KEY")
    before = len(keyed.requests)
    with pytest.raises(UserError, match="RUNPOD_API_KEY is not set"):
        runpod.runpod_up(store, "rp", "RTX4090:1", IMAGE)
    assert len(keyed.requests) == before


def _rented(store, fake, *, volume: dict | None = None, disk_gb: int = 50) -> Box:
    """A box for a pod already running on the fake (what `runpod_up` stores), without the SSH
    registration: these tests ask only the API."""
    fake.ssh_keys = fake.ssh_keys or ["ssh-ed25519 AAAAC3Nza test"]
    pod = fake.add_pod(volume=volume and volume["id"], disk_gb=disk_gb)
    extra = {"platform": "runpod", "instance_id": pod["id"], "gpu_count": 1}
    if volume:
        extra["network_volume"] = {k: volume[k] for k in ("id", "name", "dataCenter", "size",
                                                          "type")}
    else:
        extra["volume_disk_gb"] = disk_gb
    store.add_box(Box(name="rp", profile="runpod",
                      connection={"host": "127.0.0.1", "port": pod["_relay"].port,
                                  "user": "root"},
                      data_dir="/workspace/data", durable_dir="/workspace/ckpt", rate=0.69,
                      state="up", created=time.time(), extra=extra))
    return store.box("rp")


def test_stop_bills_the_volume_disk_double_and_start_finds_the_new_port(runpod_api, store):
    keyed = runpod_api
    box = _rented(store, keyed, disk_gb=100)
    pod_id = box.extra["instance_id"]
    first_port = box.connection["port"]
    said = runpod.set_running(store, box, False)
    assert "RP4" in said and "$20.00/month" in said
    assert keyed.calls("POST", f"/v2/pods/{pod_id}/action")[-1].body == {"action": "stop"}
    (billing,) = store.box("rp").extra["still_billing"]
    assert "100 GB volume disk" in billing and "purged" in billing and "RP2" in billing
    status = runpod.pod_status(store, store.box("rp"))
    assert status["state"] == "stopped" and status["gotcha"] == "RP4"

    said = runpod.set_running(store, store.box("rp"), True)
    assert "runs again with its 1 GPU(s)" in said
    after = store.box("rp")
    assert "still_billing" not in after.extra
    assert after.connection["port"] != first_port  # RP6: a new public port on every start
    assert after.connection["port"] == keyed.pods[pod_id]["_relay"].port


def test_a_start_with_zero_gpus_is_detected(runpod_api, store):
    keyed = runpod_api
    box = _rented(store, keyed)
    runpod.set_running(store, box, False)
    keyed.next_start_gpus = 0  # the host's GPU was rented away while the pod was stopped
    with pytest.raises(UserError) as err:
        runpod.set_running(store, store.box("rp"), True)
    assert "0 of its 1 GPU(s) (RP1)" in str(err.value) and "rgt pull" in str(err.value)
    status = runpod.pod_status(store, store.box("rp"))
    assert status["state"] == "zero-gpu" and status["billing"] is True


def test_watch_gate_follows_the_pod(runpod_api, store):
    keyed = runpod_api
    box = _rented(store, keyed)
    pod_id = box.extra["instance_id"]
    now = time.time()
    store.add_run(Run("r1", "rp", "job", f"{box.data_dir}/rgt/r1", {}, "running", None, now,
                      now))
    run = store.run("rp", "r1")
    platform = platform_for("runpod")
    assert platform.gate(store, box, run) is None  # running with its GPU: probe as usual

    keyed.restart_by_host(pod_id, gpus=0)
    booting = [runpod.pod_status(store, store.box("rp")) for _ in range(keyed.boot_polls)]
    assert {s["state"] for s in booting} == {"booting"}
    back = runpod.pod_status(store, store.box("rp"))
    assert back["state"] == "zero-gpu" and "RP6" in back["moved"]  # the new port, recorded
    assert store.box("rp").connection["port"] == keyed.pods[pod_id]["_relay"].port
    # a zero-GPU pod answers SSH: the probe judges the run, `state` adds RP1 (the lifecycle
    # test runs that part for real)
    assert platform.gate(store, store.box("rp"), run) is None
    assert platform._pod["state"] == "zero-gpu"

    keyed.stop_by_platform(pod_id)
    stopped = platform.gate(store, store.box("rp"), run)
    assert stopped["status"] == "paused" and "stopped (RP4)" in stopped["causes"][0]

    keyed.pods.pop(pod_id)  # terminated in the console
    assert platform.gate(store, store.box("rp"), run)["status"] == "vanished"
    done = Run("r2", "rp", "job", "/w", {}, "succeeded", 0, now, now)
    assert platform.gate(store, store.box("rp"), done)["status"] == "succeeded"


def test_release_polls_until_the_pod_is_gone_and_names_the_volume(runpod_api, store):
    keyed = runpod_api
    box = _rented(store, keyed, volume=keyed.add_volume("ckpts", "EU-RO-1", size=1500))
    pod_id = box.extra["instance_id"]
    keyed.delete_polls = 3
    gets_before = len(keyed.calls("GET", f"/v2/pods/{pod_id}"))
    released = platform_for("runpod").release(store, box)
    assert keyed.calls("DELETE", f"/v2/pods/{pod_id}")
    # 1 look before the delete, then 3 answers of "still there" and the 404 (RP14)
    assert len(keyed.calls("GET", f"/v2/pods/{pod_id}")) - gets_before == 1 + 3 + 1
    assert "confirmed gone after 3 poll(s)" in released.what and pod_id not in keyed.pods
    (billing,) = released.still_billing
    assert "ckpts" in billing and "1500 GB" in billing and "$95.00/month" in billing
    assert store.box("rp").extra["still_billing"] == released.still_billing


def test_release_that_never_sees_the_pod_go_says_it_may_bill(runpod_api, store):
    keyed = runpod_api
    box = _rented(store, keyed)
    keyed.delete_polls = 10**6
    platform = platform_for("runpod")
    platform.confirm_s = 0.2
    with pytest.raises(UserError, match="still shows pod .* may still bill.*RP14"):
        platform.release(store, box)


def test_teardown_notes_say_which_disk_workspace_is(runpod_api, store):
    box = _rented(store, runpod_api, disk_gb=100)
    notes = platform_for("runpod").teardown_notes(store, box)
    assert "container disk (/, 20 GB)" in notes[0] and "RP2" in notes[0]
    assert "100 GB volume disk" in notes[1] and "RP3" in notes[1]
    assert "$20.00/month" in notes[2] and "RP4" in notes[2] and "RP1" in notes[2]
    runpod_api.stop_by_platform(box.extra["instance_id"])  # a low balance stopped it
    assert "is stopped now" in platform_for("runpod").teardown_notes(store, box)[-1]


def test_teardown_notes_with_a_network_volume(runpod_api, store):
    vol = runpod_api.add_volume("ckpts", "EU-RO-1", size=100)
    box = _rented(store, runpod_api, volume=vol)
    notes = platform_for("runpod").teardown_notes(store, box)
    assert "network volume ckpts" in notes[1] and "survives terminate" in notes[1]
    assert "$7.00/month" in notes[1] and len(notes) == 3
