"""The Transport of a Kubernetes box: a short-lived "door" pod on the box's PVC, reached through
the API server's pod proxy.

Why this path. A pod has no SSH and rsync cannot reach it; what a real cluster offers for files
is (a) `kubectl cp`, which is `tar` over the exec subresource — a SPDY/WebSocket stream httpx
does not speak, neither resumable nor easy to check; (b) a pod's log, which the kubelet rotates
at 10 MiB (containerLogMaxSize) and stores as text lines, so it loses and mangles binary data;
(c) the pod proxy subresource: plain HTTP from the API server to a pod's port, with the same
RBAC as everything else (`pods/proxy`), request bodies for uploads and `Range` for resuming a
download. rgt uses (c): the door pod runs `rgt.onbox.door` (stdlib Python from the job's own
image) with the claim mounted where the Job mounts it, answers only requests that carry its
random token, deletes itself after an hour at the latest (activeDeadlineSeconds) and is deleted
by `close()` at once. The token lives in a Secret made for the door and deleted with it; the pod
spec only names it (secretKeyRef), so `get pods` does not show it. Code reaches the claim the
same way (a tar on a PUT), so the image stays the environment only, pinned by digest (U30), and
a code change needs no image build.

A ReadWriteOnce claim attaches to one node at a time: while a door holds it, a Job pod on
another node waits (Multi-Attach, K8S4) until the door is gone — seconds, since `rgt` closes it
right after the verb.
"""

from __future__ import annotations

import base64
import contextlib
import os
import posixpath
import secrets
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.onbox import script_source
from rgt.onbox.xfer import compile_excludes, excluded
from rgt.platforms.k8s.api import CORE, ApiError, Kube
from rgt.platforms.k8s.manifests import (
    DOOR_PORT,
    dns_name,
    door_manifest,
    door_secret_manifest,
)
from rgt.transport import Result, TransferStats, TransportError
from rgt.transport.base import Progress

OPEN_TIMEOUT_S = 300   # pulling the image onto a CPU node may take minutes on a real cluster
CHUNK = 1 << 20


def open_timeout() -> float:
    """How long a door may take to serve (RGT_K8S_DOOR_TIMEOUT_S; tests shorten it)."""
    try:
        return float(os.environ.get("RGT_K8S_DOOR_TIMEOUT_S") or OPEN_TIMEOUT_S)
    except ValueError:
        return OPEN_TIMEOUT_S


class DoorTransport:
    """`run`, `put` and `get` on the box's PVC, through one door pod opened on first use."""

    def __init__(self, kube: Kube, *, box: str, claim: str, mount_path: str, image: str,
                 python: str = "python3", pull_secret: str | None = None,
                 diagnose: Any = None) -> None:
        self.kube, self.box, self.claim, self.mount_path = kube, box, claim, mount_path
        self.image, self.python, self.pull_secret = image, python, pull_secret
        self.diagnose = diagnose  # (kube, pod) -> (fatal, why) | None: why a pod is stuck
        self.pod: str | None = None
        self.secret: str | None = None
        self.token = ""

    # ------------------------------------------------------------------ the door pod

    def _open(self) -> str:
        if self.pod:
            return self.pod
        self.token = secrets.token_urlsafe(24)
        name = dns_name("rgt-door", self.box, secrets.token_hex(3), limit=63)
        # the token goes in a Secret of the door's own (same name), never in the pod spec:
        # anyone who may read pods could read it there
        self.kube.create(self.kube.ns(CORE, "secrets"),
                         door_secret_manifest(name=name, box=self.box, token=self.token))
        self.secret = name
        manifest = door_manifest(name=name, box=self.box, image=self.image, claim=self.claim,
                                 mount_path=self.mount_path, source=script_source("door")
                                 .decode(), secret=name, pull_secret=self.pull_secret)
        try:
            self.kube.create(self.kube.ns(CORE, "pods"), manifest)
        except BaseException:
            self.shut_door()  # the Secret goes too: nothing is left behind
            raise
        self.pod = name
        deadline = time.monotonic() + open_timeout()
        pause = 0.05
        while True:
            pod = self.kube.find(self.kube.ns(CORE, "pods", name)) or {}
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Running" and self._healthy():
                return name
            trouble = self.diagnose(self.kube, pod) if self.diagnose and pod else None
            if trouble and trouble[0] or phase in ("Failed", "Succeeded") or not pod:
                self.shut_door()
                why = trouble[1] if trouble else (phase or "deleted")
                raise UserError(f"the PVC door pod of {self.box} did not start: {why}")
            if time.monotonic() > deadline:
                self.shut_door()
                why = trouble[1] if trouble else f"still {phase}"
                raise UserError(f"the PVC door pod of {self.box} was not serving after "
                                f"{open_timeout():.0f} s ({why}); rgt deleted it — see "
                                f"`kubectl get events -n {self.kube.namespace}`")
            time.sleep(pause)
            pause = min(0.5, pause * 2)  # a door is usually up in seconds

    def _healthy(self) -> bool:
        try:
            return self._call("GET", "health").status_code == 200
        except ApiError as err:  # 503 until the server listens
            if err.code in (502, 503):
                return False
            raise

    def _call(self, method: str, endpoint: str, **kw: Any):
        assert self.pod is not None
        headers = {"X-Rgt-Door-Token": self.token, **kw.pop("headers", {})}
        return self.kube.request(method, self.kube.proxy_path(self.pod, DOOR_PORT, endpoint),
                                 headers=headers, **kw)

    def close(self) -> None:
        """The door deleted, the API client closed: this transport is done."""
        self.shut_door()
        self.kube.close()

    def shut_door(self) -> None:
        """Delete the door's token Secret, then its pod (the API client stays usable; a later
        call opens a new door, with a new token). Secret first: a pod left behind is found by
        its labels (`rgt down` deletes it and the Secret of its name); a Secret is never
        listed, so none may outlive its pod."""
        if self.secret:
            with contextlib.suppress(UserError):
                self.kube.delete(self.kube.ns(CORE, "secrets", self.secret))
            self.secret = None
        if self.pod:
            # if this fails, its activeDeadlineSeconds ends it within the hour
            with contextlib.suppress(UserError):
                self.kube.request("DELETE", self.kube.ns(CORE, "pods", self.pod),
                                  body={"kind": "DeleteOptions", "apiVersion": "v1",
                                        "gracePeriodSeconds": 0})
            self.pod = None

    # ------------------------------------------------------------------ Transport

    def run(self, command: str, *, stdin: bytes | None = None, timeout: float = 60,
            check: bool = True, limit: int | None = None,
            idle: float | None = None) -> Result:  # (idle: the door answers whole)
        self._open()
        body = {"command": command, "stdin": base64.b64encode(stdin or b"").decode(),
                "timeout": timeout}
        answer = self._call("POST", "run", body=body, timeout=timeout + 30).json()
        out = base64.b64decode(answer.get("stdout") or "")
        if limit is not None and len(out) > limit:  # (the door's answer is already here)
            return Result(-1, out[:limit].decode(errors="replace"), "", truncated=True,
                          data=out[:limit])
        result = Result(int(answer.get("rc", 1)), out.decode(errors="replace"),
                        base64.b64decode(answer.get("stderr") or "").decode(errors="replace"),
                        data=out if limit is not None else b"")
        if check and not result.ok:
            raise TransportError.command_failed(f"the PVC of {self.box}", command, result.rc,
                                                result.stderr)
        return result

    def put(self, local: Path, remote: str, *, timeout: float = 600, retries: int = 5,
            progress: Progress | None = None, exclude: Sequence[str] = ()) -> TransferStats:
        """The directory's contents as one tar on one PUT, spooled to a private temp file
        first (a workdir may hold more than memory should); a retry sends it again."""
        start = time.monotonic()
        last: Exception | None = None
        with tempfile.TemporaryFile(prefix="rgt-push-") as spool:
            files = pack(Path(local), exclude, spool)
            size = spool.tell()
            for attempt in range(1, retries + 1):
                self._open()
                spool.seek(0)
                try:
                    self._call("PUT", "tar", params={"dir": remote}, content=_chunks(spool),
                               headers={"Content-Type": "application/x-tar",
                                        "Content-Length": str(size)}, timeout=timeout)
                    if progress:
                        progress(size, size)
                    return TransferStats(size * attempt, 0, files, time.monotonic() - start,
                                         attempt)
                except UserError as err:
                    last = err
                    if isinstance(err, ApiError) and err.code < 500:
                        break
                    time.sleep(min(30, 2 ** attempt))
        raise TransportError(f"could not send {local} to the PVC of {self.box}: {last}")

    def get(self, remote: str, local: Path, *, timeout: float = 600, retries: int = 5,
            progress: Progress | None = None, exclude: Sequence[str] = ()) -> TransferStats:
        """REMOTE (a file, or a directory's contents) into LOCAL, file by file; an interrupted
        file resumes from its partial copy (Range), and every size is checked on arrival."""
        start = time.monotonic()
        self._open()
        try:
            answer = self._call("GET", "stat", params={"path": remote}).json()
        except ApiError as err:
            raise TransportError(f"{remote} on the PVC of {self.box}: {err}") from None
        entries = answer.get("entries") or []
        rules = compile_excludes(list(exclude))
        local = Path(local)
        local.mkdir(parents=True, exist_ok=True)
        total = sum(int(e.get("size") or 0) for e in entries if e.get("type") == "file")
        done = received = files = 0
        skipped: list[str] = []
        attempts = 1
        for item in entries:
            rel = item.get("path")
            rel = posixpath.basename(remote) if rel == "" else rel
            if not isinstance(rel, str) or not safe_relative(rel):
                raise TransportError(f"the PVC of {self.box} sent an unsafe name {rel!r}")
            if excluded(rules, rel, item.get("type") == "dir"):
                continue
            target = local.joinpath(*rel.split("/"))
            if item.get("type") == "dir":
                target.mkdir(parents=True, exist_ok=True)
            elif item.get("type") == "file":
                size = int(item.get("size") or 0)
                got, tries = self._fetch_file(posixpath.join(remote, item["path"]) if
                                              item["path"] else remote, target, size,
                                              timeout, retries)
                received += got
                attempts = max(attempts, tries)
                files += 1
                done += size
                if progress:
                    progress(done, total)
            else:
                skipped.append(rel)
        return TransferStats(0, received, files, time.monotonic() - start, attempts,
                             tuple(skipped))

    def _fetch_file(self, remote: str, target: Path, size: int, timeout: float,
                    retries: int) -> tuple[int, int]:
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".rgt-part")
        received = 0
        for attempt in range(1, retries + 1):
            have = part.stat().st_size if part.exists() else 0
            if have > size:
                part.unlink()
                have = 0
            try:
                headers = {"Range": f"bytes={have}-"} if have else {}
                response = self._call("GET", "file", params={"path": remote},
                                      headers={"Accept": "*/*", **headers}, stream=True,
                                      timeout=timeout)
                mode = "ab" if have and response.status_code == 206 else "wb"
                with open(part, mode) as out:
                    for block in response.iter_bytes(CHUNK):
                        out.write(block)
                        received += len(block)
                response.close()
            except (UserError, OSError) as err:
                if isinstance(err, ApiError) and err.code == 404:
                    raise TransportError(f"{remote} vanished from the PVC of {self.box} "
                                         "during the pull") from None
                if attempt == retries:
                    raise TransportError(f"could not fetch {remote} from the PVC of "
                                         f"{self.box}: {err}") from None
                time.sleep(min(30, 2 ** attempt))
                continue
            except Exception as err:  # httpx read errors mid-body: resume from the part
                if attempt == retries:
                    raise TransportError(f"could not fetch {remote}: {err}") from None
                continue
            if part.stat().st_size == size:
                os.replace(part, target)
                return received, attempt
        raise TransportError(f"{remote} on the PVC of {self.box} did not arrive whole after "
                             f"{retries} attempts (size changed while pulling?)")


def safe_relative(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and "\x00" not in path and \
        all(p not in ("", ".", "..") for p in parts)


def _chunks(handle) -> Iterator[bytes]:
    while True:
        block = handle.read(CHUNK)
        if not block:
            return
        yield block


def pack(root: Path, exclude: Sequence[str], out) -> int:
    """An uncompressed tar of ROOT's contents into OUT: regular files and directories, with
    `exclude` meaning what it means to every push (rsync's --exclude, rgt.onbox.xfer)."""
    if not root.is_dir():
        raise UserError(f"{root} is not a directory")
    rules = compile_excludes(list(exclude))
    files = 0
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for top, dirs, names in os.walk(root):
            rel_top = os.path.relpath(top, root)
            rel_top = "" if rel_top == "." else rel_top.replace(os.sep, "/")
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(top, d)) and
                             not excluded(rules, posixpath.join(rel_top, d) if rel_top else d,
                                          True))
            for name in dirs:
                rel = posixpath.join(rel_top, name) if rel_top else name
                archive.add(os.path.join(top, name), arcname=rel, recursive=False)
            for name in sorted(names):
                rel = posixpath.join(rel_top, name) if rel_top else name
                path = os.path.join(top, name)
                if excluded(rules, rel, False) or os.path.islink(path) or \
                        not os.path.isfile(path):
                    continue
                archive.add(path, arcname=rel, recursive=False)
                files += 1
    return files
