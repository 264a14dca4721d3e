"""The watch panel states each fact about how a run ended once: a SIGKILL is `job killed by
SIGKILL`, not that and `likely cause: sigkill`; a stop is `stopped by SIGTERM, last checkpoint
…`, not that and the probe's `stopped by SIGTERM: the job exited 0 on it`."""

from __future__ import annotations

from pathlib import Path

from boxkit import wait_for, write_job

TRAINER = """\
import os, signal, time
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
print("training", flush=True)
while not stop:
    time.sleep(0.1)
os.makedirs(os.environ["RGT_CKPT_DIR"], exist_ok=True)
open(os.path.join(os.environ["RGT_CKPT_DIR"], "on_exception.ckpt"), "w").write("saved")
"""


def _causes(panel: str) -> list[str]:
    return [line.strip(" │").split(None, 1)[1].lower() for line in panel.splitlines()
            if line.strip(" │").startswith("cause ")]


def test_a_sigkill_is_said_once(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run="echo hi; kill -KILL $$")
    run_id = cli.ok("run", "box", str(spec)).stdout.split()[-1]
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert watched.returncode == 1 and "signal SIGKILL" in watched.stdout, watched.stdout
    causes = _causes(watched.stdout)
    assert [c for c in causes if "sigkill" in c] == ["job killed by sigkill"], watched.stdout


def test_a_cancelled_run_says_its_stop_once(cli, tmp_path):
    cli.ok("up", "box")
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text(TRAINER)
    spec = write_job(tmp_path / "job", run="python3 train.py", checkpoint_dir="$RGT_CKPT_DIR")
    run_id = cli.ok("run", "box", str(spec)).stdout.split()[-1]
    log = Path(cli.home / "boxes" / "box" / "scratch" / "rgt" / run_id / "log")
    wait_for(lambda: log.exists() and "training" in log.read_text(), timeout=60)
    cli.ok("cancel", "box", run_id, "--yes")
    watched = cli.ok("watch", "box", run_id).stdout
    assert "cancelled  exit 0" in watched, watched
    causes = _causes(watched)
    assert [c for c in causes if "sigterm" in c] == \
        ["stopped by sigterm, last checkpoint on_exception.ckpt"], watched
