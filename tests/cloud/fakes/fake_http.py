"""A tiny JSON HTTP server on 127.0.0.1 for faking a cloud control plane in tests.

`FakeApi.handle(method, path, query, body)` returns (status, json_body); the base class does the
threading, the request log (`requests`), authentication and injected failures: `fail_next` (a
429/5xx answered before the real handler, as a rate-limited control plane does now and then)
and `fail_after` (the real handler DOES the work, then the client gets a 5xx or a dropped
connection instead of the answer: a proxy timing out after the backend created an instance).
A handler may answer (status, body, headers) to send headers (Retry-After, Location).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class FakeApi:
    prefix = ""  # the API's path prefix, e.g. /api/v1

    def __init__(self, key: str) -> None:
        self.key = key
        self.requests: list[Request] = []
        self.failures: list[int] = []
        self.after: list[tuple[str, str, int]] = []  # (method, path prefix, status or 0 = drop)
        # (method, path prefix, status, how many such requests to serve first)
        self.before: list[tuple[str, str, int, int]] = []
        self.lock = threading.RLock()
        self.server: ThreadingHTTPServer | None = None

    # to override ---------------------------------------------------------------------------

    def authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.key}"

    def unauthorized(self) -> tuple[int, Any]:
        return 401, {"error": "unauthorized"}

    def handle(self, req: Request) -> tuple[int, Any]:
        raise NotImplementedError

    # plumbing ------------------------------------------------------------------------------

    def fail_next(self, status: int = 429, times: int = 1) -> None:
        with self.lock:
            self.failures += [status] * times

    def fail_after(self, method: str, path_start: str, status: int = 502) -> None:
        """The next `method path_start…` is done, then answered `status` (0: connection closed
        with no answer)."""
        with self.lock:
            self.after.append((method, path_start, status))

    def fail_before(self, method: str, path_start: str, status: int = 502,
                    skip: int = 0) -> None:
        """The next `method path_start…` (after `skip` served) is answered `status` WITHOUT
        doing the work."""
        with self.lock:
            self.before.append((method, path_start, status, skip))

    def calls(self, method: str, path_start: str = "") -> list[Request]:
        with self.lock:
            return [r for r in self.requests
                    if r.method == method and r.path.startswith(path_start)]

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.prefix}"

    def _dispatch(self, method: str, raw_path: str, headers: dict[str, str],
                  raw_body: bytes) -> tuple[int, Any, dict[str, str]]:
        parts = urlsplit(raw_path)
        path = parts.path
        if not path.startswith(self.prefix):
            return 404, {"error": "not found"}, {}
        path = path[len(self.prefix):] or "/"
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            return 400, {"error": "invalid json"}, {}
        req = Request(method, path, query, body, headers)
        with self.lock:
            self.requests.append(req)
            if not self.authorized(headers):
                status, payload = self.unauthorized()
                return status, payload, {}
            if self.failures:
                status = self.failures.pop(0)
                return status, {"error": "rate limited" if status == 429 else "server error"}, \
                    {"Retry-After": "0"}
            for i, (m, start, code, skip) in enumerate(self.before):
                if m == method and path.startswith(start):
                    if skip:
                        self.before[i] = (m, start, code, skip - 1)
                        break
                    del self.before[i]
                    return code, {"error": "bad gateway" if code >= 500 else "refused"}, {}
            answer = self.handle(req)
            status, payload = answer[0], answer[1]
            headers = answer[2] if len(answer) > 2 else {}
            for i, (m, start, code) in enumerate(self.after):
                if m == method and path.startswith(start) and status < 400:
                    del self.after[i]
                    return code, {"error": "bad gateway"}, {"X-Drop": "1"} if code == 0 else {}
            return status, payload, headers

    def start(self) -> FakeApi:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, payload, extra = fake._dispatch(self.command, self.path, headers, raw)
                if status == 0:  # the work is done; the answer never arrives
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                # 204 No Content carries no body at all (RunPod's DELETE answers so)
                data = b"" if status == 204 else json.dumps(payload).encode()
                self.send_response(status)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
