"""`rgt up NAME --profile lambda|vastai|runpod --nodes 2` (rgt.platforms.rentgroup) on each
cloud's fake, through the real CLI: two instances rented, each recorded as it was created,
formed into ONE box of two nodes whose "instances" are two real machines — two hosts in two
network namespaces on one LAN (tests/hosts.py), each with its own address, disk and sshd; a
SkyPilot task of two nodes runs on both, each printing its rank; `rgt down` destroys both
instances (the fake shows both gone). And a group whose second create is refused releases the
first, confirmed gone, said in one line."""

from __future__ import annotations

import json
import time

import hosts
import pytest
from cloudkit import IMAGE, RUNPOD_IMAGE, rgt_cli
from fake_vast_api import offer

DISK = hosts.DISK  # each host's own disk


lan = pytest.fixture(scope="module")(hosts.two_machines)


def _lambda(fake, key):
    fake.capacity["gpu_1x_h100_pcie"] = {"us-west-1"}
    return ["--profile", "lambda", "--gpu", "H100:1", "--user", "root", "--port", "2222"]


def _vast(fake, key):
    # the cheapest offer is alone on its host: a group takes two offers of one host
    fake.offers = [offer(201, dph=0.30, host_id=5), offer(202, dph=0.31, host_id=5),
                   offer(203, dph=0.10, host_id=9)]
    return ["--profile", "vastai", "--gpu", "RTX_4090:1", "--image", IMAGE, "--disk", "20"]


def _runpod(fake, key):
    fake.ssh_keys = [key.with_name(key.name + ".pub").read_text().strip()]
    return ["--profile", "runpod", "--gpu", "RTX4090:1", "--image", RUNPOD_IMAGE]


CLOUDS = {"lambda": ("lambda_api", _lambda), "vastai": ("vast_api", _vast),
          "runpod": ("runpod_api", _runpod)}


def _alive(cloud: str, fake) -> list[str]:
    """The instances the fake still has and bills."""
    if cloud == "lambda":
        return [i["id"] for i in fake.instances.values() if i["status"] != "terminated"]
    if cloud == "vastai":
        return [str(i) for i, row in fake.instances.items()
                if row.get("_destroyed_after", 1) > 0]
    return [p for p, pod in fake.pods.items() if pod["_deleted"] is None]


def _launches() -> list[dict]:
    from rgt.store import Store

    rows = Store().db.execute("SELECT detail FROM events WHERE kind='cloud-launch' "
                              "ORDER BY id").fetchall()
    return [json.loads(r[0]) for r in rows]


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_two_instances_form_one_box_and_down_destroys_both(cloud, lan, request, tmp_path,
                                                              home):
    net, servers = lan
    fake = request.getfixturevalue(CLOUDS[cloud][0])
    key = servers[0].client_key
    fake.hosts = [net.address(0), net.address(1)] if cloud == "lambda" else \
        [(net.address(i), 2222) for i in range(2)]
    started = time.monotonic()
    if cloud == "runpod":  # an `rgt up grp` killed after its first create left grp-0 billing
        fake.ssh_keys = ["x"]  # (set again by _runpod)
        left = fake.add_pod("grp-0")
    up = rgt_cli("up", "grp", *CLOUDS[cloud][1](fake, key), "--nodes", "2", "--identity",
                 str(key), "--data-dir", f"{DISK}/data", "--durable-dir", f"{DISK}/durable")
    assert up.returncode == 0, up.stdout + up.stderr
    ids = _alive(cloud, fake)
    assert len(ids) == 2, ids
    for instance in ids:  # each machine named at `up`
        assert f"instance {instance}" in up.stdout, up.stdout
    # each recorded as it was created, under the group's box, with its rank and name
    launches = _launches()
    assert [(d["rank"], d["node"]) for d in launches] == [(0, "grp-0"), (1, "grp-1")]
    assert sorted(str(d["instance_id"]) for d in launches) == sorted(ids)
    if cloud == "vastai":
        assert {d["offer"] for d in launches} == {201, 202}  # one host's, not the cheapest
    if cloud == "runpod":  # grp-0 adopted, never paid twice; grp-1 pinned to its data centre
        assert launches[0]["instance_id"] == left["id"] and launches[0]["adopted"]
        (create,) = fake.calls("POST", "/v2/pods")
        assert create.body["name"] == "grp-1"
        assert create.body["dataCenterIds"] == [left["dataCenterId"]]

    from rgt.store import Store

    box = Store().box("grp")
    nodes = box.extra["nodes"]
    assert [n["address"] for n in nodes] == [net.address(0), net.address(1)]
    assert [str(n["instance_id"]) for n in nodes] == [str(d["instance_id"]) for d in launches]
    rates = box.extra["node_rates"]
    assert len(rates) == 2 and min(rates) > 0
    assert box.rate == pytest.approx(sum(rates))  # `rgt ls` bills the group as the sum

    if cloud == "lambda":  # one cloud runs a job across both (the SSH group's test runs DDP)
        _run_on_both(tmp_path)
    if cloud == "vastai":  # one destroy refused: that node is named as billing, down finishes
        fake.fail_before("DELETE", "/instances/", 400)  # later, when run again
        failed = rgt_cli("down", "grp", input="grp\n")
        assert failed.returncode != 0, failed.stdout + failed.stderr
        said = " ".join(failed.stderr.split())
        assert f"destroyed 1 of 2 vast.ai instances of grp; node 0 ({ids[0]}) may still bill" \
            in said, said
        assert Store().box("grp").extra["still_billing"][0].startswith(f"grp node 0 ({ids[0]})")
        assert _alive(cloud, fake) == [ids[0]]
    down = rgt_cli("down", "grp", input="grp\n")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "each confirmed gone" in down.stdout, down.stdout
    assert _alive(cloud, fake) == []
    print(f"{cloud}: 2 nodes up, down in {time.monotonic() - started:.1f} s")


def _run_on_both(tmp_path) -> None:
    """A SkyPilot task of two nodes (run as written on each) says its rank on both machines;
    pull brings both nodes' logs."""
    task = tmp_path / "task" / "task.yaml"
    task.parent.mkdir()
    task.write_text("num_nodes: 2\nworkdir: .\n"
                    "run: echo \"rank $RGT_NODE_RANK of $RGT_NUM_NODES on $(hostname)\"\n")
    run = rgt_cli("run", "grp", str(task))
    assert run.returncode == 0, run.stdout + run.stderr
    run_id = run.stdout.strip().splitlines()[-1]
    watched = rgt_cli("watch", "grp", run_id, "--until-done", "--timeout", "60")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    dest = tmp_path / "pulled"
    pulled = rgt_cli("pull", "grp", run_id, "--dest", str(dest))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    logs = {p.name: p.read_text() for p in (dest / "logs").glob("*.log")}
    assert any("rank 0 of 2 on node0" in text for text in logs.values()), logs
    assert any("rank 1 of 2 on node1" in text for text in logs.values()), logs


def test_second_create_refused_releases_the_first(vast_api, home):
    """No SSH needed: the group never forms. The one line says what exists and what bills."""
    vast_api.offers = [offer(301, host_id=5), offer(302, host_id=5)]
    vast_api.fail_before("PUT", "/asks/", 400, skip=1)  # the 2nd create: refused, made nothing
    up = rgt_cli("up", "half", "--profile", "vastai", "--gpu", "RTX_4090:1", "--image", IMAGE,
                 "--nodes", "2")
    assert up.returncode == 2, up.stdout + up.stderr
    line = " ".join(up.stderr.split())
    assert "rented 1 of 2 instances; node 1 (half-1) failed to create" in line, line
    assert "released node 0 (9000001) (confirmed gone); nothing bills" in line, line
    assert vast_api.calls("DELETE", "/instances/9000001")
    assert vast_api.instances[9000001]["_destroyed_after"] == 0
    listed = rgt_cli("ls", "--all")  # no box: nothing to `down` (an ls that failed lists none)
    assert listed.returncode == 0 and "half" not in listed.stdout, listed.stdout + listed.stderr
