"""What `rgt run` ships with the code: the `rgt.ckpt` library, into RUN_DIR/lib on the box.

A training script does `import rgt.ckpt`, but the box runs whatever Python its image has
(3.8 on old images) and rgt itself needs 3.10 to install. So the laptop copies its own
`rgt.ckpt` — standard library + optional torch, valid Python 3.8 — next to the run's code, and
the job starts with RUN_DIR/lib first on PYTHONPATH.

Always, not only when the image lacks rgt: `rgt pull` verifies every checkpoint with the
laptop's `rgt.ckpt`, so the copy that writes them on the box is pinned to that same version
rather than to whatever an image happens to carry. A workdir that holds its own `rgt/` still
wins for `python train.py` (the script's directory precedes PYTHONPATH).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rgt.onbox import ckpt_package
from rgt.transport import Transport


def library_files() -> dict[str, bytes]:
    """Relative path → bytes of the package that goes to RUN_DIR/lib (rgt.onbox.ckpt_package)."""
    return ckpt_package("`rgt run` shipped it with the code")


def write_library(dest: Path) -> Path:
    """Write the shipped package under `dest` (a local directory); returns `dest`."""
    for rel, data in library_files().items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return dest


def ship_library(transport: Transport, remote: str) -> None:
    """Copy the package into `remote` on the box (the run's `Layout.lib`)."""
    with tempfile.TemporaryDirectory(prefix="rgt-lib-") as tmp:
        transport.put(write_library(Path(tmp)), remote)
