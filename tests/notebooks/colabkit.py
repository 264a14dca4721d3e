"""Run rgt's Colab notebook on this machine: an nbclient kernel whose `google.colab` is the
stand-in in fake_colab/ (Drive = a local directory that uploads lazily, NB1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from conftest import FAKE_COLAB

from rgt.examples import train_mlp
from rgt.platforms.notebook.build import BUNDLE_NAME, CodeSource, build_notebook, bundle_workdir
from rgt.spec import JobSpec

RUN_ID = "r1"


class ColabVM:
    """One Colab 'VM': a scratch /content and the kernel; Drive (`cloud`) outlives it."""

    def __init__(self, tmp: Path, delay_s: float = 0.5) -> None:
        self.cloud = tmp / "drive-cloud"  # Google's side: what a Drive sync folder shows
        self.content = tmp / "content"
        self.cloud.mkdir()
        self.env = {"PYTHONPATH": os.pathsep.join([str(FAKE_COLAB), os.environ.get(
            "PYTHONPATH", "")]).rstrip(os.pathsep), "FAKE_DRIVE_CLOUD": str(self.cloud),
            "FAKE_DRIVE_SYNC_DELAY_S": str(delay_s), "RGT_COLAB_CONTENT": str(self.content)}

    @property
    def view(self) -> Path:
        return self.content / "drive" / "MyDrive"

    def execute(self, nb: dict) -> dict:
        import nbformat
        from nbclient import NotebookClient

        self.content.mkdir(exist_ok=True)
        node = nbformat.reads(json.dumps(nb), as_version=4)
        nbformat.validate(node)
        client = NotebookClient(node, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(self.content)}})
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)  # the kernel inherits the environment it starts in
        try:
            client.execute()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return node

    def lose(self) -> None:
        """The VM is gone: RAM and /content with it (NB4, NB5)."""
        shutil.rmtree(self.content, ignore_errors=True)


def job_spec(workdir: Path, steps: int, sleep: float) -> JobSpec:
    shutil.copy(train_mlp.__file__, workdir / "train_mlp.py")
    return JobSpec.model_validate({
        "name": "mlp", "workdir": str(workdir),
        "run": f'{Path(sys.executable)} train_mlp.py --steps {steps} --save-every 5 '
               f'--metrics-every 5 --sleep {sleep} --ckpt-dir "$RGT_CKPT_DIR" --out out',
        "outputs": ["out"], "checkpoint_dir": "$RGT_CKPT_DIR"})


def put_bundle(vm: ColabVM, spec: JobSpec) -> CodeSource:
    """What `rgt run` does through the laptop's Drive sync folder."""
    blob, digest = bundle_workdir(spec.workdir, spec.exclude)
    run_dir = vm.cloud / "rgt" / RUN_ID
    run_dir.mkdir(parents=True)
    (run_dir / BUNDLE_NAME).write_bytes(blob)
    return CodeSource("bundle", sha256=digest)


def kill_when(vm: ColabVM, ready, timeout: float = 90) -> int:
    """Wait until `ready(view)` holds, then SIGKILL the kernel's process group (kernel, job,
    Drive syncer: the runtime dies without a signal it could catch, NB5); the job's pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = json.loads((vm.view / "rgt" / RUN_ID / "state.json").read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("status") == "running" and ready(vm.view):
            os.killpg(os.getpgid(state["pid"]), signal.SIGKILL)
            return state["pid"]
        time.sleep(0.02)
    raise AssertionError("the notebook never reached the point to kill it at")


def run_in_thread(vm: ColabVM, nb: dict) -> tuple[threading.Thread, list]:
    errors: list = []

    def go() -> None:
        try:
            vm.execute(nb)
        except Exception as err:  # noqa: BLE001 - the killed kernel is the expected end
            errors.append(err)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, errors


__all__ = ["RUN_ID", "ColabVM", "build_notebook", "job_spec", "kill_when", "put_bundle",
           "run_in_thread"]
