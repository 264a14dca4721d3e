"""Where profile files are: the bundled `data/`, after the directories in `RGT_PROFILE_PATH`.

Apart from the loader so that finding a file costs no YAML or pydantic import (rgt.profiles.brief).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"
UNIVERSAL_FILE = "universal.yaml"


def search_dirs() -> list[Path]:
    extra = os.environ.get("RGT_PROFILE_PATH", "")
    return [Path(p) for p in extra.split(os.pathsep) if p] + [DATA_DIR]


def profile_files() -> dict[str, Path]:
    """name → file, earlier search directories winning."""
    found: dict[str, Path] = {}
    for directory in reversed(search_dirs()):
        if directory.is_dir():
            for path in sorted(directory.glob("*.yaml")):
                if path.name != UNIVERSAL_FILE:
                    found[path.stem] = path
    return found
