"""The laptop's OS: Linux and macOS run rgt; native Windows gets one line saying to use WSL."""

from __future__ import annotations

import sys

import pytest

from rgt import hostos
from rgt.errors import UserError


def test_posix_laptops_are_supported():
    for platform in ("linux", "darwin"):
        assert hostos.unsupported_reason(platform) is None


@pytest.mark.parametrize("platform", ["win32", "cygwin"])
def test_native_windows_is_told_to_use_wsl_in_one_line(platform):
    reason = hostos.unsupported_reason(platform)
    assert reason is not None and "WSL" in reason and "\n" not in reason


def test_every_verb_stops_with_that_line_before_doing_anything(monkeypatch, capsys):
    from rgt.cli import main

    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(UserError, match="WSL"):
        hostos.check_supported()
    for verb in (["profiles"], ["ls"], ["demo"]):
        monkeypatch.setattr(sys, "argv", ["rgt", *verb])
        with pytest.raises(SystemExit) as code:
            main()
        assert code.value.code != 0
        err = capsys.readouterr().err
        assert "WSL" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
