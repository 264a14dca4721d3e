"""Renting is part of `rgt up`: --profile lambda|vastai without --ssh/--host rents through the
API (the fakes in tests/cloud/fakes), with --ssh/--host it registers a box rented by hand.
Wrong combinations end as one line on stderr, before any request reaches an API."""

from __future__ import annotations

import pytest
from cloudkit import IMAGE, rgt_cli
from fake_vast_api import offer


def test_up_rents_on_lambda_and_registers_the_instance(lambda_api, store, sshd_server,
                                                       tmp_path):
    lambda_api.grant_after["gpu_1x_h100_pcie"] = (1, "us-south-1")  # capacity on the 2nd poll
    result = rgt_cli("up", "lam", "--profile", "lambda", "--gpu", "H100:1",
                     "--identity", str(sshd_server.client_key), "--user", "root",
                     "--port", str(sshd_server.port), "--data-dir", str(tmp_path / "nvme"))
    assert result.returncode == 0, result.stderr
    assert "instance inst-0001 answers at 127.0.0.1" in result.stdout
    assert "First lambda box" in result.stdout and "no capacity" in result.stderr
    (launch,) = lambda_api.calls("POST", "/instance-operations/launch")
    assert launch.body["region_name"] == "us-south-1"
    box = store.box("lam")
    assert box.extra["instance_id"] == "inst-0001" and box.connection["port"] == sshd_server.port
    assert box.rate == pytest.approx(2.49) and "uname" in box.extra  # SSH really answered


def test_rent_is_a_hidden_alias_of_up(lambda_api, store):
    assert " rent " not in rgt_cli("--help").stdout
    result = rgt_cli("rent", "lam", "--profile", "lambda", "--gpu", "H100:1", "--wait", "0.1")
    assert result.returncode == 2 and "no Lambda capacity" in result.stderr  # same code path
    assert len(lambda_api.calls("GET", "/instance-types")) >= 1


@pytest.mark.parametrize("args,says", [
    (["--profile", "vastai", "--offer", "102", "--ssh", "ssh root@h"], "give one or the other"),
    (["--profile", "generic-ssh", "--gpu", "H100:1"], "generic-ssh cannot honour resources.gpu"),
    (["--profile", "lambda", "--offer", "102", "--image", IMAGE],
     "lambda cannot honour resources.image"),
    (["--profile", "lambda", "--gpu", "H100:1", "--offer", "102"],
     "--offer does not apply to --profile lambda"),
    (["--profile", "lambda", "--gpu", "H100:1", "--keep-partial"],
     "--keep-partial is for a group (--nodes N)"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--nodes", "2"],
     "--offer names one machine: a group of N takes N offers on one vast.ai host"),
    (["--profile", "lambda", "--gpu", "H100:1", "--nodes", "2", "--wait", "nan"], "--wait"),
    (["--profile", "vastai", "--gpu", "H100:1"], "--gpu MODEL:COUNT --image IMAGE"),
    (["--profile", "vastai", "--gpu", "H100:1", "--image", IMAGE, "--region", "EU"],
     "vastai cannot honour resources.region"),
    (["--profile", "vastai", "--gpu", "H100:1", "--image", IMAGE, "--spot"], "--bid USD/h"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--filesystem", "f"],
     "--filesystem does not apply to --profile vastai"),
    (["--profile", "generic-ssh", "--ssh", "ssh root@h", "--time", "1h"],
     "generic-ssh cannot honour resources.time"),
    (["--profile", "vastai", "--image", IMAGE], "--offer ID --image IMAGE"),
    (["--profile", "lambda"], "--gpu TYPE:COUNT"),
    (["--profile", "lambda", "--gpu", "H100:1", "--rate", "2"], "--rate"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--port", "22"], "VAST6"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--disk", "0"], "VAST10"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--disk", "nan"], "--disk nan"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--disk", "inf"], "--disk inf"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--bid", "nan"], "--bid nan"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--bid", "-1"], "--bid -1"),
    (["--profile", "vastai", "--gpu", "RTX_4090:1", "--image", IMAGE, "--nodes", "2", "--disk",
      "5"], "--disk 5: give at least 10 GB"),
    (["--profile", "lambda", "--gpu", "H100:1", "--wait", "nan"], "--wait"),
    (["--profile", "vastai", "--gpu", "RTX_4090:1", "--image", IMAGE, "--nodes", "2",
      "--wait", "nan"], "--wait nan: give the seconds to wait"),
    (["--profile", "runpod", "--gpu", "RTX4090:1", "--image", IMAGE, "--wait", "-1"],
     "--wait -1: give the seconds to wait"),
    (["--profile", "runpod", "--gpu", "RTX4090:1", "--image", IMAGE, "--spot"],
     "RunPod's REST API v2 has no interruptible (spot) pods"),
    (["--profile", "runpod", "--gpu", "RTX4090:1", "--image", IMAGE, "--nodes", "2", "--spot"],
     "RunPod's REST API v2 has no interruptible (spot) pods"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--user", "ubuntu"],
     "vast.ai instances log in as root on the port the API reports (VAST6): drop --user/--port"),
    (["--profile", "runpod", "--gpu", "RTX4090:1", "--image", IMAGE, "--nodes", "2", "--port",
      "22"], "RunPod pods log in as the user and port the API reports (RP6): drop --user"),
    (["--profile", "lambda", "--gpu", "H100:1", "--volume", "ckpts"],
     "--volume does not apply to --profile lambda"),
    (["--profile", "vastai", "--offer", "102", "--image", IMAGE, "--container-disk", "30"],
     "--container-disk does not apply to --profile vastai"),
    (["--profile", "local", "--cloud", "community"], "--cloud does not apply"),
    (["--profile", "runpod", "--gpu", "RTX4090:1", "--image", IMAGE, "--cloud", "moon"],
     "--cloud moon: RunPod has secure and community clouds"),
])
def test_wrong_combinations_are_one_clear_line(lambda_api, vast_api, args, says):
    result = rgt_cli("up", "x", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0], lines
    assert lambda_api.requests == [] and vast_api.requests == []  # nothing rented, or billed


def test_hand_rented_vast_box_still_registers_with_ssh(vast_api, sshd_server, tmp_path):
    vast_api.offers = [offer(102)]
    ssh = f"ssh -p {sshd_server.port} -i {sshd_server.client_key} root@127.0.0.1"
    result = rgt_cli("up", "hand", "--profile", "vastai", "--ssh", ssh,
                     "--data-dir", str(tmp_path / "ws"), "--durable-dir", str(tmp_path / "ws"))
    assert result.returncode == 0, result.stderr
    assert "answers: Linux" in result.stdout and vast_api.requests == []
