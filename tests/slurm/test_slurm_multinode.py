"""rgt on a real two-node Slurm cluster (tests/slurmcluster.py, nodes=2): two slurmd, each in
its own network and UTS namespace (node0, node1), one slurmctld, a shared filesystem.

Through rgt's own command line, as a user drives it: every node gets the multi-node contract
(rgt.remote.node_env) with its own rank; PyTorch's multi-node DDP example trains across both
nodes; a node that dies mid-run ends the attempt (Slurm's NODE_FAIL, and Slurm's own requeue
resumes it from the job's snapshot on both nodes once the node is back); a crashed rank fails
the job as a whole, and `rgt resume` continues on both nodes from the snapshot; SkyPilot's
shape of a multi-node task runs its own torchrun line as written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli import rgt
from ddp_examples import multinode_workdir

from rgt.platforms.slurm.accounting import parse_records
from rgt.store import Store

# one worker, one two-node cluster for the module (xdist would start one per worker)
pytestmark = pytest.mark.xdist_group("slurm-two-nodes")
BIN = str(Path(sys.executable).parent)
# the cluster's nodes find this interpreter and torchrun as a cluster's module load would
PLUMBING = {"PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def hpc(slurm_two_nodes, tmp_path_factory):
    """`rgt up hpc --profile slurm`: this machine as the cluster's login node. Returns the
    CLI's env, the store and the box."""
    home = tmp_path_factory.mktemp("rgt-home")
    env = {"SLURM_CONF": str(slurm_two_nodes.conf), "RGT_HOME": str(home)}
    durable = tmp_path_factory.mktemp("shared") / "durable"
    up = rgt("up", "hpc", "--profile", "slurm", "--durable-dir", str(durable), env=env)
    assert up.returncode == 0, up.stdout + up.stderr
    store = Store(home / "state.db")
    return env, store, store.box("hpc")


def job_record(cluster, job_id: str) -> dict[str, str]:
    records = parse_records(cluster.cmd("scontrol", "show", "job", "-o", job_id,
                                        check=False).stdout)
    return records[0] if records else {}


def started(env: dict, spec: Path) -> str:
    result = rgt("run", "hpc", str(spec), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]


def slurm_log(store: Store, run_id: str) -> Path:
    return Path(store.run("hpc", run_id).spec["platform_run"]["log"])


def watch_until_done(env: dict, run_id: str, timeout: int = 90):
    return rgt("watch", "hpc", run_id, "--until-done", "--timeout", str(timeout), env=env,
               timeout=timeout + 60)


CONTRACT = ("RGT_NODE_RANK", "SKYPILOT_NODE_RANK", "DSTACK_NODE_RANK", "RGT_NUM_NODES",
            "SKYPILOT_NUM_NODES", "DSTACK_NODES_NUM", "RGT_NODE_IPS", "SKYPILOT_NODE_IPS",
            "DSTACK_NODES_IPS", "RGT_HEAD_NODE", "DSTACK_MASTER_NODE_IP", "MASTER_ADDR",
            "MASTER_PORT", "RGT_RDZV_PORT", "RGT_GPUS_PER_NODE", "SKYPILOT_NUM_GPUS_PER_NODE",
            "DSTACK_GPUS_PER_NODE", "DSTACK_GPUS_NUM", "SKYPILOT_SETUP_NODE_RANK")

# a SkyPilot task: its `run` runs as written once on every node, so it sees the contract as
# each node's own shell has it (an rgt spec's run would be one torchrun worker)
ENV_TASK = f"""\
name: contract
workdir: .
num_nodes: 2
resources: {{cpus: 1, memory: 0.5}}
run: |
  for v in {" ".join(CONTRACT)}; do
    printf '%s=%s\\n' "$v" "$(printenv "$v" | paste -sd, -)"
  done > "$RGT_DURABLE_DIR/contract-$(hostname).txt"
"""


def test_every_node_gets_the_contract_with_its_own_rank(slurm_two_nodes, hpc, tmp_path):
    env, store, box = hpc
    (tmp_path / "task.yaml").write_text(ENV_TASK)
    run_id = started(env, tmp_path / "task.yaml")
    done = watch_until_done(env, run_id, 60)
    assert done.returncode == 0, done.stdout + done.stderr + slurm_two_nodes.logs()
    durable = Path(store.run("hpc", run_id).spec["durable_run_dir"])
    seen = {}
    for node in ("node0", "node1"):
        lines = (durable / f"contract-{node}.txt").read_text().splitlines()
        seen[node] = dict(line.split("=", 1) for line in lines)
    both = "node0,node1"  # every node's address, head first, one a line
    for i, node in enumerate(("node0", "node1")):
        values = seen[node]
        assert {values[n] for n in ("RGT_NODE_RANK", "SKYPILOT_NODE_RANK", "DSTACK_NODE_RANK",
                                    "SKYPILOT_SETUP_NODE_RANK")} == {str(i)}, values
        assert {values[n] for n in ("RGT_NUM_NODES", "SKYPILOT_NUM_NODES",
                                    "DSTACK_NODES_NUM")} == {"2"}, values
        assert {values[n] for n in ("RGT_NODE_IPS", "SKYPILOT_NODE_IPS",
                                    "DSTACK_NODES_IPS")} == {both}, values
        assert {values[n] for n in ("RGT_HEAD_NODE", "DSTACK_MASTER_NODE_IP",
                                    "MASTER_ADDR")} == {"node0"}, values
        assert values["MASTER_PORT"] == values["RGT_RDZV_PORT"] == "29500", values
        assert {values[n] for n in ("RGT_GPUS_PER_NODE", "SKYPILOT_NUM_GPUS_PER_NODE",
                                    "DSTACK_GPUS_PER_NODE", "DSTACK_GPUS_NUM")} == {"0"}, values


def ddp_spec(tmp_path: Path, epochs: int, save_every: int) -> Path:
    """PyTorch's multinode.py as a user's project. The example saves and resumes `snapshot.pt`
    in its cwd, a run's own code dir; the job's checkpoint home ($RGT_CKPT_DIR, on the shared
    filesystem, the same for every run of the job) is where it must live to survive the run,
    so setup (once, in the shared code dir) points that name into the home."""
    work = multinode_workdir(tmp_path / "ddp")
    spec = work / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "ddp", "workdir": ".",
        "setup": 'ln -sfn "$RGT_CKPT_DIR/snapshot.pt" snapshot.pt',
        "run": 'echo "$(hostname): node $RGT_NODE_RANK of $RGT_NUM_NODES${HUB_TOKEN:+, token}"'
               f"\npython multinode.py {epochs} {save_every}\n",
        "secrets": ["HUB_TOKEN"],  # sent on stdin; every attempt of the job must have it
        "checkpoint_dir": "$RGT_CKPT_DIR",
        "resources": {"nodes": 2, "cpus": 1, "mem": "1G"},
        # srun labels each line with its task, and task i runs on node i (one task a node)
        "env": {**PLUMBING, "SLURM_LABELIO": "1"},
    }, sort_keys=False))
    return spec


def wait_for_log(log: Path, pattern: str, cluster, timeout: float = 90,
                 after: int = 0) -> re.Match:
    """The first match of `pattern` in the log past offset `after`, once it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        found = re.search(pattern, text[after:], re.M)
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"no {pattern!r} in the log within {timeout:.0f} s\n{text}\n{cluster.logs()}")


def resumed_at(text: str) -> dict[str, int]:
    """Node (srun's task label) → the epoch its trainer resumed from."""
    return {m[1]: int(m[2]) for m in re.finditer(
        r"^(\d+): Resuming training from snapshot at Epoch (\d+)$", text, re.M)}


def test_ddp_across_both_nodes_survives_a_dead_node_and_a_crashed_rank(
        slurm_two_nodes, hpc, tmp_path):
    """multinode.py on both nodes. Node 1 dies (every process on it, slurmd included): Slurm
    fails the job (NODE_FAIL) and requeues it, rgt says so, and once the node is back the same
    job resumes from the snapshot on both nodes. Then the head's trainer crashes: the job
    fails as a whole, rgt says failed, and `rgt resume` continues on both nodes to the end."""
    env, store, box = hpc
    cluster = slurm_two_nodes
    epochs = 30
    run_id = started({**env, "HUB_TOKEN": "hf_x"}, ddp_spec(tmp_path, epochs, 2))
    job_id = store.run("hpc", run_id).spec["platform_run"]["job_id"]
    log = slurm_log(store, run_id)
    wait_for_log(log, r"^0: Epoch ([6-9]|\d\d+) \| Training snapshot saved", cluster)
    first = log.read_text()
    assert "0: node0: node 0 of 2, token" in first, first
    assert "1: node1: node 1 of 2, token" in first, first
    # node i's trainer is global rank i (--node-rank from its RGT_NODE_RANK), one a node
    assert "0: [GPU0] Epoch 0 |" in first and "1: [GPU1] Epoch 0 |" in first, first
    assert "[GPU2]" not in first
    assert "Resuming" not in first

    cluster.crash_node(1)
    crashed_at = time.monotonic()
    deadline = time.monotonic() + cluster.node_timeout * 3 + 30
    while (rec := job_record(cluster, job_id)).get("Restarts") != "1":
        assert time.monotonic() < deadline, (rec, cluster.logs())
        time.sleep(0.5)
    print("NODE_FAIL after", time.monotonic() - crashed_at)
    assert "NODE_FAIL" in cluster.jobcomp.read_text()  # Slurm ended the attempt, not rgt
    watched = rgt("watch", "hpc", run_id, env=env)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "succeeded" not in watched.stdout and "requeued 1" in watched.stdout, watched.stdout
    print(watched.stdout)

    cluster.boot_node(1)  # the node is back: the requeued job starts on both nodes again
    wait_for_log(log, r"^1: Resuming training from snapshot", cluster, after=len(first))
    wait_for_log(log, r"^0: Resuming training from snapshot", cluster, after=len(first))
    second = log.read_text()[len(first):]
    assert re.search(r"^\[rgt\] job \d+ attempt 1 on node0", second, re.M), second
    # the script saw Slurm's own requeue, did not try one of its own, kept the secrets
    assert f"Slurm requeued job {job_id} itself" in second and "requeue failed" not in second
    assert "0: node0: node 0 of 2, token" in second, second
    resumed = resumed_at(second)
    assert resumed.keys() == {"0", "1"} and len(set(resumed.values())) == 1, second
    k1 = resumed["0"]
    print("resumed after", time.monotonic() - crashed_at)
    assert k1 >= 4 and k1 % 2 == 0, second  # a snapshot of the first attempt, saved every 2

    # the head's trainer crashes a few epochs on: torchrun fails, and the job with it
    wait_for_log(log, rf"^0: Epoch {k1 + 4} \| Training snapshot saved", cluster,
                 after=len(first))
    trainers = [pid for pid, cmd in cluster.node_processes(0).items()
                if "multinode.py" in cmd and "torchrun" not in cmd and "bash" not in cmd]
    assert len(trainers) == 1, cluster.node_processes(0)
    os.kill(trainers[0], 9)
    failed = watch_until_done(env, run_id, 60)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "failed" in failed.stdout and "succeeded" not in failed.stdout, failed.stdout
    print(failed.stdout)

    resumed_run = rgt("resume", "hpc", run_id, env={**env, "HUB_TOKEN": "hf_x"})
    assert resumed_run.returncode == 0, resumed_run.stdout + resumed_run.stderr
    print(resumed_run.stdout)
    new_id = resumed_run.stdout.strip().splitlines()[-1]
    assert new_id != run_id and store.run("hpc", new_id).status != "failed"
    done = watch_until_done(env, new_id, 90)
    new_log = slurm_log(store, new_id).read_text()
    assert done.returncode == 0 and "succeeded" in done.stdout, done.stdout + new_log
    print(done.stdout)
    resumed = resumed_at(new_log)
    assert resumed.keys() == {"0", "1"} and len(set(resumed.values())) == 1, new_log
    assert "0: node0: node 0 of 2, token" in new_log, new_log
    assert resumed["0"] >= k1 + 4, new_log  # from the later snapshot, not the first one
    for node in ("0", "1"):
        assert f"{node}: [GPU{node}] Epoch {epochs - 1} |" in new_log, new_log
    print("\n".join(line for line in (first + second).splitlines()
                    if "Resuming" in line or "node " in line or "[rgt]" in line))
    print("\n".join(line for line in new_log.splitlines()
                    if "Resuming" in line or "node " in line or "[rgt]" in line))

    dest = tmp_path / "pulled"
    pulled = rgt("pull", "hpc", new_id, "--dest", str(dest), env=env)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    import torch

    snapshot = torch.load(dest / "ckpt" / "snapshot.pt", weights_only=False)
    assert snapshot["EPOCHS_RUN"] == epochs - 2  # the last epoch rank 0 saved (every 2)


SKY_TASKS = Path(__file__).parent.parent / "data" / "skypilot"


def test_skypilot_multinode_task_runs_its_own_torchrun_line_on_both_nodes(
        slurm_two_nodes, hpc, tmp_path):
    """SkyPilot's shape of a distributed task (tests/data/skypilot/train-rdzv.yaml): its own
    torchrun line from SKYPILOT_NODE_RANK / SKYPILOT_NODE_IPS / SKYPILOT_NUM_GPUS_PER_NODE,
    run as written on each node. Changed only where this machine must: one (pretend) GPU a
    node instead of eight, PyTorch's multinode.py for its train.py, and a workdir holding it."""
    env, store, box = hpc
    text = (SKY_TASKS / "train-rdzv.yaml").read_text()
    for old, new in (("accelerators: H100:8", "accelerators: H100:1"),
                     ("\nnum_nodes: 2\n", "\nworkdir: .\nnum_nodes: 2\n"),
                     ("train.py --epochs 3", "multinode.py 3 1")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    work = multinode_workdir(tmp_path / "sky")
    (work / "requirements.txt").write_text("# torch: installed on this cluster already\n")
    (work / "train-rdzv.yaml").write_text(text)
    # SkyPilot reads `workdir: .` from where it is launched: the user's project directory
    result = subprocess.run([sys.executable, "-m", "rgt", "run", "hpc", "train-rdzv.yaml"],
                            cwd=work, env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1",
                                           **env}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    run_id = result.stdout.strip().splitlines()[-1]
    done = watch_until_done(env, run_id, 90)
    log = slurm_log(store, run_id).read_text()
    assert done.returncode == 0 and "succeeded" in done.stdout, done.stdout + log
    # each node's own line, with its own rank and the head from line 1 of SKYPILOT_NODE_IPS
    assert "node 0 of 2, head node0" in log and "node 1 of 2, head node0" in log, log
    for rank in (0, 1):  # two ranks, one a node: none duplicated, none training alone
        assert f"[GPU{rank}] Epoch 2 |" in log, log
    assert "[GPU2]" not in log and log.count("Epoch 2 | Training snapshot saved") == 1, log
