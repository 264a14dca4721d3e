"""Kaggle through the official `kaggle` client (kaggle==2.2.4, kagglesdk==0.1.37 tested).

`kernel_folder` writes what `kaggle kernels push -p DIR` reads: kernel-metadata.json with the
accelerator and internet switches set explicitly (never inherited: NB3) and the script kernel
(rgt.onbox.kaggle_kernel with the job's code and rgt.ckpt embedded). `KaggleClient` wraps the
client's KaggleApi: push, status, output, quota, each failure one UserError. What Kaggle
answers is input from outside: a status is read from the answer's JSON and checked
(`parse_status`: one it does not know is "unknown" with the raw value), an output listing is
followed page by page (nextPageToken) to its end, each file name checked (`output_name`).

The client reads its credentials itself: KAGGLE_USERNAME + KAGGLE_KEY, kaggle.json in
KAGGLE_CONFIG_DIR (default ~/.kaggle or ~/.config/kaggle), or KAGGLE_API_TOKEN.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import pprint
import re
from pathlib import Path
from typing import Any, NamedTuple

from rgt.errors import UserError
from rgt.platforms.notebook.build import _tar_gz, bundle_workdir, ckpt_library

RUNTIME = Path(__file__).resolve().parents[2] / "onbox" / "kaggle_kernel.py"
SCRIPT = "rgt-kernel.py"
WORKING_LIMIT = 20 * 10**9  # /kaggle/working (kaggle profile: storage.working.cap)
MAX_OUTPUT_FILES = 200_000  # a version's output listing, all its pages
MAX_EMBEDDED = 1 << 20  # the code travels inside the script; bigger belongs in a dataset
# Accelerator names the client documents (kaggle 2.2.x `--accelerator` help); P100 is retired.
SHAPES = {"T4": "NvidiaTeslaT4"}
SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{3,49}$")


def machine_shape(gpu: str | None) -> str | None:
    if not gpu:
        return None
    model, _, count = gpu.partition(":")
    shape = SHAPES.get(model.upper())
    if shape is None or int(count or 1) > 2:
        raise UserError(f"Kaggle cannot honour resources.gpu {gpu!r}: its sessions offer "
                        "T4:1 or T4:2 (P100 is retired and runs on a T4); use gpu: T4")
    return shape


def kernel_slug(job: str, attempt: int) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", f"rgt-{job}".lower()).strip("-")[:40]
    slug = base if attempt == 1 else f"{base}-a{attempt}"
    if not SLUG.match(slug):
        raise UserError(f"cannot make a Kaggle kernel slug from job name {job!r}")
    return slug


def kernel_folder(spec: Any, run_id: str, *, owner: str, attempt: int, dest: Path,
                  budget_s: float | None, grace_s: float, previous: str | None = None,
                  resumes_run: str | None = None, working_limit: int = WORKING_LIMIT) -> dict:
    """Write kernel-metadata.json and the script into `dest`; return the metadata. `previous`
    is the kernel whose output this one mounts; `resumes_run` the earlier run it belongs to
    when that is not `run_id` (a new run of the job resuming from its checkpoints)."""
    if spec.secrets:
        raise UserError(f"secrets ({', '.join(spec.secrets)}) cannot be pushed inside a Kaggle "
                        "kernel: add them as Kaggle Secrets (Add-ons > Secrets) and read them "
                        "with kaggle_secrets.UserSecretsClient, then drop `secrets:`")
    shape = machine_shape(spec.resources.gpu)
    code, _ = bundle_workdir(spec.workdir, spec.exclude)
    if len(code) > MAX_EMBEDDED:
        raise UserError(f"the workdir bundles to {len(code) >> 10} KiB; rgt embeds at most "
                        f"{MAX_EMBEDDED >> 10} KiB of code in a Kaggle kernel: move data out of "
                        "the workdir (download it in `setup`) or list it under `exclude`")
    config = {
        "job": spec.name, "run_id": run_id, "resumes_run": resumes_run, "attempt": attempt,
        "setup": spec.setup,
        "run": spec.run, "env": dict(spec.env), "outputs": list(spec.outputs),
        "gpu": spec.resources.gpu, "budget_s": budget_s, "grace_s": grace_s,
        "working_limit_bytes": working_limit,
        "code": base64.b64encode(code).decode(),
        "lib": base64.b64encode(_tar_gz(ckpt_library())).decode(),
    }
    slug = kernel_slug(spec.name, attempt)
    script = ("# rgt: job " + spec.name + ", run " + run_id + f", attempt {attempt}\n"
              "RGT_CONFIG = " + pprint.pformat(config, width=100) + "\n\n"
              + RUNTIME.read_text(encoding="utf-8")
              + "\n\nif __name__ == '__main__':\n    sys.exit(main(RGT_CONFIG))\n")
    meta = {
        "id": f"{owner}/{slug}", "title": slug, "code_file": SCRIPT, "language": "python",
        "kernel_type": "script", "is_private": True,
        "enable_gpu": shape is not None, "enable_internet": True,
        "kernel_sources": [previous] if previous else [],
        "dataset_sources": [], "competition_sources": [],
    }
    if shape:
        meta["machine_shape"] = shape
    dest.mkdir(parents=True, exist_ok=True)
    (dest / SCRIPT).write_text(script, encoding="utf-8")
    (dest / "kernel-metadata.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return meta


class KaggleClient:
    """The official client, imported and authenticated on first use."""

    def __init__(self) -> None:
        self._api: Any = None

    @property
    def api(self) -> Any:
        if self._api is None:
            noise = io.StringIO()  # the client prints help on import and on a failed login
            try:
                with contextlib.redirect_stdout(noise), contextlib.redirect_stderr(noise):
                    from kaggle.api.kaggle_api_extended import KaggleApi

                    api = KaggleApi()
                    api.authenticate()
            except ImportError:
                raise UserError("Kaggle needs its official client: pip install 'rgt[kaggle]'"
                                ) from None
            except SystemExit:
                raise UserError("no Kaggle credentials: set KAGGLE_USERNAME and KAGGLE_KEY "
                                "(or KAGGLE_API_TOKEN), or put kaggle.json from kaggle.com/"
                                "settings > API into ~/.kaggle; nothing was pushed") from None
            self._api = api
        return self._api

    @property
    def username(self) -> str:
        return str(self.api.config_values.get("username") or "")

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        noise = io.StringIO()
        try:
            with contextlib.redirect_stdout(noise):
                return fn(*args, **kwargs)
        except ValueError as err:
            raise UserError(f"Kaggle refused {what}: {err}") from None
        except Exception as err:  # noqa: BLE001 - requests' HTTPError and friends
            response = getattr(err, "response", None)
            code = getattr(response, "status_code", None)
            detail = str(err).splitlines()[0][:300] if str(err) else type(err).__name__
            if code == 401:
                raise UserError(f"Kaggle refused {what}: the credentials were not accepted "
                                "(401); make a new API token at kaggle.com/settings") from None
            raise UserError(f"Kaggle refused {what}: {detail}"
                            + (f" (HTTP {code})" if code else "")) from None

    def push(self, folder: Path) -> tuple[str, int | None]:
        response = self._call("the kernel push", self.api.kernels_push, str(folder))
        if getattr(response, "error", None):
            raise UserError(f"Kaggle rejected the kernel push: {response.error}; nothing runs "
                            "and nothing was lost (the code is still here)")
        invalid = [s for s in getattr(response, "invalid_kernel_sources", []) or []]
        if invalid:
            raise UserError(f"Kaggle rejected the kernel push: unknown kernel sources {invalid}")
        return response.ref, response.version_number

    def status(self, ref: str) -> KernelStatus:
        """The latest version's status, read from the answer's JSON by `parse_status`: the
        client's own reading raises on a status its enum lacks (a KeyError that said nothing)
        and takes any malformed answer as it comes."""
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelSessionStatusRequest

        owner, _, slug = ref.partition("/")
        request = ApiGetKernelSessionStatusRequest()
        request.user_name, request.kernel_slug = owner, slug

        def ask() -> Any:
            with self.api.build_kaggle_client() as kaggle:
                return kaggle.kernels.kernels_api_client._client.call(
                    "kernels.KernelsApiService", "GetKernelSessionStatus", request, RawAnswer)

        return parse_status(self._call("the status request", ask))

    def output(self, ref: str, dest: Path) -> list[str]:
        """The latest version's output files under `dest`. Listed and fetched as the client's
        kernels_output does, but each name is checked first: that method joins the server's
        file names onto the folder as they come (`../x` or `/x` would land outside it)."""
        from kagglesdk.kernels.types.kernels_api_service import (
            ApiListKernelSessionOutputRequest,
        )

        owner, _, slug = ref.partition("/")
        dest.mkdir(parents=True, exist_ok=True)
        files: list[str] = []
        token = None
        tokens: set[str] = set()  # a page token handed out twice would page forever
        while True:
            request = ApiListKernelSessionOutputRequest()
            request.user_name, request.kernel_slug = owner, slug
            self.api._set_paging(request, 100, token)

            def listing(request: Any = request) -> Any:
                with self.api.build_kaggle_client() as kaggle:
                    return kaggle.kernels.kernels_api_client.list_kernel_session_output(request)

            response = self._call("the output listing", listing)
            for item in response.files or []:
                rel = output_name(item.file_name)
                self._call(f"the download of {rel}", download, item.url, dest / rel)
                files.append(str(dest / rel))
            token = response.next_page_token
            if not token:
                return files
            if token in tokens or len(files) > MAX_OUTPUT_FILES:
                raise UserError(f"Kaggle's output listing of {ref} did not end (a page token "
                                f"repeated, or over {MAX_OUTPUT_FILES} files); `rgt watch` "
                                "again lists it again")
            tokens.add(token)

    def quota(self) -> dict[str, Any]:
        response = self._call("the quota request", self.api.quota_view)
        gpu = response.gpu_quota
        if gpu is None:
            return {}
        used = gpu.time_used.total_seconds() if gpu.time_used is not None else 0.0
        allowed = (gpu.total_time_allowed.total_seconds()
                   if gpu.total_time_allowed is not None else None)  # timedelta(0) is falsy
        return {"gpu_used_s": used, "gpu_allowed_s": allowed,
                "gpu_left_s": None if allowed is None else max(0.0, allowed - used),
                "refresh": response.quota_refresh_time.isoformat()
                if response.quota_refresh_time else None}


# kagglesdk 0.1.37 kernels_enums.KernelWorkerStatus, as rgt names them (lower case)
KERNEL_STATUSES = ("queued", "running", "complete", "error", "cancel_requested",
                   "cancel_acknowledged", "new_script")
STATUS_PREFIX = "kernel_worker_status_"  # a protobuf-style spelling of the same names
MAX_ANSWER_BYTES = 1 << 16
WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


class KernelStatus(NamedTuple):
    """A version's status as Kaggle answered it: `name` one of KERNEL_STATUSES or "unknown"
    (then `raw` is what was said, as one printable line), `failure` Kaggle's reason, if any."""

    name: str
    failure: str | None = None
    raw: str = ""


class RawAnswer:
    """A response type for kagglesdk's http client that keeps the answer's JSON as it came."""

    @classmethod
    def prepare_from(cls, http_response: Any) -> Any:
        body = http_response.content
        if len(body) > MAX_ANSWER_BYTES:
            return {"rgt_refused": f"an answer of {len(body)} bytes"}
        try:
            return json.loads(body)
        except ValueError:
            return {"rgt_refused": "an answer that is not JSON"}


def one_line(value: Any, limit: int = 80) -> str:
    """Text from Kaggle as one printable line: control characters escaped, cut at `limit`."""
    text = value if isinstance(value, str) and value.isprintable() else repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def parse_status(answer: Any) -> KernelStatus:
    """GetKernelSessionStatus's answer ({"status": "RUNNING", "failureMessage": ...}), checked
    as input from outside: a status not in KERNEL_STATUSES is "unknown" with its raw value. An
    absent status is QUEUED: protobuf's JSON leaves an enum at its default (0) out, and the
    client reads it so too."""
    if not isinstance(answer, dict):
        return KernelStatus("unknown", raw=f"an answer that is not an object: {one_line(answer)}")
    if "rgt_refused" in answer:
        return KernelStatus("unknown", raw=str(answer["rgt_refused"]))
    failure = answer.get("failureMessage")
    failure = one_line(failure, 500) if isinstance(failure, str) and failure else None
    said = answer.get("status", "QUEUED")
    if isinstance(said, str) and WORD.match(said):
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", said).lower()
        name = snake.removeprefix(STATUS_PREFIX)
        if name in KERNEL_STATUSES:
            return KernelStatus(name, failure)
    return KernelStatus("unknown", failure, one_line(said))


def output_name(name: Any) -> str:
    """A file name the output listing gave, as a path inside the download folder."""
    parts = str(name or "").split("/")
    if not name or "\\" in str(name) or "\0" in str(name) or any(
            p in ("", ".", "..") for p in parts) or len(str(name)) > 4096:
        raise UserError(f"Kaggle listed an output file named {str(name)[:120]!r}, which rgt "
                        "will not write (absolute, empty or leading out of the folder)")
    return "/".join(parts)


def download(url: str, dest: Path) -> None:
    """One output file, written beside its place and renamed in (never through a link)."""
    import requests

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.rgt-part")
    with requests.get(url, stream=True, timeout=300) as response:
        response.raise_for_status()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        with os.fdopen(fd, "wb") as out:
            for chunk in response.iter_content(1 << 20):
                out.write(chunk)
    if dest.is_symlink():
        dest.unlink()
    os.replace(tmp, dest)
