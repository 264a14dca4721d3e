"""`rgt offers` checks the user's arguments before any platform asks for its API key: a
mistyped --max-price is said as itself (one line, exit 2), not as a missing VAST_API_KEY; good
arguments then reach the credential check."""

from __future__ import annotations

import pytest
from cli import rgt

KEYS = ("VAST_API_KEY", "LAMBDA_API_KEY", "RUNPOD_API_KEY")


@pytest.fixture
def keyless(home, monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)


@pytest.mark.parametrize("profile", ["vastai", "lambda", "runpod"])
@pytest.mark.parametrize(("args", "said"), [
    (("--max-price", "-1"), "--max-price -1: give the most USD per hour, more than 0"),
    (("--max-price", "0"), "--max-price 0: give the most USD per hour"),
    (("--max-price", "nan"), "--max-price nan: give the most USD per hour"),
    (("--num-gpus", "0"), "--num-gpus 0: give 1 or more"),
    (("--gpu", "H100:x"), "--gpu 'H100:x': write it as TYPE or TYPE:COUNT"),
    (("--gpu", "H100:0"), "--gpu 'H100:0': write it as TYPE or TYPE:COUNT"),
    (("--min-reliability", "2"), "--min-reliability 2: give a fraction from 0 to 1"),
    (("--limit", "0"), "--limit 0: give the number of offers to show"),
])
def test_a_bad_argument_is_said_before_the_missing_key(keyless, profile, args, said):
    result = rgt("offers", "--profile", profile, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.stderr
    assert "API_KEY" not in result.stderr


@pytest.mark.parametrize(("profile", "key"), [
    ("vastai", "VAST_API_KEY"), ("lambda", "LAMBDA_API_KEY"), ("runpod", "RUNPOD_API_KEY")])
def test_good_arguments_reach_the_credential_check(keyless, profile, key):
    result = rgt("offers", "--profile", profile, "--max-price", "0.5", "--gpu", "H100:2")
    assert result.returncode == 2 and key in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
