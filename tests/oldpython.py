"""The oldest Python a rented image may ship (3.8), where this machine has one (pyenv)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess


def oldest_python() -> str | None:
    candidates = [shutil.which("python3.8")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    for path in candidates:
        if not path or not os.access(path, os.X_OK):
            continue
        probe = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
            capture_output=True,
            text=True,
        )
        if probe.stdout.strip() == "True":  # a pyenv shim may exist yet refuse to run
            return path
    return None


PY38 = oldest_python()
# Debian 12 ships only Python 3.11, so a 3.8 interpreter is a bonus where one exists.
NO_PY38 = "no python3.8 interpreter on this machine (Debian 12 ships only 3.11)"
