"""The door: a tiny HTTP server in a short-lived pod that mounts a run's PersistentVolumeClaim.

rgt reaches it only through the Kubernetes API server's pod proxy
(``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/...``), so it needs no Service, no port-forward
and no exec stream. Every request must carry the pod's token (``X-Rgt-Door-Token``), which the
pod gets from a Secret of its own (``RGT_DOOR_TOKEN`` by secretKeyRef: never in the pod spec,
never passed on to the commands it runs); the pod binds to its own pod IP (``RGT_DOOR_HOST``,
from the downward API).

    GET  /health                   "ok"
    POST /run                      {"command", "stdin" (base64), "timeout"} → {"rc", "stdout",
                                   "stderr"} (base64): one bash command, as a Transport runs it
    GET  /stat?path=P              the tree under P: [{"path", "type", "size", "mode"}] (links
                                   listed with their target, never followed)
    GET  /file?path=P              the bytes of P; ``Range: bytes=N-`` resumes from byte N
    PUT  /tar?dir=D                an uncompressed tar on the body, unpacked under D (regular
                                   files and directories only; no absolute or ``..`` names)

Standard library only, Python 3.8+: it runs under whatever Python the job's image has.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from rgt.onbox._common import HASH_BUF_SIZE, TMP_SUFFIX, fsync_dir

CHUNK = HASH_BUF_SIZE
TOKEN = os.environ.get("RGT_DOOR_TOKEN", "")
# what a /run command sees: the pod's environment without the token (it came from the door's
# Secret through secretKeyRef; a command has no use for it, and its output travels back)
COMMAND_ENV = {k: v for k, v in os.environ.items() if k != "RGT_DOOR_TOKEN"}


def walk(root):
    """Every entry under ROOT (or ROOT itself when it is a file), relative paths, sorted."""
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode):
        return [entry("", root, info)]
    out = []
    for top, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(top, root)
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(top, name)
            child = name if rel == "." else rel + "/" + name
            out.append(entry(child, path, os.lstat(path)))
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    return out


def entry(rel, path, info):
    if stat.S_ISLNK(info.st_mode):
        return {"path": rel, "type": "link", "target": os.readlink(path), "size": 0,
                "mode": 0o777}
    kind = "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) \
        else "other"
    return {"path": rel, "type": kind, "size": info.st_size if kind == "file" else 0,
            "mode": stat.S_IMODE(info.st_mode), "mtime": info.st_mtime}


def safe_member(name):
    parts = name.split("/")
    return not (name.startswith("/") or ".." in parts or "\x00" in name)


def unpack(stream, dest):
    """Regular files and directories from a tar stream; anything else is refused by name."""
    count = 0
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            if not safe_member(member.name):
                raise ValueError(f"unsafe name in the archive: {member.name!r}")
            target = os.path.join(dest, member.name)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            if not member.isfile():
                continue  # links and devices: code needs neither
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            source = archive.extractfile(member)
            tmp = target + TMP_SUFFIX
            with open(tmp, "wb") as out:
                shutil.copyfileobj(source, out, CHUNK)
            os.chmod(tmp, member.mode & 0o777 or 0o644)
            os.replace(tmp, target)
            count += 1
    fsync_dir(dest)
    return count


class Door(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # the pod log stays quiet
        pass

    def _allowed(self):
        given = self.headers.get("X-Rgt-Door-Token", "")
        if TOKEN and hmac.compare_digest(given.encode(), TOKEN.encode()):
            return True
        self._send(403, b"wrong or missing door token\n")
        return False

    def _send(self, code, body, kind="text/plain", headers=None):
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data, code=200):
        self._send(code, json.dumps(data).encode(), "application/json")

    def _query(self):
        url = urlparse(self.path)
        return url.path, {k: v[0] for k, v in parse_qs(url.query).items()}

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        if not self._allowed():
            return
        path, query = self._query()
        try:
            if path == "/health":
                self._send(200, b"ok\n")
            elif path == "/stat":
                self._json({"entries": walk(query["path"])})
            elif path == "/file":
                self._file(query["path"])
            else:
                self._send(404, b"no such endpoint\n")
        except (OSError, KeyError) as err:
            missing = isinstance(err, FileNotFoundError)
            self._json({"error": str(err), "missing": missing}, 404 if missing else 400)

    def _file(self, path):
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = 0
            wanted = self.headers.get("Range", "")
            if wanted.startswith("bytes=") and wanted[6:].rstrip("-").isdigit():
                start = min(int(wanted[6:].rstrip("-")), size)
            handle.seek(start)
            self.send_response(206 if start else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.end_headers()
            left = size - start
            while left > 0:
                block = handle.read(min(CHUNK, left))
                if not block:
                    break
                self.wfile.write(block)
                left -= len(block)

    def do_POST(self):  # noqa: N802
        if not self._allowed():
            return
        path, _ = self._query()
        if path != "/run":
            self._send(404, b"no such endpoint\n")
            return
        try:
            request = json.loads(self._body().decode())
            stdin = base64.b64decode(request.get("stdin") or "")
            done = subprocess.run(["bash", "-c", request["command"]], input=stdin,
                                  capture_output=True, env=COMMAND_ENV,
                                  timeout=float(request.get("timeout") or 60))
            self._json({"rc": done.returncode,
                        "stdout": base64.b64encode(done.stdout).decode(),
                        "stderr": base64.b64encode(done.stderr).decode()})
        except subprocess.TimeoutExpired:
            self._json({"rc": 124, "stdout": "", "timeout": True,
                        "stderr": base64.b64encode(b"timed out in the door").decode()})
        except (ValueError, KeyError) as err:
            self._json({"error": f"bad request: {err}"}, 400)

    def do_PUT(self):  # noqa: N802
        if not self._allowed():
            return
        path, query = self._query()
        if path != "/tar" or "dir" not in query:
            self._send(404, b"no such endpoint\n")
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            os.makedirs(query["dir"], exist_ok=True)
            files = unpack(Limited(self.rfile, length), query["dir"])
            self._json({"files": files})
        except (OSError, ValueError, tarfile.TarError) as err:
            self._json({"error": str(err)}, 400)


class Limited:
    """The request body as a stream that ends at Content-Length (the socket does not)."""

    def __init__(self, raw, length):
        self.raw, self.left = raw, length

    def read(self, size=-1):
        if self.left <= 0:
            return b""
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.raw.read(size)
        self.left -= len(data)
        return data


def main():
    if not TOKEN:
        sys.exit("RGT_DOOR_TOKEN is not set; refusing to serve without it")
    host = os.environ.get("RGT_DOOR_HOST") or "0.0.0.0"
    port = int(os.environ.get("RGT_DOOR_PORT") or 8470)
    server = ThreadingHTTPServer((host, port), Door)
    print(f"[rgt] door listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
