"""Run the real `rgt` command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys


def rgt(*args: str, env: dict | None = None, timeout: float = 120,
        input: str | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "rgt", *args], capture_output=True, text=True, env=full_env,
        timeout=timeout, input=input,
    )
