"""rgt on-box manifest: the evidence of what a run produced, built where the files are.

Usage (standard library only, Python >= 3.8; ship it on stdin or as a file):

    python3 manifest.py ROOT OUT_JSONL [PATTERN...]
    python3 - ROOT OUT_JSONL [PATTERN...] < manifest.py

For every file matching the declared output PATTERNs (globs relative to ROOT, ``**`` recursive,
or absolute paths; a matched directory is recursed) records path (relative to ROOT, POSIX
separators; absolute when outside ROOT), bytes and sha256. A symlink is recorded as what it is
(``{"path", "link": target}``), never hashed through: the laptop decides what to make of it.
A pattern that matches no file is listed under ``missing`` — never silently dropped: an absent
checkpoint is exactly what the pull must notice. No PATTERN: an empty manifest.

OUT_JSONL is JSON Lines, written atomically (tmp + fsync + rename) and streamed, so a
million-file manifest is never one document in memory, here or on the laptop:

    {"manifest_version": 2, "created": ..., "host": ..., "root": ..., "patterns": [...]}
    {"path": "out/a.bin", "bytes": 3, "sha256": "...", "mtime": ...}  one line per file, by path
    {"path": "ckpt/latest", "link": "ckpt-5.pt"}
    {"end": true, "count": N, "total_bytes": B, "missing": [...], "seconds": S}

Prints a one-line JSON summary. Exit 0: written, nothing missing; 2: written, some declared
output missing; 1: could not read or write.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from rgt.onbox._common import TMP_SUFFIX, match_outputs, sha256_file

MANIFEST_VERSION = 2


def entries(root: str, patterns, exclude=()):
    """(entries sorted by path, missing patterns); an entry is (kind, path, abs path)."""
    found, missing = match_outputs(root, patterns, exclude)
    root = os.path.abspath(root)
    links, out = set(), []
    for path, rel in found:
        link = _first_link(root, rel)
        if link is None:
            out.append(("file", rel, path))
        elif link not in links:  # a linked directory is one link entry, not its files
            links.add(link)
            out.append(("link", link, os.path.join(root, *link.split("/"))))
    out.sort(key=lambda e: e[1])
    return out, missing


def _first_link(root: str, rel: str):
    """REL or its first ancestor below ROOT that is a symlink, else None."""
    if rel.startswith("/"):
        return rel if os.path.islink(rel) else None
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        if os.path.islink(os.path.join(root, *parts[:i])):
            return "/".join(parts[:i])
    return None


def records(root: str, patterns, exclude=()):
    """The manifest's lines as objects, hashing each file as it goes."""
    started = time.time()
    listed, missing = entries(root, patterns, exclude)
    yield {"manifest_version": MANIFEST_VERSION, "created": round(time.time(), 3),
           "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host": socket.gethostname(), "root": os.path.abspath(root),
           "patterns": list(patterns)}
    count = total = 0
    for kind, rel, path in listed:
        if kind == "link":
            yield {"path": rel, "link": os.readlink(path)}
            continue
        try:  # when it was written: the laptop orders checkpoints by it (rgt.ckpt.newest)
            st = os.stat(path)
            mtime, disk = round(st.st_mtime, 3), getattr(st, "st_blocks", -1) * 512
        except OSError:
            mtime, disk = None, -1
        size, digest = sha256_file(path)
        count, total = count + 1, total + size
        record = {"path": rel, "bytes": size, "sha256": digest, "mtime": mtime}
        if 0 <= disk < size:  # sparse: a pull writes its holes as holes (rgt.onbox.xfer)
            record["disk"] = disk
        yield record
    yield {"end": True, "count": count, "total_bytes": total, "missing": missing,
           "seconds": round(time.time() - started, 3)}


def build(root: str, patterns, exclude=()) -> dict:
    """The manifest as one dict (header, "files", trailer), for callers that want it whole."""
    lines = list(records(root, patterns, exclude))
    return {**lines[0], **lines[-1], "files": lines[1:-1]}


def write(root: str, out: str, patterns, exclude=()) -> dict:
    """Stream the manifest to OUT atomically; returns its end record."""
    out = os.path.abspath(out)
    tmp = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.{os.getpid()}{TMP_SUFFIX}")
    try:
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
            for record in records(root, patterns, exclude):
                f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return record


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] in ("-h", "--help"):
        sys.stderr.write("usage: python3 manifest.py ROOT OUT_JSONL [PATTERN...]\n")
        return 1
    root, out, patterns = args[0], args[1], args[2:]
    if not os.path.isdir(root):
        print(json.dumps({"error": f"root {root} is not a directory", "out": None}))
        return 1
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        manifest = write(root, out, patterns, exclude=[out])
    except OSError as exc:
        print(json.dumps({"error": f"{exc.strerror or exc}: {exc.filename}", "out": out}))
        return 1
    summary = {k: manifest[k] for k in ("count", "total_bytes", "missing", "seconds")}
    summary["root"] = os.path.abspath(root)
    summary["out"] = os.path.abspath(out)
    print(json.dumps(summary, sort_keys=True))
    return 2 if manifest["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
