"""A mistyped box, profile, run id or gotcha id gets one line naming the closest real one, exit 2
(issue 13 item 6; spec keys have their own test in test_schema_rules / the bad-input walk)."""

from __future__ import annotations

import time

import pytest
from cli import rgt

from rgt.store import Box, Run, Store


@pytest.fixture
def home(tmp_path):
    store = Store(tmp_path / "state.db")
    now = time.time()
    store.add_box(Box("gpu-1", "local", {}, str(tmp_path / "d"), str(tmp_path / "dd"), None,
                      "up", now - 60))
    store.add_run(Run("mlp-20260101-120000-ab12", "gpu-1", "mlp", "/x", {}, "succeeded", 0,
                      now - 30, now - 10))
    store.db.close()
    return {"RGT_HOME": str(tmp_path)}


def _one_line(result) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("args, expected", [
    (("watch", "gpu1"), "no box named 'gpu1' — did you mean 'gpu-1'?"),
    (("logs", "GPU-1"), "no box named 'GPU-1' — did you mean 'gpu-1'?"),
    (("logs", "gpu-1", "mlp-20260101-120000-ab13"),
     "run 'mlp-20260101-120000-ab13' not found on box 'gpu-1' — did you mean "
     "'mlp-20260101-120000-ab12'?"),
    (("profile", "show", "autodll"), "unknown profile 'autodll' — did you mean 'autodl'?"),
    (("up", "x", "--profile", "lamda"), "unknown profile 'lamda' — did you mean 'lambda'?"),
    (("gotcha", "LAM55"), "no gotcha 'LAM55' — did you mean 'LAM5'?"),
    (("gotcha", "vast-1"), "no gotcha 'vast-1' — did you mean 'VAST1'?"),
])
def test_the_closest_name_is_offered(home, args, expected):
    assert expected in _one_line(rgt(*args, env=home))


def test_nothing_close_lists_what_there_is(home):
    assert "no box named 'ghost' (known: gpu-1)" in _one_line(rgt("watch", "ghost", env=home))
    line = _one_line(rgt("logs", "gpu-1", "zzz", env=home))
    assert "did you mean" not in line and "mlp-20260101-120000-ab12" in line
    assert "known profiles: autodl" in _one_line(rgt("profile", "show", "zz", env=home))
    assert "ids look like" in _one_line(rgt("gotcha", "QQQ", env=home))
