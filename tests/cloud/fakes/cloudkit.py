"""Shared by the cloud tests: the fake keys, the real CLI, and renting on the fake vast.ai and
RunPod."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from cli import rgt as rgt_cli  # noqa: F401  (tests/cli.py: the real command line)

LAMBDA_KEY = "secret_lambda-key-3f9a1c"
VAST_KEY = "vastkey-7d02e4b1c9"
RUNPOD_KEY = "rpa_5KQ2M8X4W1Z9runpodtestkey"
IMAGE = "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
RUNPOD_IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"


def rent_vast(vast_api: Any, sshd: Any, workspace: Path, name: str, offer_row: dict[str, Any],
              *more: str) -> subprocess.CompletedProcess:
    """`rgt up NAME --profile vastai` on the only offer, `offer_row`: the fake API maps the new
    instance's 22/tcp to the real sshd, so the "instance" is this machine."""
    vast_api.offers = [offer_row]
    vast_api.ssh_port = sshd.port
    return rgt_cli("up", name, "--profile", "vastai", "--offer", str(offer_row["id"]),
                   "--image", IMAGE, "--disk", "20", "--identity", str(sshd.client_key),
                   "--data-dir", str(workspace), *more)


def rent_runpod(store: Any, sshd: Any, workspace: Path, gpu: Any = "RTX4090:1", *,
                name: str = "rp", **kwargs: Any) -> tuple[Any, list[str]]:
    """`runpod_up` on the fake RunPod (the `keyed` fixture: the pod leads to the real sshd),
    with what it said along the way."""
    from rgt.platforms.runpod import platform as runpod

    messages: list[str] = []
    box = runpod.runpod_up(store, name, gpu, RUNPOD_IMAGE, identity=str(sshd.client_key),
                           data_dir=str(workspace / "data"), durable_dir=str(workspace / "ckpt"),
                           on_wait=messages.append, poll_s=0.02, **kwargs)
    return box, messages
