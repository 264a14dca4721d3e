"""A fake Kaggle API that the official client (kaggle 2.2.4 / kagglesdk 0.1.37) talks to unchanged.

How the client gets here: with KAGGLE_API_ENVIRONMENT=LOCALHOST, KaggleApi adds `--local`
(kaggle_api_extended.py) and kagglesdk then POSTs to http://localhost/api/v1/<service>/<method>
(kaggle_http_client.py `_get_request_url`), JSON bodies in camelCase (kaggle_object.py), Basic
auth (username, key) for a legacy key. Port 80 would need root, so the test sets HTTP_PROXY to
this server: requests sends the absolute URL and we answer as that host would.

Speaks (shapes from kagglesdk/kernels/types/kernels_api_service.py):
  kernels.KernelsApiService/SaveKernel              ApiSaveKernelRequest → ApiSaveKernelResponse
  kernels.KernelsApiService/GetKernelSessionStatus  → {"status": "RUNNING"|..., "failureMessage"}
      the KernelWorkerStatus names (kernels_enums.py); QUEUED, the enum's 0, is left out of
      the answer as protobuf's JSON leaves a default out (the client reads it back as QUEUED)
  kernels.KernelsApiService/ListKernelSessionOutput ApiListKernelSessionOutputRequest {userName,
      kernelSlug, pageSize, pageToken, versionLabel} → {"files": [{"url", "fileName"}], "log",
      "nextPageToken"}: one page of at most pageSize files (the server's own cap applies, and
      a missing pageSize means its default), nextPageToken set while more follow; a token the
      server did not hand out is refused (400)
  kernels.KernelsApiService/GetAcceleratorQuotaStatistics → {"gpuQuota": {"timeUsed": "12.5s"..}}
and GET of the output URLs it hands out. Errors are {"code": N, "message": "..."} with that HTTP
status (what kagglesdk turns into HTTPError).

"Running" a version: the script runs here as a process with RGT_KAGGLE_ROOT pointing at a
directory holding input/ (the kernel sources' latest outputs), working/ and temp/. As on
Kaggle, a script that exits non-zero or outlives the session cap is ERROR and its working/
is thrown away (NB2); otherwise working/ becomes the version's output.

A pushed version waits QUEUED (at least `queue_s`, and while `max_sessions` versions run)
before it runs, as Kaggle queues sessions. `statuses` scripts what the status call answers for
a kernel (a list of raw values, one per call, the last repeated: "PREEMPTED", 7, ...) to try
a client against statuses it does not know.

Where the real service may differ: the enum spelling on the wire (kagglesdk accepts both
"RUNNING" and prefixed names), the exact error texts, the page sizes (the default and the cap
here are the fake's: kagglesdk's own kernels_output asks for 20), how long a queue lasts and
how many sessions run at once, the GPU itself (none here),
the mount path of a kernel source under /kaggle/input (rgt's script searches for its marker
instead of assuming one), and whether a kernel may list itself as a source (not used).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

PREFIX = "/api/v1/kernels.KernelsApiService/"
SHAPES = {"NvidiaTeslaT4", "NvidiaTeslaP100", "TpuV5E8"}


class FakeKaggle:
    def __init__(self, root: Path, user: str = "alice", key: str = "k3y",
                 session_cap_s: float = 60, gpu_quota_s: float = 30 * 3600,
                 refuse_saves: str | None = None, queue_s: float = 0.5,
                 max_sessions: int = 2, page_default: int = 20, page_cap: int = 100) -> None:
        self.root, self.user, self.key = root, user, key
        self.queue_s, self.max_sessions = queue_s, max_sessions
        self.page_default, self.page_cap = page_default, page_cap
        self.statuses: dict[str, list] = {}  # slug -> raw status answers, scripted by a test
        self.queue: list[tuple[str, dict]] = []  # (slug, version) waiting for a session
        # an account-level refusal of every save, as the error field of a 200 answer (the
        # shape of the quota refusal; the text is the test's, not one Kaggle is known to send)
        self.refuse_saves = refuse_saves
        self.session_cap_s, self.gpu_quota_s = session_cap_s, gpu_quota_s
        self.gpu_used_s = 0.0
        self.kernels: dict[str, dict] = {}  # slug -> {"versions": [...], "meta": ...}
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.stopped = threading.Event()
        self.scheduler = threading.Thread(target=self._schedule, daemon=True)

    @property
    def proxy(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeKaggle:
        self.thread.start()
        self.scheduler.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.server.shutdown()
        for kernel in self.kernels.values():
            for v in kernel["versions"]:
                if v.get("proc") and v["proc"].poll() is None:
                    v["proc"].kill()

    # ------------------------------------------------------------------ kernels

    def _schedule(self) -> None:
        """Start queued versions in order once they have waited queue_s and a session is free."""
        while not self.stopped.wait(0.05):
            with self.lock:
                running = sum(v["status"] == "RUNNING" for k in self.kernels.values()
                              for v in k["versions"])
                ready = [(slug, v) for slug, v in self.queue
                         if time.monotonic() - v["queued_at"] >= self.queue_s]
                start = ready[:max(0, self.max_sessions - running)]
                for item in start:
                    self.queue.remove(item)
                    item[1]["status"] = "RUNNING"  # before the lock is let go: counted
            for slug, version in start:
                self._run_version(slug, version)

    def _run_version(self, slug: str, version: dict) -> None:
        base = self.root / "sessions" / f"{slug}-v{version['number']}"
        for d in ("input", "working", "temp"):
            (base / d).mkdir(parents=True)
        for source in version["kernel_sources"]:
            src_slug = source.split("/", 1)[1]
            done = [v for v in self.kernels[src_slug]["versions"] if v.get("output")]
            if done:
                shutil.copytree(done[-1]["output"], base / "input" / src_slug)
        (base / "script.py").write_text(version["text"])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KAGGLE_", "HTTP"))}
        env.update(RGT_KAGGLE_ROOT=str(base), KAGGLE_KERNEL_RUN_TYPE="Batch")
        log = open(base / "session.log", "wb")  # noqa: SIM115 - closed by the watcher
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, str(base / "script.py")], cwd=base / "working",
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        version.update(proc=proc, base=base)

        def watch() -> None:
            try:
                rc = proc.wait(self.session_cap_s)
                capped = False
            except subprocess.TimeoutExpired:
                proc.kill()
                rc, capped = proc.wait(), True
            log.close()
            with self.lock:
                if version["gpu"]:
                    self.gpu_used_s += time.monotonic() - started
                version["log"] = (base / "session.log").read_text(errors="replace")
                if rc == 0 and not capped:
                    version.update(status="COMPLETE", output=base / "working")
                else:
                    version.update(status="ERROR", failure=(
                        "session timed out" if capped else f"script exited {rc}"))
                    shutil.rmtree(base / "working", ignore_errors=True)  # NB2

        threading.Thread(target=watch, daemon=True).start()

    def _save(self, body: dict) -> tuple[int, dict]:
        slug_ref = body.get("slug") or ""
        owner, _, slug = slug_ref.partition("/")
        if owner != self.user:
            return 403, {"code": 403, "message": f"Permission 'kernels.create' was denied "
                                                  f"for {slug_ref!r}"}
        if not body.get("text"):
            return 400, {"code": 400, "message": "Kernel text is required"}
        if body.get("language") not in ("python", "r", "rmarkdown"):
            return 400, {"code": 400, "message": "Invalid language"}
        if body.get("kernelType") not in ("script", "notebook"):
            return 400, {"code": 400, "message": "Invalid kernel type"}
        shape = body.get("machineShape")
        if shape is not None and shape not in SHAPES:
            return 400, {"code": 400, "message": f"Unknown machine shape {shape!r}"}
        gpu = bool(body.get("enableGpu")) or (shape or "").startswith("Nvidia")
        if self.refuse_saves:
            return 200, {"ref": "", "url": "", "error": self.refuse_saves}
        with self.lock:
            if gpu and self.gpu_used_s >= self.gpu_quota_s:
                return 200, {"ref": "", "url": "", "error": "You have exceeded your weekly GPU "
                                                           "quota"}
            bad = [s for s in body.get("kernelDataSources") or []
                   if s.split("/", 1)[-1] not in self.kernels]
            if bad:
                return 200, {"ref": "", "url": "", "invalidKernelSources": bad}
            kernel = self.kernels.setdefault(slug, {"id": len(self.kernels) + 1,
                                                    "versions": []})
            version = {"number": len(kernel["versions"]) + 1, "text": body["text"],
                       "gpu": gpu, "internet": body.get("enableInternet"),
                       "kernel_sources": list(body.get("kernelDataSources") or []),
                       "status": "QUEUED", "queued_at": time.monotonic()}
            kernel["versions"].append(version)
            self.queue.append((slug, version))
        return 200, {"ref": f"/code/{self.user}/{slug}", "url":
                     f"http://localhost/code/{self.user}/{slug}",
                     "versionNumber": version["number"], "kernelId": kernel["id"]}

    def _version(self, body: dict) -> dict | None:
        if body.get("userName") != self.user:
            return None
        kernel = self.kernels.get(body.get("kernelSlug") or "")
        if kernel is None:
            return None
        label = body.get("versionLabel")
        versions = kernel["versions"]
        if label:
            matching = [v for v in versions if str(v["number"]) == str(label)]
            return matching[0] if matching else None
        return versions[-1]

    def answer(self, method: str, body: dict) -> tuple[int, dict]:
        self.requests.append((method, body))
        if method == "SaveKernel":
            return self._save(body)
        if method == "GetAcceleratorQuotaStatistics":
            return 200, {"gpuQuota": {"timeUsed": f"{self.gpu_used_s:.3f}s",
                                      "totalTimeAllowed": f"{self.gpu_quota_s:.0f}s"},
                         "quotaRefreshTime": "2026-07-06T00:00:00.000Z"}
        version = self._version(body)
        if version is None:
            return 404, {"code": 404, "message": "Kernel not found"}
        if method == "GetKernelSessionStatus":
            scripted = self.statuses.get(body["kernelSlug"])
            if scripted:
                said = scripted.pop(0) if len(scripted) > 1 else scripted[0]
                return 200, {"status": said}
            out = {} if version["status"] == "QUEUED" else {"status": version["status"]}
            if version.get("failure"):
                out["failureMessage"] = version["failure"]
            return 200, out
        if method == "ListKernelSessionOutput":
            return self._output_page(body, version)
        return 404, {"code": 404, "message": f"no such method {method}"}

    def _output_page(self, body: dict, version: dict) -> tuple[int, dict]:
        size = body.get("pageSize")
        if size is not None and (type(size) is not int or size < 0):
            return 400, {"code": 400, "message": "Invalid page size"}
        size = min(size or self.page_default, self.page_cap)
        files = []
        if version.get("output"):
            root = Path(version["output"])
            files = [p for p in sorted(root.rglob("*")) if p.is_file()]
        start = 0
        if body.get("pageToken"):
            # opaque to the client: the version and the offset, as the server handed it out
            try:
                number, start = json.loads(base64.urlsafe_b64decode(body["pageToken"]))
            except (ValueError, TypeError):
                return 400, {"code": 400, "message": "Invalid page token"}
            if number != version["number"] or type(start) is not int or \
                    not 0 < start < len(files):
                return 400, {"code": 400, "message": "Invalid page token"}
        page = files[start:start + size]
        out = {"files": [{"url": "http://localhost/fake-output/"
                                 + base64.urlsafe_b64encode(str(p).encode()).decode(),
                          "fileName": p.relative_to(root).as_posix()} for p in page],
               "log": version.get("log", "")}
        if start + size < len(files):
            out["nextPageToken"] = base64.urlsafe_b64encode(
                json.dumps([version["number"], start + size]).encode()).decode()
        return 200, out

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, payload: bytes, ctype: str, extra=()) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def _authorized(self) -> bool:
                expect = base64.b64encode(f"{fake.user}:{fake.key}".encode()).decode()
                return self.headers.get("Authorization") == f"Basic {expect}"

            def do_POST(self) -> None:
                path = urlsplit(self.path).path
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not path.startswith(PREFIX):
                    return self._send(404, b'{"code":404,"message":"not found"}',
                                      "application/json")
                if not self._authorized():
                    return self._send(401, b'{"code":401,"message":"Unauthenticated"}',
                                      "application/json")
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    return self._send(400, b'{"code":400,"message":"bad json"}',
                                      "application/json")
                code, out = fake.answer(path[len(PREFIX):], body)
                self._send(code, json.dumps(out).encode(), "application/json")

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if not path.startswith("/fake-output/"):
                    return self._send(404, b"not found", "text/plain")
                file = Path(base64.urlsafe_b64decode(path.rsplit("/", 1)[1]).decode())
                data = file.read_bytes()
                self._send(200, data, "application/octet-stream",
                           [("Last-Modified", time.strftime("%a, %d %b %Y %H:%M:%S GMT",
                                                            time.gmtime()))])

        return Handler


def client_env(fake: FakeKaggle, home: Path) -> dict[str, str]:
    """The environment for a process that runs the official client against `fake`."""
    return {"KAGGLE_API_ENVIRONMENT": "LOCALHOST", "HTTP_PROXY": fake.proxy,
            "http_proxy": fake.proxy, "NO_PROXY": "", "no_proxy": "",
            "KAGGLE_USERNAME": fake.user, "KAGGLE_KEY": fake.key,
            "KAGGLE_CONFIG_DIR": str(home / ".kaggle"), "HOME": str(home)}
