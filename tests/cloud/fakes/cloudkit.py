"""Shared by the cloud tests: the fake keys and the CLI with the cloud verbs registered."""

from __future__ import annotations

import os
import subprocess
import sys

LAMBDA_KEY = "secret_lambda-key-3f9a1c"
VAST_KEY = "vastkey-7d02e4b1c9"


def rgt_cli(*args: str, input: str | None = None, timeout: float = 120
            ) -> subprocess.CompletedProcess:
    """The real command line with the cloud verbs registered (until the lead imports
    `rgt.cli.cloud_cmd` in rgt.cli._register, importing it here is what adds them)."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    code = "import rgt.cli.cloud_cmd; from rgt.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=timeout, input=input)
