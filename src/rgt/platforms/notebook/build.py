"""Build the Colab notebook for one run of a job spec (nbformat 4 JSON, no nbformat needed).

The notebook is self-contained: a config cell (the spec's setup, run, env, outputs; where the
code comes from; rgt.ckpt as a base64 tarball) and the runtime of `rgt.onbox.notebook` as
one cell, then one short cell per step. Running it again after a disconnect resumes (NB5).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import pprint
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rgt
from rgt.errors import UserError
from rgt.onbox import ckpt_package, xfer

RUNTIME = Path(__file__).resolve().parents[2] / "onbox" / "notebook.py"
BUNDLE_NAME = "code.tar.gz"
MAX_BUNDLE_BYTES = 200 << 20  # Drive takes more, but a bigger workdir means data in the code


@dataclass(frozen=True)
class CodeSource:
    """Where the notebook gets the workdir: a bundle in the run's Drive folder (`rgt run`),
    the bundle inside the notebook itself (`rgt render`: nothing else travels), or git."""

    kind: str  # "bundle" | "inline" | "git"
    sha256: str = ""  # of the bundle
    url: str = ""  # git
    commit: str = ""  # git, optional
    data: bytes = b""  # inline: the bundle

    def as_config(self) -> dict[str, str]:
        if self.kind == "bundle":
            return {"kind": "bundle", "name": BUNDLE_NAME, "sha256": self.sha256}
        if self.kind == "inline":
            return {"kind": "inline", "sha256": self.sha256,
                    "data": base64.b64encode(self.data).decode()}
        return {"kind": "git", "url": self.url, "commit": self.commit}


def _tar_gz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    # mtime 0 and sorted names: the same inputs give the same bytes (and the same notebook).
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(files):
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(files[rel]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[rel]))
    return buf.getvalue()


def ckpt_library() -> dict[str, bytes]:
    """rgt.ckpt as the notebook's job imports it (the files `rgt run` ships to a box)."""
    return ckpt_package("rgt's Colab notebook shipped it")


def bundle_workdir(workdir: Path, exclude: list[str]) -> tuple[bytes, str]:
    """The workdir as a deterministic tar.gz and its sha256: the files a push would send,
    EXCLUDE read with rsync's `--exclude` meaning by the push's own engine (`xfer.scan`), so
    `rgt-results/`, `data/` or `/notes/` leave out what they leave out of a push. Symlinks
    are not followed or bundled."""
    try:
        _, found, _, _ = xfer.scan(str(workdir), list(exclude))
    except xfer.XferError as err:
        raise UserError(f"cannot read the workdir {workdir}: {err}") from None
    files: dict[str, bytes] = {}
    total = 0
    for rel, size, *_ in sorted(found):
        total += size
        if total > MAX_BUNDLE_BYTES:
            raise UserError(f"the workdir {workdir} holds more than "
                            f"{MAX_BUNDLE_BYTES >> 20} MiB of files: keep data on Drive or "
                            "download it in `setup`, and list big folders under `exclude`")
        files[rel] = (Path(workdir) / rel).read_bytes()
    blob = _tar_gz(files)
    return blob, hashlib.sha256(blob).hexdigest()


MAX_INLINE_BYTES = 4 << 20  # a notebook file the Colab editor still opens quickly


def inline_source(workdir: Path, exclude: list[str]) -> CodeSource:
    """The workdir bundled into the notebook: `rgt render -o x.ipynb` gives one file to open."""
    blob, digest = bundle_workdir(workdir, exclude)
    if len(blob) > MAX_INLINE_BYTES:
        raise UserError(f"the workdir bundles to {len(blob) >> 20} MiB, more than the "
                        f"{MAX_INLINE_BYTES >> 20} MiB rgt embeds in a rendered notebook: "
                        "list data folders under `exclude`, or register your Drive with "
                        "`rgt up NAME --profile colab --drive PATH` and `rgt run` (the code "
                        "then travels as a bundle on Drive)")
    return CodeSource("inline", sha256=digest, data=blob)


def _cell(kind: str, source: str, **extra: Any) -> dict[str, Any]:
    cell: dict[str, Any] = {"cell_type": kind, "metadata": extra.pop("metadata", {}),
                            "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def notebook_config(spec: Any, run_id: str, source: CodeSource, *,
                    heartbeat_s: float = 30) -> dict[str, Any]:
    return {
        "job": spec.name, "run_id": run_id, "source": source.as_config(),
        "setup": spec.setup, "run": spec.run, "env": dict(spec.env),
        "outputs": list(spec.outputs), "heartbeat_s": heartbeat_s,
        "lib": base64.b64encode(_tar_gz(ckpt_library())).decode(),
    }


def build_notebook(spec: Any, run_id: str, source: CodeSource, *,
                   heartbeat_s: float = 30) -> dict[str, Any]:
    """The notebook as a JSON-ready dict (nbformat 4.5)."""
    if spec.secrets:
        raise UserError(f"secrets ({', '.join(spec.secrets)}) cannot travel into a Colab "
                        "notebook file: put them in Colab's Secrets panel and read them with "
                        "google.colab.userdata in your code, then drop `secrets:` from the spec")
    config = notebook_config(spec, run_id, source, heartbeat_s=heartbeat_s)
    gpu = spec.resources.gpu
    intro = (
        f"# rgt: `{spec.name}`, run `{run_id}`\n\n"
        "Runtime > Change runtime type: pick "
        + (f"a GPU (the spec asks for `{gpu}`)" if gpu else "any runtime")
        + ", then **Runtime > Run all**.\n\n"
        "After a disconnect (the free tier gives no warning, NB5) reconnect and **Run all** "
        "again: the job resumes from its newest checkpoint that verifies on Google Drive. "
        "Checkpoints count as saved only once Drive was flushed and they read back whole "
        "(NB1); `/content` is scratch (NB4).\n\n"
        f"Drive folder: `MyDrive/rgt/{run_id}` (state, log, outputs) and "
        f"`MyDrive/rgt/jobs/{spec.name}/ckpt` (checkpoints). On your machine: "
        f"`rgt watch` and `rgt pull` read them through your Drive sync folder.")
    cells = [
        _cell("markdown", intro),
        _cell("code", "RGT_CONFIG = " + pprint.pformat(config, width=100) + "\n",
              metadata={"jupyter": {"source_hidden": True}}),
        _cell("code", RUNTIME.read_text(encoding="utf-8"),
              metadata={"jupyter": {"source_hidden": True}}),
        _cell("code", "rgt_mount(RGT_CONFIG)\n"),
    ]
    if gpu:
        cells.append(_cell("code", (
            "import subprocess\n"
            "if subprocess.call(['nvidia-smi'], stdout=subprocess.DEVNULL) != 0:\n"
            "    raise RgtError('no GPU in this runtime (the spec asks for " + gpu + "): '\n"
            "                   'Runtime > Change runtime type > GPU, then Run all')\n")))
    cells += [
        _cell("code", "rgt_restore(RGT_CONFIG)\n"),
        _cell("code", "rgt_setup(RGT_CONFIG)\n"),
        _cell("code", "rgt_run(RGT_CONFIG)\n"),
        _cell("code", "rgt_finish(RGT_CONFIG)\n"),
    ]
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
            "accelerator": "GPU" if gpu else "None",
            "colab": {"provenance": [], "name": f"rgt-{spec.name}-{run_id}.ipynb"},
            "rgt": {"job": spec.name, "run_id": run_id, "version": rgt.__version__},
        },
        "cells": [dict(c, id=f"rgt-{i}") for i, c in enumerate(cells)],
    }


def notebook_json(notebook: dict[str, Any]) -> str:
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
