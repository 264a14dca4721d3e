"""The on-box scripts run on the oldest Python a rented image may ship (3.8), fed on stdin."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest
from onbox_helpers import feed, wait_status

from rgt.onbox import SCRIPTS, script_source


def oldest_python():
    candidates = [shutil.which("python3.8")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    for path in candidates:
        if not path or not os.access(path, os.X_OK):
            continue
        probe = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
            capture_output=True,
            text=True,
        )
        if probe.stdout.strip() == "True":  # a pyenv shim may exist yet refuse to run
            return path
    return None


PY38 = oldest_python()
# Debian 12 ships only Python 3.11, so a 3.8 interpreter is a bonus where one exists.
pytestmark = [pytest.mark.may_skip,
              pytest.mark.skipif(PY38 is None, reason="no python3.8 interpreter on this machine")]


def feed38(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return feed(script, *args, python=PY38, timeout=timeout)


def test_every_script_compiles_on_python38():
    for name in SCRIPTS:
        out = subprocess.run(
            [PY38, "-c", "import sys; compile(sys.stdin.read(), sys.argv[1], 'exec')", name],
            input=script_source(name).decode(),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, f"{name}.py is not Python 3.8 syntax: {out.stderr}"


def test_run_probe_manifest_audit_end_to_end_on_python38(tmp_path):
    run_dir = tmp_path / "rgt" / "old"
    (run_dir / "code").mkdir(parents=True)
    durable = tmp_path / "durable"
    spec = {
        "run_id": "old",
        "command": "mkdir -p out && echo payload > out/x.txt && echo step=3 loss=0.5",
        "outputs": ["out"],
        "durable_dir": str(durable),
        "heartbeat_s": 0.5,
    }
    (run_dir / "run.json").write_text(json.dumps(spec))

    launched = feed38("runner", str(run_dir), "--detach")
    assert launched.returncode == 0, launched.stderr
    state = wait_status(run_dir, ("succeeded", "failed", "sync-failed"))
    assert state["status"] == "succeeded", state
    assert (durable / "out" / "x.txt").read_text() == "payload\n"

    probed = feed38("probe", str(run_dir), "--no-dmesg")
    assert probed.returncode == 0, probed.stderr
    report = json.loads(probed.stdout)
    assert report["verdict"]["status"] == "succeeded"
    assert report["log"]["last_metrics"] == "step=3 loss=0.5"

    made = feed38("manifest", str(durable), str(tmp_path / "m.json"), "out")
    assert made.returncode == 0, made.stderr
    assert json.loads((tmp_path / "m.json").read_text())["files"][0]["path"] == "out/x.txt"

    audited = feed38("audit", "--dirs", str(tmp_path), "--py", PY38)
    assert audited.returncode == 0, audited.stderr
    audit = json.loads(audited.stdout)
    assert audit["python"]["python"].startswith("3.8.")
    assert audit["dirs"][0]["path"] == str(tmp_path)
