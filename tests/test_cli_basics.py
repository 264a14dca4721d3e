"""`rgt --version`, and `-h` wherever `--help` works."""

from __future__ import annotations

from cli import rgt

from rgt import __version__


def test_version_and_short_help():
    version = rgt("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"rgt {__version__}"
    for args in (("-h",), ("run", "-h"), ("ckpt", "verify", "-h"), ("profile", "show", "-h")):
        shown = rgt(*args)
        assert shown.returncode == 0 and "Usage:" in shown.stdout, (args, shown.stderr)
