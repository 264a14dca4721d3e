"""The on-box scripts (fed on stdin) and the rgt.ckpt that `rgt run` ships run on the oldest
Python a rented image may ship (3.8)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from oldpython import NO_PY38, PY38
from onbox_helpers import feed, wait_status

from rgt.lifecycle.ship import write_library
from rgt.onbox import SCRIPTS, script_source

pytestmark = [pytest.mark.may_skip, pytest.mark.skipif(PY38 is None, reason=NO_PY38)]


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
    assert json.loads((tmp_path / "m.json").read_text().splitlines()[1])["path"] == "out/x.txt"

    audited = feed38("audit", "--dirs", str(tmp_path), "--py", PY38)
    assert audited.returncode == 0, audited.stderr
    audit = json.loads(audited.stdout)
    assert audit["python"]["python"].startswith("3.8.")
    assert audit["dirs"][0]["path"] == str(tmp_path)


def test_shipped_rgt_ckpt_saves_loads_and_verifies_on_python38(tmp_path):
    """What `rgt run` puts in RUN_DIR/lib, under 3.8 with no site-packages: every module
    imports (torch_state needs torch, absent here), and a plain state round-trips twice — the
    second run resumes from the first's checkpoints."""
    lib = write_library(tmp_path / "lib")
    job = Path(__file__).parents[1] / "shipped_ckpt_job.py"
    reports = []
    for _ in range(2):
        out = subprocess.run([PY38, "-S", str(job), str(tmp_path / "ckpt")],
                             env={"PYTHONPATH": str(lib)}, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        reports.append(json.loads(out.stdout))
    first, second = reports
    assert first["python"] == [3, 8] and first["ckpt_file"] == str(lib / "rgt/ckpt/__init__.py")
    assert not first["torch_imported"]
    assert first["loaded_step"] == 4 and first["loaded_state"] == {"step": 4, "w": [0.25]}
    assert first["verified"] == [True, True] and first["preempted_by"] == "SIGUSR1"
    assert first["sampler"]["consumed"] == 4
    assert second["resumed_from"] == 4 and second["loaded_step"] == 8
