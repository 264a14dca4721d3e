"""Helpers for the rgt.ckpt tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import sys
from pathlib import Path

TRAIN = [sys.executable, "-m", "rgt.examples.train_mlp"]


def train_cmd(ckpt_dir: Path, out: Path, *extra: str, steps: int = 200) -> list[str]:
    return [*TRAIN, "--steps", str(steps), "--ckpt-dir", str(ckpt_dir), "--out", str(out),
            "--save-every", "10", "--metrics-every", "1", *extra]
