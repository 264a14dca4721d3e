"""Lifecycle test helpers: the real CLI with its own RGT_HOME, job specs, waiting."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import yaml
from cli import rgt


class Rgt:
    """The real command line, with this test's own state directory."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {"RGT_HOME": str(home)}

    def __call__(self, *args: str, input: str | None = None, env: dict | None = None,
                 timeout: float = 180) -> subprocess.CompletedProcess:
        return rgt(*args, env={**self.env, **(env or {})}, input=input, timeout=timeout)

    def ok(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        result = self(*args, **kwargs)
        assert result.returncode == 0, f"rgt {' '.join(args)}: {result.stdout}\n{result.stderr}"
        return result

    def run_dir(self, box_scratch: Path, run_id: str) -> Path:
        return box_scratch / "rgt" / run_id

    def state(self, run_dir: Path) -> dict:
        return json.loads((run_dir / "state.json").read_text())

    def verified(self, box: str = "*", run_id: str = "*") -> dict:
        """The latest pull's evidence: it lives in RGT_HOME, never in the pulled tree."""
        return verified_in(self.home, box, run_id)


def verified_in(home: Path, box: str = "*", run_id: str = "*") -> dict:
    found = sorted((home / "evidence").glob(f"{box}/{run_id}/PULL_VERIFIED.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def write_job(directory: Path, **fields) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    spec = {"name": "job", "workdir": ".", **fields}
    path = directory / "job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def wait_for(predicate, timeout: float = 30, every: float = 0.2, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}" if what else
                         "condition not met in time")


def up_ssh(cli, sshd, tmp_path, name="gpu", *extra):
    """`rgt up NAME` of the test sshd as a generic-ssh box, its dirs under TMP_PATH."""
    target = sshd.target
    ssh = f"ssh -p {target.port} -i {target.identity} root@127.0.0.1"
    return cli("up", name, "--profile", "generic-ssh", "--ssh", ssh,
               "--data-dir", str(tmp_path / "box-data"),
               "--durable-dir", str(tmp_path / "box-durable"), "--rate", "1.5", *extra)


def live_runs(root: Path) -> dict[str, list[int]]:
    """RUN_DIR name -> pids of every live runner or job process of a run under ROOT (the job
    carries RGT_RUN_DIR in its environment; the runner names RUN_DIR on its command line)."""
    found: dict[str, list[int]] = {}
    prefix = f"{root}/"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            if stat[stat.rindex(b")") + 2:][:1] in (b"Z", b"X"):
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        dirs = [v[len(b"RGT_RUN_DIR="):] for v in environ if v.startswith(b"RGT_RUN_DIR=")]
        if any(a.endswith(b"runner.py") for a in argv) and len(argv) > 2:
            dirs.append(argv[-2] if argv[-1] == b"" else argv[-1])
        for d in dirs:
            text = os.fsdecode(d)
            if text.startswith(prefix):
                found.setdefault(text[len(prefix):].split("/")[0], []).append(int(entry))
    return found
