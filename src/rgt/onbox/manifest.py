#!/usr/bin/env python3
"""rgt on-box manifest: the evidence of what a run produced, built where the files are.

Usage (standard library only, Python >= 3.8; ship it on stdin or as a file):

    python3 manifest.py ROOT OUT_JSON PATTERN...
    python3 - ROOT OUT_JSON PATTERN... < manifest.py

For every file matching the declared output PATTERNs (globs relative to ROOT, ``**`` recursive,
or absolute paths; a matched directory is recursed) records path (relative to ROOT, POSIX
separators; absolute when outside ROOT), bytes and sha256, and writes OUT_JSON atomically
(tmp + fsync + rename). A pattern that matches no file is listed under ``missing`` — never
silently dropped: an absent checkpoint is exactly what the pull must notice.

Prints a one-line JSON summary. Exit 0: written, nothing missing; 2: written, some declared
output missing; 1: could not read or write.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from rgt.onbox._common import match_outputs, sha256_file, write_json_atomic

MANIFEST_VERSION = 1


def build(root: str, patterns, exclude=()) -> dict:
    started = time.time()
    found, missing = match_outputs(root, patterns, exclude)
    files = []
    for path, rel in found:
        size, digest = sha256_file(path)
        files.append({"path": rel, "bytes": size, "sha256": digest})
    return {
        "manifest_version": MANIFEST_VERSION,
        "created": round(time.time(), 3),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": socket.gethostname(),
        "root": os.path.abspath(root),
        "patterns": list(patterns),
        "files": files,
        "missing": missing,
        "count": len(files),
        "total_bytes": sum(f["bytes"] for f in files),
        "seconds": round(time.time() - started, 3),
    }


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] in ("-h", "--help"):
        sys.stderr.write("usage: python3 manifest.py ROOT OUT_JSON PATTERN...\n")
        return 1
    root, out, patterns = args[0], args[1], args[2:]
    if not os.path.isdir(root):
        print(json.dumps({"error": f"root {root} is not a directory", "out": None}))
        return 1
    try:
        manifest = build(root, patterns, exclude=[out])
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        write_json_atomic(out, manifest)
    except OSError as exc:
        print(json.dumps({"error": f"{exc.strerror or exc}: {exc.filename}", "out": out}))
        return 1
    summary = {k: manifest[k] for k in ("count", "total_bytes", "missing", "seconds", "root")}
    summary["out"] = os.path.abspath(out)
    print(json.dumps(summary, sort_keys=True))
    return 2 if manifest["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
