"""Durable mirror against a real S3 API on loopback (moto server), through s3fs."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from rgt.ckpt import Checkpointer

boto3 = pytest.importorskip("boto3")


@pytest.fixture
def bucket(s3_endpoint: str):
    name = f"rgt-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=name)
    return client, name


def _ck(d: Path, endpoint: str, bucket: str, **kw) -> Checkpointer:
    return Checkpointer(d, durable=f"s3://{bucket}/run1",
                        durable_options={"client_kwargs": {"endpoint_url": endpoint}},
                        format="pickle", **kw)


def _keys(client, bucket: str) -> list[str]:
    resp = client.list_objects_v2(Bucket=bucket, Prefix="run1/")
    return sorted(o["Key"] for o in resp.get("Contents", []))


def test_save_is_mirrored_and_verified(tmp_path: Path, s3_endpoint: str, bucket) -> None:
    client, name = bucket
    ck = _ck(tmp_path, s3_endpoint, name)
    rec = ck.save({"blob": b"z" * 300_000}, 5, metric=1.5)
    assert rec.durable and rec.durable_error is None
    assert rec.durable_url == f"s3://{name}/run1/ckpt-0000000005.pt"
    body = client.get_object(Bucket=name, Key="run1/ckpt-0000000005.pt")["Body"].read()
    assert len(body) == rec.bytes and hashlib.sha256(body).hexdigest() == rec.sha256
    side = json.loads(client.get_object(Bucket=name, Key="run1/ckpt-0000000005.json")["Body"]
                      .read())
    assert side["step"] == 5 and side["sha256"] == rec.sha256 and side["metric"] == 1.5
    assert ck.durable_status().ok


def test_remote_pruned_like_local(tmp_path: Path, s3_endpoint: str, bucket) -> None:
    client, name = bucket
    ck = _ck(tmp_path, s3_endpoint, name, keep_last=2, keep_best=1, mode="min")
    for step, metric in [(1, 0.1), (2, 5.0), (3, 4.0), (4, 3.0)]:
        assert ck.save({"s": step}, step, metric=metric).durable
    ck.wait()  # a sync save prunes locally in the background
    want = [f"run1/ckpt-{s:010d}.{ext}" for s in (1, 3, 4) for ext in ("json", "pt")]
    assert _keys(client, name) == sorted(want)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(k[5:] for k in want)


def test_corrupted_or_missing_remote_is_not_durable(
    tmp_path: Path, s3_endpoint: str, bucket
) -> None:
    client, name = bucket
    ck = _ck(tmp_path, s3_endpoint, name)
    rec = ck.save({"blob": b"q" * 10_000}, 1)
    assert rec.durable and ck.durable_status(1).ok
    key = "run1/ckpt-0000000001.pt"
    client.put_object(Bucket=name, Key=key, Body=b"X" * rec.bytes)  # same size, wrong bytes
    st = ck.durable_status(1)
    assert not st.ok and "sha256" in st.reason
    client.put_object(Bucket=name, Key=key, Body=b"short")
    assert not ck.durable_status(1).ok and "size" in ck.durable_status(1).reason
    client.delete_object(Bucket=name, Key=key)
    st = ck.durable_status(1)
    assert not st.ok and "missing" in st.reason


def test_bad_upload_reported_not_durable(
    tmp_path: Path, s3_endpoint: str, bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, name = bucket
    ck = _ck(tmp_path, s3_endpoint, name)
    assert ck.save({"n": 1}, 1).durable
    mirror = ck._mirror
    real_put = mirror.put_file

    def flaky_put(local: str, rname: str) -> None:  # the network mangles the upload
        real_put(local, rname)
        mirror.fs.pipe_file(mirror._path(rname), b"garbage")

    monkeypatch.setattr(mirror, "put_file", flaky_put)
    rec = ck.save({"n": 2}, 2)
    assert not rec.durable and "size" in rec.durable_error
    # the previous durable checkpoint was not pruned from the target
    assert "run1/ckpt-0000000001.pt" in _keys(client, name)
    assert ck.load_latest().state == {"n": 2}  # the local checkpoint stands


def test_restore_from_durable_after_losing_the_box(
    tmp_path: Path, s3_endpoint: str, bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, name = bucket
    ck = _ck(tmp_path / "box1", s3_endpoint, name)
    for s in (1, 2):
        ck.save({"n": s}, s)
    # the box is destroyed; a new one starts empty, configured via AWS_ENDPOINT_URL
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    fresh = Checkpointer(tmp_path / "box2", durable=f"s3://{name}/run1", format="pickle")
    loaded = fresh.load_latest()
    assert loaded is not None and loaded.source == "durable"
    assert loaded.step == 2 and loaded.state == {"n": 2}
    assert (tmp_path / "box2" / "ckpt-0000000002.json").exists()
    # a damaged newest remote copy is skipped in favour of the older whole one
    client.put_object(Bucket=name, Key="run1/ckpt-0000000002.pt", Body=b"broken")
    again = Checkpointer(tmp_path / "box3", durable=f"s3://{name}/run1", format="pickle")
    loaded = again.load_latest()
    assert loaded.step == 1 and loaded.source == "durable"
    assert any("ckpt-0000000002.pt" in p for p, _ in loaded.skipped)
