"""Code that runs ON the rented box.

Every module here is standard-library-only Python >= 3.8. The launcher ships one file over SSH
on stdin (``python3 - ARGS < runner.py``) or writes it to the box, so a script may import neither
``rgt`` nor a sibling, with one exception: the helpers they share live in ``_common`` and each
script imports them in a single ``from rgt.onbox._common import (...)`` block, which
``script_source(name)`` replaces with the text of ``_common.py``. What goes to a box is therefore
one self-contained file; the modules stay importable from the package so tests can call their
pure helpers.

- ``runner``   detached job runner: state.json, log, signal forwarding, verified durable sync
- ``probe``    one-shot reconciliation of state.json with the real process + a verdict (U3 ladder)
- ``manifest`` PULL_MANIFEST.json (path, bytes, sha256) of the declared outputs
- ``stop``     end a live run: SIGTERM to its runner, SIGKILL after a grace (rgt cancel)
- ``audit``    pre-run audit: disks (bytes + inodes), cgroup limits, GPUs, Python/torch, HF cache
- ``xfer``     rgt's file mover, run at both ends of the stream that `put` and `get` open
- ``door``     a Kubernetes pod's small HTTP server on the run's PVC (rgt.platforms.k8s.door)

and ``ckpt_package``: the ``rgt.ckpt`` library a job imports on the box, as its files.
"""

from __future__ import annotations

import re
from pathlib import Path

import rgt

SCRIPTS = ("runner", "probe", "manifest", "audit", "xfer", "stop", "door")
_COMMON_IMPORT = re.compile(rb"^from rgt\.onbox\._common import (?:\([^)]*\)|.*)\n", re.MULTILINE)
_FUTURE = b"from __future__ import annotations\n"


def script_path(name: str) -> Path:
    """Path of an on-box script (``runner``, ``probe``, ``manifest``, ``audit``)."""
    if name not in SCRIPTS:
        raise ValueError(f"unknown on-box script {name!r}; expected one of {SCRIPTS}")
    return Path(__file__).with_name(name + ".py")


def script_source(name: str) -> bytes:
    """The exact bytes to send on stdin for ``python3 - ARGS`` or to write as NAME.py on a box:
    the script with its ``_common`` import block replaced by the body of ``_common.py``."""
    source = script_path(name).read_bytes()
    common = Path(__file__).with_name("_common.py").read_bytes()
    body = common[common.index(_FUTURE) + len(_FUTURE) :]
    spliced, count = _COMMON_IMPORT.subn(lambda _: body.lstrip(b"\n"), source)
    if count != 1:
        raise RuntimeError(f"{name}.py needs exactly one _common import block, found {count}")
    return spliced


# The shipped package's __init__: the laptop's version, and the rest of an `rgt` the image may
# have installed stays importable (`rgt.ckpt` resolves here first, other subpackages there).
_CKPT_INIT = '''"""rgt.ckpt as {shipped} (rgt {version})."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
__version__ = {version!r}
'''


def ckpt_package(shipped: str) -> dict[str, bytes]:
    """Relative path → bytes of the package a job imports `rgt.ckpt` from on a box:
    `rgt/__init__.py` (its docstring: "rgt.ckpt as SHIPPED"), `rgt/errors.py` (its
    errors are `UserError`s) and every module of `rgt/ckpt/`. One list of files for every way
    rgt ships it (`rgt run`'s RUN_DIR/lib, a notebook's or a kernel's embedded tarball)."""
    root = Path(rgt.__file__).parent
    init = _CKPT_INIT.format(shipped=shipped, version=rgt.__version__)
    files = {"rgt/__init__.py": init.encode(), "rgt/errors.py": (root / "errors.py").read_bytes()}
    for module in sorted((root / "ckpt").glob("*.py")):
        files[f"rgt/ckpt/{module.name}"] = module.read_bytes()
    return files
