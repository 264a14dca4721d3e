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
"""

from __future__ import annotations

import re
from pathlib import Path

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
