"""The door (the Transport of a Kubernetes box) on its own: a download cut mid-file resumes
from its partial copy with Range, names that could leave the pull are refused, and the door
answers nobody without its token."""

from __future__ import annotations

import hashlib

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
