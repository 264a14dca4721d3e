"""Messages, paths and box output reach the terminal as text: Rich must not read them as markup
(`[client=2.6.9]` vanished from rsync's errors) or as emoji codes (`:100:` became 💯)."""

from __future__ import annotations

import pytest
from cli import rgt

# Each would be eaten by Rich if printed as markup: a style tag, a closing tag, an emoji code.
ODD = ["rsync [client=2.6.9]", "out[sender=3.2.7]", "x[/]y", "[bold]z", "loss:100:"]


@pytest.mark.parametrize("odd", ODD)
def test_an_error_line_keeps_its_text(tmp_path, odd):
    missing = tmp_path.joinpath(*odd.split("/"))  # x[/]y: a folder 'x[' holding ']y'
    result = rgt("ckpt", "ls", str(missing))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: no such checkpoint directory: {missing}"


@pytest.mark.parametrize("odd", ODD)
def test_a_path_in_normal_output_keeps_its_text(tmp_path, odd):
    empty = tmp_path.joinpath(*odd.split("/"))
    empty.mkdir(parents=True)
    result = rgt("ckpt", "ls", str(empty))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"no checkpoints in {empty}"


def test_a_damaged_checkpoints_path_and_reason_keep_their_text(tmp_path):
    folder = tmp_path / "run[sender=3.2.7]"
    folder.mkdir()
    data = folder / "ckpt-00000010.pt"
    data.write_bytes(b"not a checkpoint")
    result = rgt("ckpt", "verify", "--no-load", str(data))
    assert result.returncode == 1
    assert str(data) in result.stdout and "DAMAGED" in result.stdout
