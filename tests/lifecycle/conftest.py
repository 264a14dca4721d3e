"""Fixtures for lifecycle tests: an isolated RGT_HOME and a real sshd."""

from __future__ import annotations

from pathlib import Path

import pytest
from boxkit import Rgt
from sshd import SshServer, sshd_keys, sshd_server  # noqa: F401  (fixtures)
from stockbox import stock_box  # noqa: F401  (fixture: boxes as images ship them)


@pytest.fixture
def cli(tmp_path: Path) -> Rgt:
    return Rgt(tmp_path / "rgt-home")
