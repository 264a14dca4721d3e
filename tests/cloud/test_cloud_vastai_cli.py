"""The official `vastai` client (PyPI vastai 1.9.1, unmodified) against the fake vast.ai API.

If the fake answers what the real client sends and the client reads what the fake answers, the
fake's shapes are the real ones, not ones rgt and the fake merely agree on (issue 12 item 8).
The client is the `test` extra's `vastai`; RGT_TEST_VASTAI names another executable of it
(e.g. one in a throwaway venv). It is pointed at the fake by VAST_URL (its
vastai/api/client.py reads it) or its --url option, the key by VAST_API_KEY.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cloudkit import IMAGE, VAST_KEY
from fake_vast_api import offer


def _vastai_command() -> list[str]:
    if os.environ.get("RGT_TEST_VASTAI"):
        return shlex.split(os.environ["RGT_TEST_VASTAI"])
    if importlib.util.find_spec("vastai") is None:
        pytest.fail("the official vastai client is not installed: pip install -e '.[test]' "
                    "(or set RGT_TEST_VASTAI to a vastai executable)")
    # its console script's own two lines: `python -m vastai.cli.main` registers no commands
    return [sys.executable, "-c", "import sys; from vastai.cli.main import main; sys.exit(main())"]


@pytest.fixture
def vastai_cli(vast_api, tmp_path: Path):
    command = _vastai_command()
    home = tmp_path / "vastai-home"  # its key file and config dirs: none of the user's
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache"), "VAST_URL": vast_api.server_url,
           "VAST_API_KEY": VAST_KEY, "VASTAI_NO_UPDATE_CHECK": "1", "COLUMNS": "200"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*command, *args], env=env, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    return run


def test_search_offers_both_forms(vast_api, vastai_cli):
    vast_api.offers = [offer(101, dph=0.40), offer(102, dph=0.30), offer(103, gpu="A100")]
    found = vastai_cli("search", "offers", "gpu_name=RTX_4090", "-o", "dph_total", "--raw")
    assert found.returncode == 0, found.stderr
    assert [o["id"] for o in json.loads(found.stdout)] == [102, 101]
    (post,) = vast_api.calls("POST", "/bundles/")  # the documented form: the query is the body
    assert post.body["gpu_name"] == {"eq": "RTX 4090"} and post.body["verified"] == {"eq": True}
    assert post.body["allocated_storage"] == 5.0 and post.body["type"] == "on-demand"

    new = vastai_cli("search", "offers", "--new", "gpu_name=A100", "--raw")
    assert new.returncode == 0, new.stderr
    assert [o["id"] for o in json.loads(new.stdout)] == [103]
    (put,) = vast_api.calls("PUT", "/search/asks/")
    assert put.body["select_cols"] == ["*"] and put.body["q"]["gpu_name"] == {"eq": "A100"}

    table = vastai_cli("search", "offers", "gpu_name=RTX_4090")
    assert table.returncode == 0, table.stderr
    assert "102" in table.stdout and "RTX_4090" in table.stdout


# The client's own documented query forms (`vastai search offers --help`, its Examples, and
# issue 30's three): parse_query (vastai/api/query.py) sends every value as the text typed
# ("1", "0.98"), sizes scaled by offers_mult (gpu_ram GB -> MB, duration days -> s), a dotted
# driver_version as one number, and geolocation as a two-letter country code.
DOCUMENTED_OFFERS = [
    offer(101, gpu="RTX 3090", dph=0.30, geolocation="Taiwan, TW", cpu_arch="amd64"),
    offer(102, gpu="RTX 4090", dph=1.60, reliability=0.97, num_gpus=4,
          geolocation="Sweden, SE"),
    offer(103, gpu="RTX 4090", dph=1.70, num_gpus=4, geolocation="Sweden, SE"),
    offer(104, gpu="A100", dph=1.20, reliability=0.999, cuda=11.8, geolocation="China, CN",
          datacenter=True, cpu_arch="arm64"),
    offer(105, gpu="RTX 4090", dph=2.50, verified=False, num_gpus=8),
]
DOCUMENTED_QUERIES = [
    (["reliability > 0.98 num_gpus=1 gpu_name=RTX_3090"], [101]),
    (["compute_cap > 610 total_flops > 5 datacenter=True"], [104]),
    (["reliability>0.99 num_gpus=4 geolocation in [TW,SE]"], [103]),
    (['reliability>0.99 gpu_name in ["RTX 4090", "RTX 3090"] geolocation notin [CN,VN]'],
     [101, 103]),
    (["disk_space>146 duration>24 gpu_ram>10 cuda_vers>=12.1 direct_port_count>=2 "
      "driver_version >= 535.86.05"], [101, 102, 103]),
    (["reliability > 0.99  num_gpus>=4 verified=False", "-o", "num_gpus-"], [105]),
    (["cpu_arch=arm64"], [104]),
    (["num_gpus=1"], [101, 104]),
    (["reliability>0.98"], [101, 103, 104]),
    (["dph_total<1"], [101]),
]


@pytest.mark.parametrize("args,ids", DOCUMENTED_QUERIES,
                         ids=[" ".join(a) for a, _ in DOCUMENTED_QUERIES])
def test_search_offers_documented_queries(vast_api, vastai_cli, args, ids):
    """Every documented query form, typed as the docs type it, finds the offers it describes:
    the fake compares the client's text values as the numbers, sizes and codes they name."""
    vast_api.offers = DOCUMENTED_OFFERS
    found = vastai_cli("search", "offers", *args, "--raw")
    assert found.returncode == 0, found.stderr
    assert "Failed with error" not in found.stderr, found.stderr
    assert sorted(o["id"] for o in json.loads(found.stdout)) == ids


def test_search_offers_refuses_a_value_that_is_no_number(vast_api, vastai_cli):
    vast_api.offers = DOCUMENTED_OFFERS
    bad = vastai_cli("search", "offers", "num_gpus>two", "--raw")
    assert '"status_code": 400' in bad.stderr and "'two' is not a number" in bad.stderr, \
        (bad.stdout, bad.stderr)


@pytest.mark.parametrize("flags,runtype", [
    ((), "ssh"),
    (("--ssh",), "ssh_proxy"),
    (("--ssh", "--direct"), "ssh_direc ssh_proxy"),
    (("--jupyter",), "jupyter_proxy ssh_proxy"),
    (("--jupyter", "--direct"), "jupyter_direc ssh_direc ssh_proxy"),
    (("--args", "-c", "sleep infinity"), "args"),
], ids=["default", "ssh", "ssh-direct", "jupyter", "jupyter-direct", "args"])
def test_create_instance_every_runtype(vast_api, vastai_cli, flags, runtype):
    vast_api.offers = [offer(201)]
    made = vastai_cli("create", "instance", "201", "--image", IMAGE, "--disk", "20",
                      "--label", "run-a", "--env", "-e TZ=UTC", "--onstart-cmd", "echo hi",
                      "--raw", *flags)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout) == {"success": True, "new_contract": 9000001}
    (create,) = vast_api.calls("PUT", "/asks/201/")
    assert create.body["runtype"] == runtype and create.body["env"] == {"TZ": "UTC"}
    inst = vast_api.instances[9000001]
    assert inst["label"] == "run-a" and inst["_onstart"] == "echo hi" and inst["disk_space"] == 20


def test_show_label_stop_start_destroy(vast_api, vastai_cli):
    vast_api.offers = [offer(300 + i) for i in range(30)]
    ids = [vast_api.add_instance(300 + i, IMAGE) for i in range(30)]  # more than one page
    listed = vastai_cli("show", "instances", "--raw")
    assert listed.returncode == 0, listed.stderr
    assert [row["id"] for row in json.loads(listed.stdout)] == ids  # every page, in order
    pages = vast_api.calls("GET", "/v1/instances/")
    assert len(pages) == 2 and "after_token" in pages[1].query
    assert all(int(p.query["limit"]) == 25 for p in pages)

    quiet = vastai_cli("show", "instances", "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.split() == [str(i) for i in ids]

    first = ids[0]
    shown = vastai_cli("show", "instance", str(first), "--raw")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == first
    assert vast_api.calls("GET", f"/instances/{first}/")[-1].query == {"owner": "me"}

    labelled = vastai_cli("label", "instance", str(first), "keep-me")
    assert labelled.returncode == 0, labelled.stderr
    assert f"label for {first} set to keep-me." in labelled.stdout
    assert vast_api.instances[first]["label"] == "keep-me"

    stopped = vastai_cli("stop", "instance", str(first))
    assert f"stopping instance {first}." in stopped.stdout, stopped.stderr
    assert vast_api.instances[first]["intended_status"] == "stopped"
    started = vastai_cli("start", "instance", str(first))
    assert f"starting instance {first}." in started.stdout, started.stderr
    assert vast_api.instances[first]["intended_status"] == "running"

    vast_api.destroy_polls = 0
    gone = vastai_cli("destroy", "instance", str(first), "-y")
    assert f"destroying instance {first}." in gone.stdout, gone.stderr
    (delete,) = vast_api.calls("DELETE", f"/instances/{first}/")
    assert delete.body == {}
    after = vastai_cli("show", "instance", str(first))
    assert after.returncode == 1
    assert f"Instance {first} not found" in after.stderr


def test_the_fake_refuses_what_vast_refuses_through_the_client(vast_api, vastai_cli):
    vast_api.offers = [offer(401)]
    long = vastai_cli("create", "instance", "401", "--image", IMAGE, "--ssh", "--direct",
                      "--onstart-cmd", "x" * 4097)
    assert "Failed with error 400: onstart and args together exceed 4096" in long.stderr
    assert vast_api.instances == {}
    low = vastai_cli("create", "instance", "401", "--image", IMAGE, "--bid_price", "0.01")
    assert "Failed with error 400: bid 0.01 below min_bid" in low.stderr
    missing = vastai_cli("show", "instance", "123")
    assert missing.returncode == 1 and "Instance 123 not found" in missing.stderr
    wrong = vastai_cli("--api-key", "not-the-key", "show", "instance", "123")
    assert "Failed with error 401" in wrong.stderr
