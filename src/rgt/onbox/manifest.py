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

import contextlib
import glob
import hashlib
import json
import os
import socket
import sys
import time

MANIFEST_VERSION = 1
BUF_SIZE = 1 << 20


def sha256_file(path: str):
    """(bytes, hex sha256) of PATH, read with one reused 1 MiB buffer."""
    h = hashlib.sha256()
    buf = bytearray(BUF_SIZE)
    view = memoryview(buf)
    size = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
            size += n
    return size, h.hexdigest()


def match_outputs(root: str, patterns, exclude=()):
    """([(absolute path, manifest path)], [patterns that matched no file])."""
    root = os.path.abspath(root)
    exclude = {os.path.abspath(p) for p in exclude}
    found, missing, seen = [], [], set()
    for pattern in patterns:
        full = pattern if os.path.isabs(pattern) else os.path.join(root, pattern)
        files = []
        for match in sorted(glob.glob(full, recursive=True)):
            if os.path.isdir(match):
                for base, dirs, names in os.walk(match):
                    dirs.sort()
                    files.extend(os.path.join(base, n) for n in sorted(names))
            else:
                files.append(match)
        files = [os.path.abspath(f) for f in files if os.path.isfile(f)]
        files = [f for f in files if f not in exclude and not f.endswith(".rgt-manifest.tmp")]
        if not files:
            missing.append(pattern)
            continue
        for path in files:
            rel = os.path.relpath(path, root)
            if rel == ".." or rel.startswith(".." + os.sep):
                rel = path
            rel = rel.replace(os.sep, "/")
            if rel not in seen:
                seen.add(rel)
                found.append((path, rel))
    return found, missing


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


def write_json_atomic(path: str, obj) -> None:
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.rgt-manifest.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


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
