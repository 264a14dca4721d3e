"""The Slurm platform against a real (private, one-node) Slurm cluster."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from boxkit import verified_in
from cli import rgt

from rgt.lifecycle import watch
from rgt.lifecycle.launch import launch
from rgt.platforms.slurm.accounting import parse_records
from rgt.platforms.slurm.platform import SlurmPlatform
from rgt.spec import load_spec

PY = sys.executable
BIN = str(Path(PY).parent)


def write_spec(tmp_path: Path, **fields) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    path = work / "job.yaml"
    path.write_text(yaml.safe_dump({"workdir": ".", **fields}))
    return path


def job_record(cluster, job_id: str) -> dict[str, str]:
    out = cluster.cmd("scontrol", "show", "job", "-o", job_id, check=False).stdout
    records = parse_records(out)
    return records[0] if records else {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_walltime_signal_checkpoints_requeues_and_resumes_bitwise(
        slurm_cluster, slurm_box, slurm_env, tmp_path):
    """--time=1 with --signal=B:TERM@20: trap → checkpoint → requeue → resume → same weights."""
    store, box = slurm_box
    steps = 200
    train = (f"{PY} -m rgt.examples.train_mlp --steps {steps} --save-every 20 "
             "--metrics-every 10 --ckpt-dir $RGT_CKPT_DIR --out $RGT_DURABLE_DIR/out")
    spec_path = write_spec(
        tmp_path, name="mlp", run=train + " --sleep 0.25",
        resources={"time": "00:01:00", "mem": "1G", "cpus": 1},
        # LEAD = checkpoint write (5 s, measured for this tiny model) + jitter; the test
        # cluster checks time limits every 30 s, so 15 s of modelled jitter is enough here.
        env={"RGT_CKPT_WRITE_S": "5", "RGT_SLURM_SIGNAL_JITTER_S": "15"})
    # the reference: the same training, uninterrupted, here
    ref = tmp_path / "ref"
    subprocess.run([PY, "-m", "rgt.examples.train_mlp", "--steps", str(steps),
                    "--save-every", "20", "--ckpt-dir", str(ref / "ckpt"),
                    "--out", str(ref / "out")], check=True, capture_output=True, timeout=120)

    result = rgt("run", "hpc", str(spec_path), env=slurm_env)
    assert result.returncode == 0, result.stdout + result.stderr
    run_id = result.stdout.strip().splitlines()[-1]
    run = store.run("hpc", run_id)
    job_id = run.spec["platform_run"]["job_id"]
    assert run.spec["detach"] == f"sbatch:{job_id}"
    script = Path(run.spec["platform_run"]["script"]).read_text()
    assert "#SBATCH --signal=B:TERM@20" in script and "#SBATCH --time=00:01:00" in script

    # Wait for the walltime warning to preempt the first attempt (Restarts=1), then give the
    # requeued attempt room to finish: the identical script must resume, not restart.
    deadline = time.monotonic() + 120
    rec: dict[str, str] = {}
    while time.monotonic() < deadline:
        rec = job_record(slurm_cluster, job_id)
        if int(rec.get("Restarts") or 0) >= 1:
            break
        assert rec.get("JobState") not in ("COMPLETED", "FAILED", "TIMEOUT"), rec
        time.sleep(0.5)
    else:
        pytest.fail(f"job {job_id} was never requeued: {rec}\n{slurm_cluster.logs()}")
    slurm_cluster.cmd("scontrol", "update", f"JobId={job_id}", "TimeLimit=10")

    done = rgt("watch", "hpc", run_id, "--until-done", "--timeout", "180", env=slurm_env,
               timeout=240)
    log = (Path(box.data_dir) / "rgt" / run_id / "log").read_text()
    assert done.returncode == 0, done.stdout + done.stderr + log
    assert "succeeded" in done.stdout
    preempted = re.search(r"^preempted step=(\d+) signal=SIGTERM$", log, re.M)
    resumed = re.search(r"^resumed step=(\d+)", log, re.M)
    assert preempted and resumed, log
    assert int(resumed[1]) == int(preempted[1]) > 0
    assert "requeueing job" in log and f"done step={steps}" in log
    assert log.count("fresh start") == 1

    import torch

    ours = torch.load(Path(box.durable_dir) / "rgt" / run_id / "out" / "final.pt",
                      weights_only=False)
    theirs = torch.load(ref / "out" / "final.pt", weights_only=False)
    assert ours["step"] == theirs["step"] == steps
    for key, tensor in theirs["model"].items():
        assert torch.equal(ours["model"][key], tensor), key

    logs = rgt("logs", "hpc", run_id, "--tail", "3", env=slurm_env)
    assert logs.returncode == 0 and "step exited 0" in logs.stdout


CELL = r"""
import json, os, sys, time
cell = os.environ["RGT_CELL_DIR"]
t0 = time.time()
time.sleep(3)
with open(os.path.join(os.environ["RGT_OUT_DIR"], "runs.jsonl"), "a") as f:
    f.write(json.dumps({"lr": sys.argv[1], "seed": sys.argv[2],
                        "env_lr": os.environ["RGT_PARAM_LR"], "ckpt": os.environ["RGT_CKPT_DIR"],
                        "task": os.environ["SLURM_ARRAY_TASK_ID"],
                        "start": t0, "end": time.time()}) + "\n")
"""


def test_sweep_is_one_job_array_each_cell_once_in_its_own_dir(slurm_cluster, slurm_box,
                                                                slurm_env, tmp_path):
    """A spec with a grid: one `rgt run` → one array; watch, logs per cell, pull per cell."""
    store, box = slurm_box
    spec_path = write_spec(tmp_path, name="sweep", run=f"{PY} cell.py {{lr}} {{seed}}",
                           resources={"mem": "200M", "cpus": 1}, outputs=["runs.jsonl"],
                           grid={"lr": [0.1, 0.01], "seed": [0, 1]}, max_parallel=2)
    (spec_path.parent / "cell.py").write_text(CELL)
    dry = rgt("run", "hpc", str(spec_path), "--dry-run", env=slurm_env)
    assert dry.returncode == 0 and "#SBATCH --array=0-3%2" in dry.stdout, dry.stderr
    result = rgt("run", "hpc", str(spec_path), env=slurm_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "a sweep of 4 cells" in result.stdout
    run_id = result.stdout.strip().splitlines()[-1]
    run = store.run("hpc", run_id)
    job_id = run.spec["platform_run"]["job_id"]
    assert run.spec["platform_run"]["cells"] == 4
    done = rgt("watch", "hpc", run_id, "--until-done", "--timeout", "120", env=slurm_env,
               timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr + slurm_cluster.logs()
    assert "array: 4 COMPLETED" in done.stdout
    cells = Path(box.durable_dir) / "rgt" / run_id / "cells"
    assert sorted(p.name for p in cells.iterdir()) == ["0", "1", "2", "3"]
    seen, spans = set(), []
    for i in range(4):
        lines = (cells / str(i) / "out" / "runs.jsonl").read_text().splitlines()
        assert len(lines) == 1, (i, lines)  # exactly once
        rec = json.loads(lines[0])
        assert rec["task"] == str(i) and rec["env_lr"] == rec["lr"]
        assert rec["ckpt"] == str(cells / str(i) / "ckpt")
        seen.add((rec["lr"], rec["seed"]))
        spans.append((rec["start"], rec["end"]))
    assert seen == {("0.1", "0"), ("0.1", "1"), ("0.01", "0"), ("0.01", "1")}
    for start, _ in spans:  # %2: never more than two cells at once
        assert sum(1 for s, e in spans if s <= start < e) <= 2

    one = rgt("logs", "hpc", run_id, "--cell", "2", env=slurm_env)
    assert one.returncode == 0 and "step exited 0" in one.stdout, one.stderr
    assert "==>" not in one.stdout  # one cell, no headers
    every = rgt("logs", "hpc", run_id, "--tail", "2", env=slurm_env)
    assert every.stdout.count("==>") == 4 and f"slurm-{job_id}_3.out" in every.stdout
    bad = rgt("logs", "hpc", run_id, "--cell", "7", env=slurm_env)
    assert bad.returncode == 2 and "no cell 7 (cells 0-3)" in bad.stderr

    dest = tmp_path / "pulled"
    pulled = rgt("pull", "hpc", run_id, "--dest", str(dest), env=slurm_env)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    verified = verified_in(Path(slurm_env["RGT_HOME"]), "hpc", run_id)
    assert sorted(f["path"] for f in verified["files"]) == [
        f"cells/{i}/out/runs.jsonl" for i in range(4)]

    listing = rgt("ls", env=slurm_env)
    walltime = re.search(r"(\d+)s walltime", listing.stdout)
    assert walltime and int(walltime[1]) >= 4 * 3, listing.stdout  # four cells of ≥ 3 s
    assert "$" not in listing.stdout


STAGE = r"""
import os, sys, time
out = os.path.join(os.environ["RGT_DURABLE_DIR"], "out")
os.makedirs(out, exist_ok=True)
if sys.argv[1] == "first":
    time.sleep(4)
    open(os.path.join(out, "stage1.txt"), "w").write(str(time.time()))
elif sys.argv[1] == "fail":
    sys.exit(3)
else:
    first = open(sys.argv[2]).read()
    open(os.path.join(out, "stage2.txt"), "w").write(f"{first} {time.time()}")
"""


def test_stages_chain_with_afterok(slurm_cluster, slurm_box, slurm_env, tmp_path):
    """`rgt run --after RUN`: the second stage waits for the first to succeed."""
    store, box = slurm_box
    first = write_spec(tmp_path, name="stage1", run=f"{PY} stage.py first",
                       resources={"mem": "100M", "cpus": 1})
    (first.parent / "stage.py").write_text(STAGE)
    a = rgt("run", "hpc", str(first), env=slurm_env)
    assert a.returncode == 0, a.stderr
    a_id = a.stdout.strip().splitlines()[-1]
    a_out = Path(box.durable_dir) / "rgt" / a_id / "out" / "stage1.txt"
    second = first.parent / "stage2.yaml"
    second.write_text(yaml.safe_dump({"name": "stage2", "workdir": ".",
                                      "run": f"{PY} stage.py second {a_out}",
                                      "resources": {"mem": "100M", "cpus": 1}}))
    dry = rgt("run", "hpc", str(second), "--after", a_id, "--dry-run", env=slurm_env)
    a_job = store.run("hpc", a_id).spec["platform_run"]["job_id"]
    assert f"#SBATCH --dependency=afterok:{a_job}" in dry.stdout, dry.stdout + dry.stderr
    b = rgt("run", "hpc", str(second), "--after", a_id, env=slurm_env)
    assert b.returncode == 0, b.stderr
    b_id = b.stdout.strip().splitlines()[-1]
    done = rgt("watch", "hpc", b_id, "--until-done", "--timeout", "90", env=slurm_env,
               timeout=150)
    assert done.returncode == 0, done.stdout + done.stderr
    wrote_first, started_second = (Path(box.durable_dir) / "rgt" / b_id / "out" /
                                   "stage2.txt").read_text().split()
    assert float(started_second) >= float(wrote_first)

    failing = first.parent / "fail.yaml"
    failing.write_text(yaml.safe_dump({"name": "bad", "workdir": ".",
                                       "run": f"{PY} stage.py fail",
                                       "resources": {"mem": "100M", "cpus": 1}}))
    c = rgt("run", "hpc", str(failing), env=slurm_env)
    c_id = c.stdout.strip().splitlines()[-1]
    assert rgt("watch", "hpc", c_id, "--until-done", "--timeout", "60", env=slurm_env,
               timeout=120).returncode == 1
    refused = rgt("run", "hpc", str(second), "--after", c_id, env=slurm_env)
    assert refused.returncode == 2 and "ended failed" in refused.stderr, refused.stderr


def test_audit_reports_partitions_limits_and_filesystems(slurm_cluster, slurm_box, slurm_env):
    store, box = slurm_box
    result = rgt("audit", "hpc", env=slurm_env, timeout=240)
    assert "debug (default)" in result.stdout, result.stdout + result.stderr
    assert "SLURM5" in result.stdout and "single node" in result.stdout
    evidence = store.latest_evidence("audit", "hpc")
    sched = evidence.detail["scheduler"]
    (part,) = sched["partitions"]
    assert part["name"] == "debug" and part["default"] and part["nodes"] == 1
    assert part["cpus_per_node"] == str(slurm_cluster.cpus)
    assert part["gpus_per_node"] == 0  # this cluster declares no GRES: said so
    assert any("no partition offers GPUs" in v["message"] for v in sched["verdicts"])
    assert "assoc_error" in sched  # no slurmdbd here: limits unknown, not invented
    paths = {f["path"]: f for f in sched["filesystems"]}
    assert box.durable_dir in paths and paths[box.durable_dir]["shared"] is False


HOG = r"""
import time
blocks = []
for _ in range(40):
    blocks.append(bytearray(50 * 1024 * 1024))  # touched: bytearray zero-fills
    time.sleep(0.2)
print("survived", flush=True)
"""


def test_memory_overrun_is_reported_with_slurm4_advice(slurm_cluster, slurm_box, tmp_path):
    store, box = slurm_box
    spec_path = write_spec(tmp_path, name="hog", run=f"{PY} hog.py",
                           resources={"mem": "300M", "cpus": 1})
    (spec_path.parent / "hog.py").write_text(HOG)
    run, _ = launch(store, "hpc", load_spec(spec_path))
    slurm_cluster.wait_for_job(run.spec["platform_run"]["job_id"], timeout=90)
    summary = watch.refresh(store, box, run)
    if "survived" in "\n".join(summary["log_tail"]):
        pytest.skip("this cluster does not enforce --mem (no cgroup, OverMemoryKill inactive)")
    assert summary["status"] == "failed", summary
    assert any("SLURM4" in c for c in summary["causes"]), summary
    assert "raise --mem" in summary["advice"] and "do not shrink the batch" in summary["advice"]
    advised = re.search(r"at least (\d+)M", summary["advice"])
    assert advised and 300 < int(advised[1]) < 1500, summary["advice"]  # MaxRSS × 1.2
    assert store.run("hpc", run.id).status == "failed"


DIST = r"""
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
out = os.path.join(os.environ["RGT_DURABLE_DIR"], "out")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
    f.write(f"{world} {t.item()} {os.environ['LOCAL_RANK']}\n")
dist.destroy_process_group()
"""


def test_torchrun_two_processes_through_the_generated_script(slurm_cluster, slurm_box,
                                                             tmp_path):
    store, box = slurm_box
    spec_path = write_spec(
        tmp_path, name="dist", run="python dist.py", resources={"mem": "2G", "cpus": 2},
        env={"RGT_NPROC_PER_NODE": "2", "RGT_RDZV_PORT": str(free_port()),
             "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"})
    (spec_path.parent / "dist.py").write_text(DIST)
    run, _ = launch(store, "hpc", load_spec(spec_path))
    script = Path(run.spec["platform_run"]["script"]).read_text()
    assert "torchrun --nnodes=$RGT_NUM_NODES --nproc-per-node=2" in script
    slurm_cluster.wait_for_job(run.spec["platform_run"]["job_id"], timeout=120)
    summary = watch.refresh(store, box, run)
    assert summary["status"] == "succeeded", summary
    out = Path(box.durable_dir) / "rgt" / run.id / "out"
    for rank in (0, 1):
        assert (out / f"rank{rank}.txt").read_text().split() == ["2", "3.0", str(rank)]


def test_stop_meter_scancels_live_jobs(slurm_cluster, slurm_box, tmp_path):
    store, box = slurm_box
    spec_path = write_spec(tmp_path, name="idle", run="sleep 300",
                           resources={"mem": "100M", "cpus": 1})
    platform = SlurmPlatform()
    run, _ = launch(store, "hpc", load_spec(spec_path))
    job_id = run.spec["platform_run"]["job_id"]
    outcome = platform.release(store, box).what
    assert outcome.startswith(f"scancel {job_id}: cancelled 1 live job"), outcome
    slurm_cluster.wait_for_job(job_id, timeout=30)
    assert store.run("hpc", run.id).status == "cancelled"
    summary = watch.refresh(store, box, store.run("hpc", run.id))
    assert summary["status"] == "cancelled", summary
    assert platform.release(store, box).what.startswith("no live Slurm jobs")


def test_rgt_cancel_scancels_the_job(slurm_cluster, slurm_box, slurm_env, tmp_path):
    """`rgt cancel` reaches SlurmPlatform.cancel: scancel, not the on-box runner's stop."""
    store, box = slurm_box
    # held until an hour from now, so the job is PENDING when cancelled (a running job's
    # cancel is the next tests')
    spec_path = write_spec(tmp_path, name="idle", run="sleep 300",
                           resources={"mem": "100M", "cpus": 1},
                           slurm={"sbatch_args": ["--begin=now+3600"]})
    run, _ = launch(store, "hpc", load_spec(spec_path))
    job_id = run.spec["platform_run"]["job_id"]
    cancelled = rgt("cancel", "hpc", run.id, "--yes", env=slurm_env)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert f"(scancel {job_id})" in cancelled.stdout, cancelled.stdout
    slurm_cluster.wait_for_job(job_id, timeout=60)
    summary = watch.refresh(store, box, store.run("hpc", run.id))
    assert summary["status"] == "cancelled", summary


TRAINER = r"""
import os, signal, sys, time
stop = []
if os.environ.get("IGNORE_TERM"):
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)
else:
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, lambda n, _: stop.append(signal.Signals(n).name))
print("training", flush=True)
while not stop:
    time.sleep(0.1)
with open(os.path.join(os.environ["RGT_CKPT_DIR"], "last.txt"), "w") as f:
    f.write("step 7\n")
print(f"checkpointed on {stop[0]}", flush=True)
sys.exit(85)
"""


def job_processes(run_id: str) -> list[str]:
    """Every process on this node that carries the run's environment (the batch shell, srun,
    the step's shell, the trainer): `ps` lines, so a failure names the survivors."""
    needle = f"RGT_RUN_ID={run_id}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                found.append(f"{proc.name} " + (proc / "cmdline").read_bytes()
                             .replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # gone meanwhile, or a kernel thread
    return found


def start_running(slurm_cluster, store, env, spec_path: Path, ready: str
                  ) -> tuple[str, str, Path]:
    """`rgt run`, then wait until squeue says RUNNING and the trainer printed `ready`."""
    result = rgt("run", "hpc", str(spec_path), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    run_id = result.stdout.strip().splitlines()[-1]
    run = store.run("hpc", run_id)
    job_id, log = run.spec["platform_run"]["job_id"], Path(run.spec["platform_run"]["log"])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = job_record(slurm_cluster, job_id).get("JobState")
        if state == "RUNNING" and log.exists() and ready in log.read_text():
            return run_id, job_id, log
        assert state in ("PENDING", "CONFIGURING", "RUNNING"), (state, slurm_cluster.logs())
        time.sleep(0.5)
    pytest.fail(f"job {job_id} never got its trainer going\n{slurm_cluster.logs()}")


def left_running_within(slurm_cluster, job_id: str, started: float, bound: float) -> float:
    """Seconds from `started` until the job was no longer RUNNING; fails past `bound`."""
    while job_record(slurm_cluster, job_id).get("JobState") == "RUNNING":
        assert time.monotonic() - started < bound, f"job {job_id} still RUNNING"
        time.sleep(0.2)
    return time.monotonic() - started


def test_rgt_cancel_of_a_running_job_checkpoints_ends_it_and_never_requeues(
        slurm_cluster, slurm_box, slurm_env, tmp_path):
    """A RUNNING job: SIGTERM reaches the trainer, which checkpoints; the job ends CANCELLED
    within KillWait and a few seconds, no process of it survives, the batch script's
    requeue-on-signal does not bring it back, and the run pulls with its checkpoint."""
    store, box = slurm_box
    train = (f"{PY} -m rgt.examples.train_mlp --steps 100000 --save-every 1000 "
             "--metrics-every 5 --ckpt-dir $RGT_CKPT_DIR --out $RGT_DURABLE_DIR/out --sleep 0.2")
    spec_path = write_spec(tmp_path, name="long", run=train, checkpoint_dir="$RGT_CKPT_DIR",
                           resources={"mem": "1G", "cpus": 1})
    run_id, job_id, log = start_running(slurm_cluster, store, slurm_env, spec_path, "step=5 ")
    assert any("rgt.examples.train_mlp" in p for p in job_processes(run_id))

    started = time.monotonic()
    cancelled = rgt("cancel", "hpc", run_id, "--yes", env=slurm_env)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    took = left_running_within(slurm_cluster, job_id, started, slurm_cluster.kill_wait + 15)
    slurm_cluster.wait_for_job(job_id, timeout=slurm_cluster.kill_wait + 30)
    assert job_processes(run_id) == []
    assert f"scancel --batch --signal=TERM {job_id}" in cancelled.stdout, cancelled.stdout
    assert "killed after the grace" not in cancelled.stdout

    rec = job_record(slurm_cluster, job_id)
    assert (rec["JobState"], rec["Restarts"], rec["Requeue"]) == ("CANCELLED", "0", "0"), rec
    text = log.read_text()
    preempted = re.search(r"^preempted step=(\d+) signal=SIGTERM$", text, re.M)
    assert preempted, text  # the trainer checkpointed on the cancel's SIGTERM
    assert "was cancelled, so it is not requeued" in text and "requeueing" not in text, text
    assert took < slurm_cluster.kill_wait + 15

    assert store.run("hpc", run_id).status == "cancelled"
    watched = rgt("watch", "hpc", run_id, env=slurm_env)
    assert "cancelled" in watched.stdout and "CANCELLED" in watched.stdout, watched.stdout
    dest = tmp_path / "pulled"
    pulled = rgt("pull", "hpc", run_id, "--dest", str(dest), env=slurm_env)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    saved = sorted(p.name for p in (dest / "ckpt").glob("ckpt-*.pt"))
    assert saved and int(re.search(r"(\d+)", saved[-1])[1]) == int(preempted[1]), saved
    assert f"preempted step={preempted[1]}" in "".join(
        p.read_text() for p in (dest / "logs").iterdir())


def test_rgt_cancel_kills_a_trainer_that_ignores_sigterm_after_the_grace(
        slurm_cluster, slurm_box, slurm_env, tmp_path):
    store, box = slurm_box
    spec_path = write_spec(tmp_path, name="deaf", run=f"{PY} trainer.py",
                           env={"IGNORE_TERM": "1"}, resources={"mem": "200M", "cpus": 1})
    (spec_path.parent / "trainer.py").write_text(TRAINER)
    run_id, job_id, _ = start_running(slurm_cluster, store, slurm_env, spec_path, "training")
    started = time.monotonic()
    cancelled = rgt("cancel", "hpc", run_id, "--yes", "--grace", "2", env=slurm_env)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert "killed after the grace" in cancelled.stdout, cancelled.stdout
    assert f"scancel {job_id} after 2 s" in cancelled.stdout, cancelled.stdout
    slurm_cluster.wait_for_job(job_id, timeout=slurm_cluster.kill_wait + 30)
    assert time.monotonic() - started < 2 + slurm_cluster.kill_wait + 30
    assert job_processes(run_id) == []
    rec = job_record(slurm_cluster, job_id)
    assert (rec["JobState"], rec["Restarts"]) == ("CANCELLED", "0"), rec


def test_a_plain_scancel_of_a_running_job_is_not_requeued_by_its_script(
        slurm_cluster, slurm_box, slurm_env, tmp_path):
    """The user's own `scancel JOB` (no Requeue=0 set first): the trainer still checkpoints
    and exits 85, and the script must still not take that for a walltime warning."""
    store, box = slurm_box
    spec_path = write_spec(tmp_path, name="plain", run=f"{PY} trainer.py",
                           resources={"mem": "200M", "cpus": 1})
    (spec_path.parent / "trainer.py").write_text(TRAINER)
    run_id, job_id, log = start_running(slurm_cluster, store, slurm_env, spec_path, "training")
    slurm_cluster.cmd("scancel", job_id)
    slurm_cluster.wait_for_job(job_id, timeout=slurm_cluster.kill_wait + 30)
    assert job_processes(run_id) == []
    rec = job_record(slurm_cluster, job_id)
    assert (rec["JobState"], rec["Restarts"]) == ("CANCELLED", "0"), rec
    text = log.read_text()
    assert "checkpointed on" in text and "was cancelled, so it is not requeued" in text, text
    summary = watch.refresh(store, box, store.run("hpc", run_id))
    assert summary["status"] == "cancelled", summary


def test_rgt_cancel_of_a_sweep_ends_every_cell_cancelled(slurm_cluster, slurm_box, slurm_env,
                                                          tmp_path):
    """Two cells running, two waiting (%2): the running ones checkpoint and end CANCELLED (an
    array cell's script must name itself ARRAYJOB_TASK to scancel), the waiting ones never
    start, and nothing is requeued."""
    store, box = slurm_box
    spec_path = write_spec(tmp_path, name="sweep", run=f"{PY} trainer.py {{lr}}",
                           grid={"lr": [1, 2, 3, 4]}, max_parallel=2,
                           resources={"mem": "100M", "cpus": 1})
    (spec_path.parent / "trainer.py").write_text(TRAINER)
    result = rgt("run", "hpc", str(spec_path), env=slurm_env)
    assert result.returncode == 0, result.stdout + result.stderr
    run_id = result.stdout.strip().splitlines()[-1]
    job_id = store.run("hpc", run_id).spec["platform_run"]["job_id"]
    logs = [Path(box.data_dir) / "rgt" / run_id / f"slurm-{job_id}_{i}.out" for i in (0, 1)]
    deadline = time.monotonic() + 120
    while not all(log.exists() and "training" in log.read_text() for log in logs):
        assert time.monotonic() < deadline, slurm_cluster.logs()
        time.sleep(0.5)
    cancelled = rgt("cancel", "hpc", run_id, "--yes", env=slurm_env)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    slurm_cluster.wait_for_job(job_id, timeout=slurm_cluster.kill_wait + 30)
    assert job_processes(run_id) == []
    for log in logs:
        text = log.read_text()
        assert "checkpointed on SIG" in text and "not requeued" in text, text
    assert not (Path(box.data_dir) / "rgt" / run_id / f"slurm-{job_id}_2.out").exists()
    summary = watch.refresh(store, box, store.run("hpc", run_id))
    assert summary["status"] == "cancelled", summary
    assert set(summary["slurm"]["states"].values()) == {"CANCELLED"}, summary


def test_login_node_over_ssh_runs_pulls_and_goes_down(slurm_cluster, slurm_env, tmp_path):
    """`rgt up --profile slurm --ssh ...`: every Slurm command travels over a real sshd."""
    from sshd import SshKeys, SshServer, unavailable

    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    keys = SshKeys.generate(tmp_path / "keys")
    # the login node's own environment: sessions find this cluster as they would /etc/slurm
    server = SshServer(tmp_path / "sshd", keys=keys,
                       extra_config=f"SetEnv SLURM_CONF={slurm_cluster.conf}").start()
    env = {"RGT_HOME": slurm_env["RGT_HOME"]}  # no SLURM_CONF here: it must come over ssh
    try:
        durable = tmp_path / "login-durable"
        up = rgt("up", "login", "--profile", "slurm", "--durable-dir", str(durable), "--ssh",
                 f"ssh -p {server.port} -i {keys.client_key} root@127.0.0.1", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        spec = write_spec(tmp_path, name="remote", run="echo hello > result.txt",
                          outputs=["result.txt"], resources={"mem": "100M", "cpus": 1})
        started = rgt("run", "login", str(spec), env=env)
        assert started.returncode == 0, started.stdout + started.stderr
        run_id = started.stdout.strip().splitlines()[-1]
        done = rgt("watch", "login", run_id, "--until-done", "--timeout", "60", env=env,
                   timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        dest = tmp_path / "pulled"
        pulled = rgt("pull", "login", run_id, "--dest", str(dest), env=env)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        assert (dest / "result.txt").read_text() == "hello\n"
        down = rgt("down", "login", "--yes", env=env)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "no live Slurm jobs to cancel" in down.stdout
    finally:
        server.stop()
