"""The README's main command, end to end."""

from __future__ import annotations

import json


def test_demo_runs_the_whole_lifecycle(cli):
    result = cli("demo", "--steps", "120", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for phase in ("1. up", "2. run", "3. watch", "4. pull + verify", "5. down"):
        assert phase in result.stdout
    assert "checkpoints loaded" in result.stdout
    verified = list((cli.home / "demo").glob("*/results/PULL_VERIFIED.json"))
    assert len(verified) == 1
    report = json.loads(verified[0].read_text())
    assert report["ok"] and any(f["path"].endswith("final.pt") and f["loads"]
                                for f in report["files"])
    boxes = list((cli.home / "boxes").iterdir())
    assert len(boxes) == 1 and not (boxes[0] / "scratch").exists()
    assert (boxes[0] / "durable").is_dir()
