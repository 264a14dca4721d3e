"""`rgt cancel`: SIGTERM through the runner so the trainer checkpoints, SIGKILL after the grace,
status `cancelled`; the cancelled run pulls like any other and `down` works after it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from boxkit import wait_for, write_job

TRAINER = """\
import os, signal, sys, time
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
open("pid", "w").write(str(os.getpid()))
print("training", flush=True)
while not stop:
    time.sleep(0.1)
os.makedirs(os.environ["RGT_CKPT_DIR"], exist_ok=True)
with open(os.path.join(os.environ["RGT_CKPT_DIR"], "last.txt"), "w") as f:
    f.write("step 7\\n")
print("checkpointed on SIGTERM", flush=True)
"""


def _job(tmp_path: Path, **env) -> Path:
    (tmp_path / "job").mkdir(parents=True, exist_ok=True)
    (tmp_path / "job" / "train.py").write_text(TRAINER)
    return write_job(tmp_path / "job", run="python3 train.py", env=env, outputs=["out"],
                     checkpoint_dir="$RGT_CKPT_DIR")


def _started(cli, run_id: str) -> Path:
    run_dir = cli.home / "boxes" / "box" / "scratch" / "rgt" / run_id
    wait_for(lambda: "training" in (run_dir / "log").read_text()
             if (run_dir / "log").exists() else False, timeout=60)
    return run_dir


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").exists() or \
        Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_cancel_checkpoints_then_pull_and_down(cli, tmp_path):
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(_job(tmp_path))).stdout.strip().splitlines()[-1]
    run_dir = _started(cli, run_id)

    kept = cli("cancel", "box", run_id, input="nope\n")
    assert kept.returncode == 1 and "did not match" in kept.stderr
    assert json.loads((run_dir / "state.json").read_text())["status"] == "running"

    done = cli("cancel", "box", run_id[:12], input="box\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cancelled" in done.stdout and "SIGTERM to runner" in done.stdout
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "stopped" and state["stop_signal"] == "SIGTERM"  # runner recorded
    assert "checkpointed on SIGTERM" in (run_dir / "log").read_text()

    runs = json.loads(cli.ok("runs", "box", "--json").stdout)["runs"]
    assert [r["status"] for r in runs] == ["cancelled"]
    watched = cli("watch", "box", run_id)
    assert "cancelled" in watched.stdout, watched.stdout + watched.stderr
    again = cli("cancel", "box", run_id, "--yes")
    assert again.returncode == 2 and "already ended (cancelled)" in again.stderr

    dest = tmp_path / "pulled"
    pulled = cli("pull", "box", run_id, "--dest", str(dest))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert any(p.name == "last.txt" for p in dest.rglob("*")), list(dest.rglob("*"))
    cli.ok("down", "box", "--yes")


def test_cancel_kills_a_trainer_that_ignores_sigterm(cli, tmp_path):
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(_job(tmp_path, IGNORE_TERM="1"))).stdout.split()[-1]
    run_dir = _started(cli, run_id)
    pid = int(wait_for(lambda: (run_dir / "code" / "pid").exists()
                       and (run_dir / "code" / "pid").read_text()))
    done = cli("cancel", "box", "--yes", "--grace", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SIGKILL" in done.stdout and "killed after the grace" in done.stdout
    wait_for(lambda: not _alive(pid), timeout=10)
    runs = json.loads(cli.ok("runs", "--json").stdout)["runs"]
    assert runs[0]["status"] == "cancelled"
