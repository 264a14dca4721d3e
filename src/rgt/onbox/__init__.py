"""Code that runs ON the rented box.

Every module here is standard-library-only Python >= 3.8 and self-contained: the launcher ships
one file over SSH on stdin (``python3 - ARGS < runner.py``), so a module may not import ``rgt``
or a sibling. They stay importable from the package so tests (and the local lifecycle) can call
their pure helpers, and so ``script_source(name)`` can hand the exact text to a transport.

- ``runner``   detached job runner: state.json, log, signal forwarding, verified durable sync
- ``probe``    one-shot reconciliation of state.json with the real process + a verdict (U3 ladder)
- ``manifest`` PULL_MANIFEST.json (path, bytes, sha256) of the declared outputs
- ``audit``    pre-run audit: disks (bytes + inodes), cgroup limits, GPUs, Python/torch, HF cache
"""

from __future__ import annotations

from pathlib import Path

SCRIPTS = ("runner", "probe", "manifest", "audit")


def script_path(name: str) -> Path:
    """Path of an on-box script (``runner``, ``probe``, ``manifest``, ``audit``)."""
    if name not in SCRIPTS:
        raise ValueError(f"unknown on-box script {name!r}; expected one of {SCRIPTS}")
    return Path(__file__).with_name(name + ".py")


def script_source(name: str) -> bytes:
    """The exact bytes to send on stdin for ``python3 - ARGS``."""
    return script_path(name).read_bytes()
