"""A group of two SSH machines as one box (issue 31's headline case), with real parts only: two
hosts in two network namespaces on one LAN (tests/hosts.py), each with its own hostname, its
own disk (a tmpfs only its processes see) and its own sshd; PyTorch's multi-node DDP example
(tests/ddp_examples.py: pytorch/examples' multinode.py, gloo on CPU) run through the real CLI
across both; one node's job processes SIGKILLed mid-run fail the run as a whole and stop the
other node's ranks; `rgt resume` continues from rank 0's snapshot on both nodes; pull; down
names both machines as still billing."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import hosts
import pytest
from boxkit import Rgt, wait_for, write_job
from ddp_examples import multinode_workdir
from sshd import SshServer

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

DISK = hosts.DISK  # each host's own disk


group = pytest.fixture(scope="module")(hosts.two_machines)


def ssh_of(server: SshServer) -> str:
    return f"ssh -p {server.port} -i {server.client_key} root@{server.host}"


def up_group(cli: Rgt, servers: list[SshServer], disk: str,
             *more: str) -> subprocess.CompletedProcess:
    """`rgt up grp`: the two hosts as one box, its data and durable dirs under DISK/<disk>."""
    return cli.ok("up", "grp", "--profile", "generic-ssh", "--ssh", ssh_of(servers[0]),
                  "--ssh", ssh_of(servers[1]), "--data-dir", f"{DISK}/{disk}",
                  "--durable-dir", f"{DISK}/{disk}-durable", *more)


def job_pids(server: SshServer) -> list[int]:
    """Every process of an rgt run on that host (its network namespace; not its sshd)."""
    mine = os.readlink(f"/proc/{server.proc.pid}/ns/net")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/net") != mine:
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"RGT_RUN_DIR=" in environ or b"runner.py" in argv:
            found.append(int(entry))
    return found


def watch(cli: Rgt, run: str) -> dict:
    return json.loads(cli.ok("watch", "grp", run, "--json").stdout)["run"]


def test_ddp_across_two_machines_fails_whole_and_resumes_on_both(group, tmp_path):
    lan, servers = group
    cli = Rgt(tmp_path / "rgt-home")
    up = up_group(cli, servers, "data", "--rate", "2")
    assert "2 machines" in up.stdout and f"node 1  {lan.address(1)}" in up.stdout, up.stdout
    assert "generic-ssh ×2" in cli.ok("ls").stdout
    work = multinode_workdir(tmp_path / "project")
    # multinode.py keeps its snapshot in the working directory: pointed at the job's checkpoint
    # home, which rgt keeps across runs (and gives every node on a relaunch)
    spec = write_job(work, name="ddp", resources={"nodes": 2}, env={"OMP_NUM_THREADS": "1"},
                     run='ln -sfn "$RGT_CKPT_DIR/snapshot.pt" snapshot.pt && '
                         "python multinode.py 8 1 --batch_size 2")
    first = cli.ok("run", "grp", str(spec), "-d").stdout.strip().splitlines()[-1]

    last: list[dict] = []

    def both_training() -> dict | None:
        last[:] = [watch(cli, first)]
        epochs = [n["training"].get("epoch", -1) for n in last[0].get("nodes") or []]
        return last[0] if len(epochs) == 2 and min(epochs) >= 2 else None
    try:
        seen = wait_for(both_training, timeout=120, every=1)
    except AssertionError:
        raise AssertionError(f"both nodes never trained: {last}") from None
    assert [n["address"] for n in seen["nodes"]] == [lan.address(0), lan.address(1)]
    for pid in job_pids(servers[1]):  # node 1 dies: its runner, torchrun and worker
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    failed = wait_for(lambda: (s := watch(cli, first))["status"] not in
                      ("running", "starting") and s, timeout=90, every=1)
    assert failed["status"] == "failed", failed
    assert "node 1" in " ".join(failed["causes"]), failed["causes"]
    assert wait_for(lambda: not job_pids(servers[0]), timeout=60), "node 0's ranks live on"

    again = cli.ok("resume", "grp", first).stdout.strip().splitlines()[-1]
    done = wait_for(lambda: (s := watch(cli, again))["status"] not in ("running", "starting")
                    and s, timeout=180, every=1)
    assert done["status"] == "succeeded", done
    shown = cli.ok("watch", "grp", again).stdout  # a resumed attempt had less to do
    assert "node 1" in shown and "suspiciously fast" not in shown, shown
    log = cli.ok("logs", "grp", again).stdout
    assert "Resuming training from snapshot at Epoch" in log, log[-2000:]
    assert "[GPU0] Epoch 7" in log
    assert "[GPU1] Epoch 7" in cli.ok("logs", "grp", again, "--node", "1").stdout
    assert "has no node 2 (nodes 0-1)" in cli("logs", "grp", again, "--node", "2").stderr

    dest = tmp_path / "pulled"
    cli.ok("pull", "grp", again, "--dest", str(dest))
    assert "Resuming training from snapshot" in \
        (dest / "logs" / f"{again}.node1.log").read_text()  # rank 1 resumed too
    down = cli("down", "grp", input="grp\n")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "node 1" in down.stdout and lan.address(1) in down.stdout, down.stdout


# SkyPilot's examples/multi_hostname.yaml, as its users run it (the shape and the command are
# SkyPilot's own): `run` runs once on every node.
MULTI_HOSTNAME = """\
name: multi_hostname
num_nodes: 2
run: 'echo My hostname: $(hostname)'
"""

# The launch line of SkyPilot's examples/distributed-pytorch/train.yaml, unchanged but for the
# script it starts (PyTorch's multinode.py) and one worker per node (no GPUs here).
DISTRIBUTED = """\
name: ddp-sky
num_nodes: 2
workdir: {workdir}
envs:
  OMP_NUM_THREADS: 1
run: |
  MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)
  echo "Starting distributed training, head node: $MASTER_ADDR"
  torchrun \\
  --nnodes=$SKYPILOT_NUM_NODES \\
  --nproc_per_node=1 \\
  --master_addr=$MASTER_ADDR \\
  --master_port=8008 \\
  --node_rank=${SKYPILOT_NODE_RANK} \\
  multinode.py 2 1
"""


def test_skypilot_multi_node_tasks_run_unchanged_on_the_group(group, tmp_path):
    lan, servers = group
    cli = Rgt(tmp_path / "rgt-home")
    up_group(cli, servers, "sky")
    audit = cli("audit", "grp")
    assert f"reach the head {lan.address(0)}:29500" in audit.stdout, audit.stdout
    work = multinode_workdir(tmp_path / "project")
    for refused, said in (({"recover": {}}, "must be the whole group's"),
                          ({"run": "torchrun --nproc_per_node=1 t.py"}, "without a rendezvous"),
                          ({"resources": {"nodes": 3}}, "is a group of 2 machines")):
        spec = write_job(tmp_path / "refused", **{"run": "python t.py",
                                                  "resources": {"nodes": 2}, **refused})
        answer = cli("run", "grp", str(spec))
        assert answer.returncode == 2 and said in answer.stderr, answer.stderr
    (work / "hostname.yaml").write_text(MULTI_HOSTNAME)
    (work / "train.yaml").write_text(DISTRIBUTED.replace("{workdir}", str(work)))  # (SkyPilot's
    # relative workdir is from where the command runs: this test's is elsewhere)
    for task, expect in (("hostname.yaml", "My hostname: node{}"),
                         ("train.yaml", "[GPU{}] Epoch 1")):
        run = cli.ok("run", "grp", str(work / task), "-d").stdout.strip().splitlines()[-1]
        ended = wait_for(lambda r=run: (s := watch(cli, r))["status"] not in
                         ("running", "starting") and s, timeout=120, every=1)
        assert ended["status"] == "succeeded", (ended["log_tail"][-8:], ended["nodes"])
        dest = tmp_path / f"pulled-{task}"
        cli.ok("pull", "grp", run, "--dest", str(dest))
        logs = [(dest / "logs" / f"{run}.log").read_text(),
                (dest / "logs" / f"{run}.node1.log").read_text()]
        for rank, log in enumerate(logs):
            assert expect.format(rank) in log, (rank, log[-1500:])
    assert f"head node: {lan.address(0)}" in logs[1]


def test_a_node_that_stops_answering_fails_the_run_and_stops_the_others(group, tmp_path):
    lan, servers = group
    cli = Rgt(tmp_path / "rgt-home")
    cli.env["RGT_NODE_LOST_S"] = "3"  # (180 s unless told)
    up_group(cli, servers, "cut")
    task = tmp_path / "sleep.yaml"
    task.write_text("name: sleeper\nnum_nodes: 2\nrun: sleep 300\n")
    run = cli.ok("run", "grp", str(task), "-d").stdout.strip().splitlines()[-1]
    wait_for(lambda: [n["status"] for n in watch(cli, run)["nodes"]] == ["running"] * 2,
             timeout=60, every=1)
    lan.cut(1)  # node 1 vanishes from the network; its processes live on, unseen
    try:
        ended = wait_for(lambda: (s := watch(cli, run))["status"] != "running" and s,
                         timeout=120, every=1)
    finally:
        lan.join(1)
    assert ended["status"] == "failed", ended
    causes = " ".join(ended["causes"])
    assert "node 1" in causes and "not answering for" in causes, causes
    assert "stopped the ranks still running on node(s) 0" in causes, causes
    assert wait_for(lambda: not job_pids(servers[0]), timeout=30), "node 0's job lives on"
    for pid in job_pids(servers[1]):  # (what the cut left running on node 1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_ssh_reaches_each_node_by_its_rank_and_the_head_by_default(group, tmp_path):
    lan, servers = group
    cli = Rgt(tmp_path / "rgt-home")
    up_group(cli, servers, "ssh")
    head = cli("ssh", "grp", "--", "hostname")
    assert (head.returncode, head.stdout) == (0, "node0\n"), head.stderr
    said = head.stderr.strip().splitlines()
    assert said == [f"the head, node 0 of 2 ({lan.address(0)}); `rgt ssh grp --node 1` "
                    "reaches node 1"], said
    for rank in (1, 0):  # each by its own record: its address, its sshd, its hostname
        there = cli("ssh", "grp", "--node", str(rank), "--", "hostname")
        assert (there.returncode, there.stdout) == (0, f"node{rank}\n"), there.stderr
        assert f"node {rank} of 2 ({lan.address(rank)})" in there.stderr, there.stderr
    tab = cli(env={"_RGT_COMPLETE": "complete_bash", "COMP_WORDS": "rgt ssh grp --node ",
                   "COMP_CWORD": "4"})  # what bash's Tab asks (rgt --install-completion)
    assert tab.stdout.split() == ["0", "1"], tab.stderr
    cli.ok("up", "one", "--profile", "generic-ssh", "--ssh", ssh_of(servers[0]), "--data-dir",
           f"{DISK}/one", "--durable-dir", f"{DISK}/one-durable")  # a box of one machine
    cli.ok("up", "here")  # this machine: no ssh at all, --node or not
    for box, rank, why in (("grp", "5", "box grp has no node 5 (nodes 0-1)"),
                           ("one", "0", "box one is one machine, not a group: drop --node"),
                           ("here", "0", "box here is this machine (--profile local): nothing "
                                         "to ssh into")):
        bad = cli("ssh", box, "--node", rank, "--", "hostname")
        assert bad.returncode == 2 and why in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_a_run_whose_nodes_cannot_meet_at_the_head_is_refused_before_it_starts(group, tmp_path):
    """Node 1 cannot reach the head's rendezvous port (a firewall's drop, as a rule on node
    1), then the head's port is held by another process: each `rgt run` is refused by name,
    exit 2, before anything starts or is recorded, instead of torchrun waiting its minutes."""
    lan, servers = group
    cli = Rgt(tmp_path / "rgt-home")
    up_group(cli, servers, "meet")
    spec = write_job(tmp_path / "work", name="meet", resources={"nodes": 2}, run="python t.py")
    rule = f"to {lan.address(0)} ipproto tcp dport 29500 prohibit"
    blocked = lan.run(1, f"ip rule add {rule}")
    assert blocked.returncode == 0, blocked.stderr
    try:
        refused = cli("run", "grp", str(spec), "-d")
        audit = cli("audit", "grp").stdout  # `rgt audit` finds it the same way
    finally:
        lan.run(1, f"ip rule del {rule}")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = refused.stderr.strip()
    assert len(said.splitlines()) == 1, said
    assert f"node 1 ({lan.address(1)}) cannot reach the head at {lan.address(0)}:29500" in said
    assert "open port 29500 between the nodes" in said and "RGT_RDZV_PORT" in said, said
    assert f"node 1 ({lan.address(1)}) cannot reach the head {lan.address(0)}:29500" in audit
    held = subprocess.Popen(["ip", "netns", "exec", lan.namespaces[0], sys.executable, "-c",
                             "import socket, time; s = socket.create_server(('', 29500)); "
                             "print('held', flush=True); time.sleep(120)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline() == "held\n"
        taken = cli("run", "grp", str(spec), "-d")
    finally:
        held.kill()
        held.wait()
    assert taken.returncode == 2, taken.stdout + taken.stderr
    assert f"port 29500 on the head ({lan.address(0)}) is taken" in taken.stderr
    assert "set RGT_RDZV_PORT in the spec's env to a free port" in taken.stderr, taken.stderr
    assert not job_pids(servers[0]) and not job_pids(servers[1]), "a runner started"
    assert json.loads(cli.ok("runs", "grp", "--json").stdout)["runs"] == []
