"""torchrun on a box reached over SSH, through the whole CLI (issue 27 items 3 and 5): `rgt
cancel` of a real `torchrun --standalone --nproc_per_node=2` run (gloo, CPU) leaves no worker
alive (torchrun starts them in sessions of their own), the run reads as the stop it was though
torchrun exits 1 after SIGTERM, and `rgt run` of the job again resumes from its snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from boxkit import live_runs, up_ssh, wait_for, write_job
from ddp_job import DDP_JOB, TORCHRUN

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # torchrun imports torch three times per start


def test_cancelled_torchrun_leaves_no_worker_and_resumes(cli, sshd_server, tmp_path):
    assert up_ssh(cli, sshd_server, tmp_path).returncode == 0
    work = tmp_path / "job"
    work.mkdir()
    (work / "job.py").write_text(DDP_JOB)
    spec = write_job(work, name="ddp", run=f"{TORCHRUN} job.py 2000 0.05",
                     env={"OMP_NUM_THREADS": "1"})
    root = tmp_path / "box-data" / "rgt"
    snapshot = tmp_path / "box-durable" / "rgt" / "jobs" / "ddp" / "ckpt" / "snapshot.pt"

    first = cli.ok("run", "gpu", str(spec), "-d").stdout.strip().splitlines()[-1]
    code = root / first / "code"
    wait_for(lambda: snapshot.exists() and all((code / f"worker{r}.pid").exists()
                                               for r in (0, 1)), timeout=120)
    workers = [int((code / f"worker{r}.pid").read_text()) for r in (0, 1)]
    cli.ok("cancel", "gpu", first, "--yes", "--grace", "5")
    watched = json.loads(cli("watch", "gpu", first, "--json").stdout)["run"]
    assert watched["status"] == "cancelled", watched
    state = json.loads((root / first / "state.json").read_text())
    assert state["status"] == "stopped" and state["stop_signal"] == "SIGTERM", state
    assert wait_for(lambda: not live_runs(root), timeout=30), live_runs(root)
    for pid in workers:  # gone, or a zombie nobody has waited for yet
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().split(") ")[1][0] in "ZX", pid

    again = cli.ok("run", "gpu", str(spec), "-d").stdout.strip().splitlines()[-1]
    log = root / again / "log"
    assert wait_for(lambda: log.exists() and "resumed step=" in log.read_text(), timeout=120)
    cli.ok("cancel", "gpu", again, "--yes", "--grace", "5")
    assert wait_for(lambda: not live_runs(root), timeout=30), live_runs(root)
