"""Mirror checkpoints to an off-box fsspec target (``s3://…``, ``gs://…``, ``file://…``, …).

A local disk dies with the machine (vast.ai destroy, Colab disconnect, spot reclaim); the
mirror is what survives. A checkpoint counts as durable only once the remote copy has been
read back and its size and sha256 match what was recorded at save time.

S3-compatible endpoints: pass ``durable_options={"client_kwargs": {"endpoint_url": URL}}`` or
set ``AWS_ENDPOINT_URL`` (honoured for ``s3://`` targets).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RemoteCheck:
    ok: bool
    url: str
    reason: str = ""


class DurableMirror:
    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        try:
            import fsspec
        except ImportError as err:  # pragma: no cover - depends on the environment
            from rgt.ckpt.errors import CheckpointError

            raise CheckpointError(
                f"durable={url!r} needs fsspec (and s3fs for s3://): pip install 'rgt[durable]'"
            ) from err
        options = dict(storage_options or {})
        if url.startswith(("s3://", "s3a://")) and os.environ.get("AWS_ENDPOINT_URL"):
            ck = dict(options.get("client_kwargs") or {})
            ck.setdefault("endpoint_url", os.environ["AWS_ENDPOINT_URL"])
            options["client_kwargs"] = ck
        self.url = url.rstrip("/")
        self.fs, root = fsspec.core.url_to_fs(self.url, **options)
        self.root = root.rstrip("/")
        with contextlib.suppress(Exception):  # object stores have no directories
            self.fs.makedirs(self.root, exist_ok=True)

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def url_of(self, name: str) -> str:
        return f"{self.url}/{name}"

    def _fresh(self, path: str) -> None:
        with contextlib.suppress(Exception):
            self.fs.invalidate_cache(path)

    def put_file(self, local: str, name: str) -> None:
        self.fs.put_file(local, self._path(name))
        self._fresh(self._path(name))

    def put_bytes(self, data: bytes, name: str) -> None:
        self.fs.pipe_file(self._path(name), data)
        self._fresh(self._path(name))

    def cat(self, name: str) -> bytes:
        self._fresh(self._path(name))
        return self.fs.cat_file(self._path(name))

    def get_file(self, name: str, local: str) -> None:
        self._fresh(self._path(name))
        self.fs.get_file(self._path(name), local)

    def check(self, name: str, size: int, sha256: str) -> RemoteCheck:
        """Read the remote copy back: is it there, is it `size` bytes, does its sha256 match?"""
        path = self._path(name)
        url = self.url_of(name)
        self._fresh(path)
        try:
            info = self.fs.info(path)
        except FileNotFoundError:
            return RemoteCheck(False, url, "missing on the durable target")
        except Exception as err:  # noqa: BLE001 - any backend error means "not verified"
            return RemoteCheck(False, url, f"cannot stat: {err}")
        remote_size = info.get("size")
        if remote_size != size:
            return RemoteCheck(False, url, f"size {remote_size} != {size}")
        h = hashlib.sha256()
        try:
            with self.fs.open(path, "rb", block_size=8 << 20) as f:
                while chunk := f.read(8 << 20):
                    h.update(chunk)
        except Exception as err:  # noqa: BLE001
            return RemoteCheck(False, url, f"cannot read back: {err}")
        if h.hexdigest() != sha256:
            return RemoteCheck(False, url, "sha256 mismatch")
        return RemoteCheck(True, url)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self._path(name))

    def names(self) -> list[str]:
        self._fresh(self.root)
        try:
            entries = self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return []
        return [e.rstrip("/").rsplit("/", 1)[-1] for e in entries]
