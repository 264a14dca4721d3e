"""The profile commands, driven through the real command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from cli import rgt
from test_profiles import PLATFORMS

from rgt.profiles.loader import DATA_DIR


def test_profiles_json_lists_the_ten_platforms():
    result = rgt("profiles", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["profiles"]
    assert {row["name"] for row in rows} == PLATFORMS
    lam = next(row for row in rows if row["name"] == "lambda")
    assert lam["meter_stop_verb"] == "terminate" and lam["meter_stop_irreversible"] is True


def test_profiles_table_shows_every_platform():
    result = rgt("profiles")
    assert result.returncode == 0
    for name in PLATFORMS:
        assert name in result.stdout


def test_profile_show_lambda_json_answers_the_teardown_questions():
    result = rgt("profile", "show", "lambda", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    terminate = next(a for a in data["actions"] if a["name"] == "terminate")
    assert terminate["stops_compute_meter"] and terminate["irreversible"]
    assert any("filesystem" in b["what"].lower() for b in terminate["keeps_billing"])
    lost = [t["name"] for t in data["storage"]["tiers"] if t["survives"]["terminate"] is False]
    assert lost, "terminate must erase the local NVMe tier"


def test_profile_show_renders_danger_clocks_first():
    result = rgt("profile", "show", "autodl", "--long")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("⚠") < out.index("\nFacts") < out.index("Storage: does the data survive")
    assert "15" in out.split("Facts")[0]  # the 15-day release clock is on the first screen


def test_profile_show_is_short_and_readable_at_80_columns():
    """The short form (issue 33): danger clocks, what each action stops and loses, where the
    data lives, the gotchas' titles; at 80 columns no line is cut or too wide. No internal source
    reference and no gotcha id without its title, short or long."""
    short = rgt("profile", "show", "autodl", env={"COLUMNS": "80"}).stdout
    long = rgt("profile", "show", "autodl", "--long", env={"COLUMNS": "80"}).stdout
    # (832 lines before: a 7-column storage table left one word a line for ~60 lines)
    assert len(short.splitlines()) < 160 < len(long.splitlines()) < 600
    assert short.index("⚠") < short.index("Teardown") < short.index("Storage: does the data")
    assert "Facts" not in short and "--long" in " ".join(short.splitlines()[-3:])
    for out in (short, long):
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= 80
        cut = [line for line in lines if re.search(r"…\s*(│|$)", line)]  # Rich's ellipsis
        assert not cut, "a cell or header was cut"
        for internal in ("seeds/", "§", "(principle"):
            assert internal not in out, internal
    # every id in the text has its title beside it: "(AD-DANGER)" alone means nothing
    assert "(AD-DANGER)" not in long and "AD-DANGER “A box left in 关机 is released" in long
    assert "(AD7, U39)" not in long and "AD7 “The platform TensorBoard reads only" in long
    local = rgt("profile", "show", "local", "--long").stdout
    assert "rehearse a job here before renting" in local and "principle" not in local


def test_profile_show_one_section():
    result = rgt("profile", "show", "vastai", "--section", "teardown", "--json")
    assert result.returncode == 0, result.stderr
    assert list(json.loads(result.stdout)) == ["actions"]
    human = rgt("profile", "show", "vastai", "--section", "storage")
    assert "Storage" in human.stdout and "Teardown" not in human.stdout


def test_unknown_section_and_profile_are_one_line_errors():
    for args in (("profile", "show", "lambda", "--section", "bogus"),
                 ("profile", "show", "lamda"), ("compare", "autodl", "nope"),
                 ("gotcha", "ZZ9")):
        result = rgt(*args)
        assert result.returncode == 2, args
        assert result.stderr.strip().startswith("error:"), args
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_gotcha_by_id_any_platform_or_universal():
    for gid, platform in (("AD4", "autodl"), ("u7", "universal"), ("LAM3", "lambda")):
        result = rgt("gotcha", gid, "--json")
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["id"] == gid.upper() and data["platform"] == platform


def test_gotcha_search_finds_k8s1_from_the_scheduler_line():
    result = rgt("gotcha", "search", "Insufficient nvidia.com/gpu", "--json")
    assert result.returncode == 0, result.stderr
    assert "K8S1" in [hit["id"] for hit in json.loads(result.stdout)]


def test_gotcha_search_no_space_finds_inode_gotchas():
    result = rgt("gotcha", "search", "OSError: [Errno 28] No space left on device", "--json")
    ids = [hit["id"] for hit in json.loads(result.stdout)]
    assert "U7" in ids and "AD4" in ids


def test_gotcha_search_without_match_exits_1():
    result = rgt("gotcha", "search", "qwertyuiop zxcvbnm")
    assert result.returncode == 1
    assert "No gotcha matches" in result.stdout


def test_compare_autodl_vastai_shows_the_stop_trap():
    result = rgt("compare", "autodl", "vastai", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)["profiles"]
    autodl_stop = next(a for a in data["autodl"]["actions"] if "关机" in [a["name"], *a["aliases"]])
    assert autodl_stop["stops_compute_meter"] and not autodl_stop["irreversible"]
    vast_stop = next(a for a in data["vastai"]["actions"] if a["name"] == "stop")
    assert vast_stop["keeps_billing"] and not vast_stop["stops_storage_meter"]
    human = rgt("compare", "autodl", "vastai")
    assert "still billing" in human.stdout and "关机" in human.stdout


def test_text_in_square_brackets_is_shown_verbatim(tmp_path: Path):
    """Profile text and pasted error lines are data, never Rich markup."""
    mine = yaml.safe_load((DATA_DIR / "local.yaml").read_text(encoding="utf-8"))
    mine["name"] = mine["facts"]["platform"] = "my-lab"
    mine["facts"]["inode_cap"] = "[quota] per user"
    mine["launch"]["notes"] = "wrap in [bold]x[/] to shout"
    (tmp_path / "my-lab.yaml").write_text(yaml.safe_dump(mine, allow_unicode=True))
    result = rgt("profile", "show", "my-lab", "--long",
                 env={"RGT_PROFILE_PATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "[quota] per user" in result.stdout and "\\[quota]" not in result.stdout
    assert "wrap in [bold]x[/] to shout" in result.stdout
    search = rgt("gotcha", "search", "No space left on device [/dev/sda1]")
    assert search.returncode == 0, search.stderr
    assert "[/dev/sda1]" in search.stdout and "U7" in search.stdout


def test_usage_errors_are_messages_not_tracebacks():
    for args, says in ((("compare", "autodl"), "Missing argument"),
                       (("profiles", "--bogus"), "No such option"),
                       (("no-such-command",), "No such command")):
        result = rgt(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert says in result.stderr and "Traceback" not in result.stderr, result.stderr
    bare = rgt()
    assert "Usage" in bare.stdout and "profiles" in bare.stdout
    assert "Traceback" not in bare.stderr, bare.stderr
