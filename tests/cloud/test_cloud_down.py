"""`rgt up` (renting) → run → `rgt down` through the real CLI, on a box whose "instance" is the
real sshd on 127.0.0.1 (the fake vast.ai API maps its 22/tcp there). The Iron Law holds for
rented boxes: no destroy reaches the API until the run is pulled and verified."""

from __future__ import annotations

from boxkit import write_job
from cloudkit import IMAGE, rent_vast, rgt_cli
from fake_vast_api import offer


def test_destroy_refused_without_evidence_then_confirmed(vast_api, sshd_server, tmp_path):
    rent = rent_vast(vast_api, sshd_server, tmp_path / "workspace", "v", offer(102, dph=0.35))
    assert rent.returncode == 0, rent.stderr
    assert "instance 9000001" in rent.stdout and "loading" in rent.stderr
    assert "First vastai box" in rent.stdout  # danger clocks on first contact, as `up --ssh`
    (create,) = vast_api.calls("PUT", "/asks/102")
    assert create.body["disk"] == 20 and create.body["image"] == IMAGE
    spec = write_job(tmp_path / "job", run="mkdir -p out && echo '{\"acc\": 1}' > out/m.json",
                     outputs=["out"])
    run = rgt_cli("run", "v", str(spec))
    assert run.returncode == 0, run.stderr
    run_id = run.stdout.strip().splitlines()[-1]
    assert rgt_cli("watch", "v", run_id, "--until-done", "--timeout", "60").returncode == 0

    refused = rgt_cli("down", "v", "--yes")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "never pulled" in refused.stderr
    assert not vast_api.calls("DELETE"), "destroy must not reach the API without evidence"

    pulled = rgt_cli("pull", "v", run_id, "--dest", str(tmp_path / "pulled"))
    assert pulled.returncode == 0, pulled.stderr
    down = rgt_cli("down", "v", input="v\n")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "destroyed vast.ai instance 9000001" in down.stdout
    (destroy,) = vast_api.calls("DELETE", "/instances/9000001")
    assert vast_api.instances[9000001]["_destroyed_after"] == 0  # confirmed gone from listing
    listing = rgt_cli("ls", "--all")
    assert "down" in listing.stdout


def test_discarding_a_paused_instance_destroys_it_without_ssh(vast_api, sshd_server, tmp_path):
    """A preempted container answers no SSH: giving its run up must still reach destroy."""
    rent = rent_vast(vast_api, sshd_server, tmp_path / "workspace", "p", offer(103, dph=0.2))
    assert rent.returncode == 0, rent.stderr
    run = rgt_cli("run", "p", str(write_job(tmp_path / "job", run="sleep 300")))
    assert run.returncode == 0, run.stderr
    run_id = run.stdout.strip().splitlines()[-1]
    vast_api.preempt(9000001)
    sshd_server.stop()  # the container is stopped: nothing answers on its port
    assert "paused" in rgt_cli("watch", "p", run_id).stdout

    refused = rgt_cli("down", "p", "--yes")
    assert refused.returncode == 3 and "still paused" in refused.stderr, refused.stderr
    assert not vast_api.calls("DELETE")
    down = rgt_cli("down", "p", "--discard-results", input="p\n")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "destroyed vast.ai instance 9000001" in down.stdout
    assert vast_api.calls("DELETE", "/instances/9000001")
