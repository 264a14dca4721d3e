"""What a push or pull shows while it runs: a Rich bar with bytes, rate and time left on a
terminal, nothing at all off one; and the progress a multi-stream transfer reports."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

from rgt.cli.transfer_bar import transfer_bar
from rgt.transport import LocalTransport

BAR_SCRIPT = r"""
import os, sys
from pathlib import Path
from rgt.cli.transfer_bar import transfer_bar
from rgt.transport import LocalTransport
src = Path(sys.argv[1])
with transfer_bar("push") as on_progress:
    assert on_progress is not None
    LocalTransport(bwlimit=20_000_000, streams=1).put(src, sys.argv[2], progress=on_progress)
print("pushed")
"""


def test_no_bar_off_a_terminal_or_with_json():
    with transfer_bar("pull") as on_progress:  # pytest's stdout is not a terminal
        assert on_progress is None
    with transfer_bar("pull", quiet=True) as on_progress:
        assert on_progress is None


def test_a_terminal_sees_bytes_rate_and_time_left(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(24 << 20))  # ~1.2 s at 20 MB/s
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", BAR_SCRIPT, str(src), str(tmp_path / "d")],
                            stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
                            env=dict(os.environ, COLUMNS="100", TERM="xterm"))
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=30)
    os.close(primary)
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "push" in text and "MiB" in text and "/s" in text, text[-2000:]
    assert "pushed" in text


def test_progress_from_several_streams_climbs_to_the_total(tmp_path):
    src = tmp_path / "src"
    (src / "logs").mkdir(parents=True)
    (src / "big.bin").write_bytes(os.urandom(40 << 20))
    for i in range(30):
        (src / "logs" / f"{i}.log").write_text("loss 0.1\n" * 500)
    seen: list[tuple[int, int]] = []
    stats = LocalTransport(streams=3).put(src, str(tmp_path / "dest"),
                                          progress=lambda d, t: seen.append((d, t)))
    total = (40 << 20) + 30 * len("loss 0.1\n" * 500)
    assert stats.streams == 3
    assert seen[-1] == (total, total)
    assert all(t == total for _, t in seen)
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:], strict=False))
