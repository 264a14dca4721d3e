"""A full disk under RGT_HOME: one clear line, nothing half-recorded, the store intact."""

from __future__ import annotations

import errno
import os

from boxkit import Rgt


def fill(directory) -> None:
    """Write until the disk says ENOSPC (a real tmpfs of a few MiB)."""
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as err:
        assert err.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_full_rgt_home_is_one_line_and_the_store_survives(tmpfs):
    home = tmpfs("size=4m")
    cli = Rgt(home)
    cli.ok("up", "first")
    fill(home)
    for args in (("up", "second"), ("down", "first", "--yes")):
        result = cli(*args)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "Traceback" not in result.stderr and "sqlite3" not in result.stderr
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert lines and lines[0].startswith("error:") and "free space" in result.stderr
    os.unlink(home / "filler")
    listing = cli.ok("ls").stdout
    assert "first" in listing and "second" not in listing  # nothing half-recorded
