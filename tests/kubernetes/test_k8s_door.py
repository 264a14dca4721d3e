"""The door (the Transport of a Kubernetes box) on its own: a download cut mid-file resumes
from its partial copy with Range, names that could leave the pull are refused, the door
answers nobody without its token, and that token is in a Secret of the door's own — never in
the pod spec that anyone who may read pods can read — which goes when the door goes."""

from __future__ import annotations

import base64
import hashlib
import json
import time

import pytest
from kubekit import up

from rgt.platforms import platform_for
from rgt.platforms.k8s.api import ApiError
from rgt.platforms.k8s.door import safe_relative
from rgt.store import Store


@pytest.fixture
def door(kube, home, tmp_path):
    up(tmp_path)
    transport = platform_for("kubernetes").connect(Store().box("k8s"))
    yield transport
    transport.close()


def test_a_cut_download_resumes_from_its_partial_copy(kube, door, tmp_path):
    door.run("mkdir -p /tmp/x && head -c 3000000 /dev/urandom > "
             f"{door.mount_path}/big.bin && echo small > {door.mount_path}/small.txt")
    kube.api.cut_proxy_after.append(1_000_000)
    stats = door.get(door.mount_path, tmp_path / "got", retries=3)
    got = (tmp_path / "got" / "big.bin").read_bytes()
    want = door.run(f"sha256sum {door.mount_path}/big.bin").stdout.split()[0]
    assert hashlib.sha256(got).hexdigest() == want
    assert stats.attempts == 2 and stats.bytes_received < 4_100_000  # not fetched twice
    assert (tmp_path / "got" / "small.txt").read_text() == "small\n"
    assert not list((tmp_path / "got").rglob("*.rgt-part"))


def test_the_door_wants_its_token(kube, door):
    door.run("true")
    door.token = "not-the-token"
    with pytest.raises(ApiError) as refused:
        door.run("true")
    assert refused.value.code == 403 and "door token" in str(refused.value)


def test_names_that_could_leave_the_pull_are_refused():
    assert safe_relative("a/b.txt")
    for bad in ("", "/etc/passwd", "../up", "a/../../b", "a//b", "./a", "a/\x00"):
        assert not safe_relative(bad), bad


def test_the_token_is_in_a_secret_not_in_the_pod_spec(kube, door):
    door.run("true")
    (pod,) = kube.pods(labels="rgt.dev/part=door")
    assert door.token not in json.dumps(pod)  # `kubectl get pod -o yaml` shows no token
    (env,) = [e for e in pod["spec"]["containers"][0]["env"] if e["name"] == "RGT_DOOR_TOKEN"]
    name = pod["metadata"]["name"]
    assert env == {"name": "RGT_DOOR_TOKEN",
                   "valueFrom": {"secretKeyRef": {"name": name, "key": "token"}}}
    secret = kube.api.get("secrets", "ml", name)
    assert base64.b64decode(secret["data"]["token"]).decode() == door.token
    assert secret["metadata"]["labels"]["rgt.dev/part"] == "door"
    # the commands the door runs never see the token
    assert "RGT_DOOR_TOKEN" not in door.run("env").stdout
    door.shut_door()
    assert kube.api.get("secrets", "ml", name) is None and not kube.api.list("secrets", "ml")
    deadline = time.monotonic() + 20  # the pod goes after its (short) grace
    while kube.pods(labels="rgt.dev/part=door") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not kube.pods(labels="rgt.dev/part=door")
    door.run("true")  # a new door, with a new Secret and token
    (again,) = kube.api.list("secrets", "ml")
    assert again["metadata"]["name"] != name
    assert base64.b64decode(again["data"]["token"]).decode() == door.token


def test_a_door_pod_that_cannot_be_created_leaves_no_secret(kube, door):
    kube.api.forbidden.add(("alice", "create", "pods"))
    with pytest.raises(ApiError) as refused:
        door.run("true")
    assert refused.value.code == 403
    assert not kube.api.list("secrets", "ml") and not kube.pods(labels="rgt.dev/part=door")
