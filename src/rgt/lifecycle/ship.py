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

import rgt
from rgt.transport import Transport

# The shipped package's __init__: the laptop's version, and the rest of an `rgt` the image may
# have installed stays importable (`rgt.ckpt` resolves here first, other subpackages there).
_INIT = '''"""rgt.ckpt as `rgt run` shipped it with the code (rgt {version})."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
__version__ = {version!r}
'''


def library_files() -> dict[str, bytes]:
    """Relative path → bytes of the package that goes to RUN_DIR/lib: `rgt/__init__.py`,
    `rgt/errors.py` (its errors are `UserError`s) and every module of `rgt/ckpt/`."""
    root = Path(rgt.__file__).parent
    files = {"rgt/__init__.py": _INIT.format(version=rgt.__version__).encode(),
             "rgt/errors.py": (root / "errors.py").read_bytes()}
    for module in sorted((root / "ckpt").glob("*.py")):
        files[f"rgt/ckpt/{module.name}"] = module.read_bytes()
    return files


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
