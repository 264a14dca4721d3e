"""The rented-instance base (rgt.platforms.rented) as two clouds use it: one size parser, so the
same `--disk` words make the same disk on vast.ai and RunPod, and one release vocabulary, so
`rgt down` leaves the same events and the same account of what still bills on either."""

from __future__ import annotations

import json

import pytest
from cloudkit import IMAGE, RUNPOD_IMAGE
from fake_vast_api import offer

from rgt.errors import UserError
from rgt.platforms import platform_for
from rgt.platforms.base import Request, size_gb
from rgt.platforms.rented import RELEASE_ASKED, RELEASED
from rgt.spec import Resources


@pytest.mark.parametrize(("words", "gb"), [
    ("50G", 50), ("50", 50), (50, 50), ("50GB", 50), ("512M", 0.5), ("1T", 1024),
    ("1t", 1024), ("1Ti", 1024), ("1TiB", 1024), ("1.5Gi", 1.5), ("0.5T", 512)])
def test_sizes_mean_the_same_as_everywhere_in_rgt(words, gb):
    """1024-based, as the spec's sizes are on Slurm, Kubernetes and the resource check."""
    assert size_gb(words) == pytest.approx(gb)


@pytest.mark.parametrize("words", ["", "G", "50X", "1.5Gib2", "-5G", "fifty"])
def test_an_unreadable_size_names_the_flag(words):
    with pytest.raises(UserError, match=r"--disk .*50G, 1T \(1,024 GB\) or 512M"):
        size_gb(words)


def _events(store, box: str) -> list[tuple[str, dict]]:
    rows = store.db.execute("SELECT kind, detail FROM events WHERE box=? AND kind LIKE 'cloud-%'"
                            " ORDER BY id", (box,)).fetchall()
    return [(r["kind"], json.loads(r["detail"])) for r in rows]


def test_same_disk_words_same_disk_and_one_release_vocabulary(vast_api, keyed, store,
                                                             sshd_server, tmp_path):
    vast_api.offers = [offer(102)]
    vast_api.ssh_port = sshd_server.port
    key = {"identity": str(sshd_server.client_key)}
    vast, runpod = platform_for("vastai"), platform_for("runpod")

    def rent(platform, name, disk, **resources):
        return platform.provision(store, Request(
            name=name, resources=Resources(disk=disk, **resources),
            options={**key, **({"offer": 102} if platform is vast else {})},
            data_dir=str(tmp_path / name)))

    # 1.5Gi is read the same on both (1.6 GB) and refused the same way: too small, not unreadable
    with pytest.raises(UserError, match="at least 10 GB"):
        rent(vast, "v", "1.5Gi", image=IMAGE)
    with pytest.raises(UserError, match="at least 10 GB"):
        rent(runpod, "rp", "1.5Gi", gpu="RTX4090:1", image=RUNPOD_IMAGE)
    assert not vast_api.calls("PUT", "/asks/") and not keyed.calls("POST", "/v2/pods")

    boxes = [rent(vast, "v", "1T", image=IMAGE),
             rent(runpod, "rp", "1T", gpu="RTX4090:1", image=RUNPOD_IMAGE)]
    (create,) = vast_api.calls("PUT", "/asks/102")
    (pod,) = keyed.calls("POST", "/v2/pods")
    assert create.body["disk"] == 1024 and pod.body["mounts"]["persistent"]["size"] == 1024

    for platform, box, verb in ((vast, boxes[0], "destroy"), (runpod, boxes[1], "terminate")):
        platform.release(store, box)
        kinds = [kind for kind, _ in _events(store, box.name)]
        assert kinds == ["cloud-launch", RELEASE_ASKED, RELEASED], kinds
        (_, asked), (_, done) = _events(store, box.name)[1:]
        assert asked["verb"] == done["verb"] == verb
        assert str(asked["instance_id"]) == str(box.extra["instance_id"])
        assert "terminated_at" in store.box(box.name).extra
    # vast.ai has no word of its own on what still bills (the profile's tiers say it); RunPod
    # without a network volume looked and says nothing does
    assert "still_billing" not in store.box("v").extra
    assert store.box("rp").extra["still_billing"] == []
