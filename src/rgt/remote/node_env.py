"""Where a job's nodes are, under rgt's names and under SkyPilot's and dstack's, so a launch
line written for either of them (`torchrun --node_rank=$SKYPILOT_NODE_RANK --master_addr=$(echo
"$SKYPILOT_NODE_IPS" | head -n1) …`) runs with the values it means, not with empty strings.

The names and their meaning are theirs (SkyPilot: docs running-jobs/environment-variables,
sky/skylet/constants.py; dstack: docs concepts/tasks "System environment variables"):

    rank of this node, 0 first   RGT_NODE_RANK      SKYPILOT_NODE_RANK     DSTACK_NODE_RANK
    number of nodes              RGT_NUM_NODES      SKYPILOT_NUM_NODES     DSTACK_NODES_NUM
    every node's address, one    RGT_NODE_IPS       SKYPILOT_NODE_IPS      DSTACK_NODES_IPS
      a line, the head first
    the head node's address      RGT_HEAD_NODE      (line 1 of the above)  DSTACK_MASTER_NODE_IP
    GPUs per node (the spec's    RGT_GPUS_PER_NODE  SKYPILOT_NUM_GPUS_     DSTACK_GPUS_PER_NODE
      count, 0 without)                             PER_NODE
    GPUs in the whole run                                                  DSTACK_GPUS_NUM
    this run                     RGT_RUN_ID         SKYPILOT_TASK_ID       DSTACK_RUN_NAME (job)
    one job of a batch                              SKYPILOT_JOB_RANK 0,
                                                    SKYPILOT_NUM_JOBS 1
    setup's rank and node list                      SKYPILOT_SETUP_NODE_RANK 0, _IPS
    where it runs                                   SKYPILOT_CLUSTER_INFO (JSON: cloud, region)
    the rendezvous endpoint      RGT_RDZV_PORT, and on several nodes torch's own MASTER_ADDR
                                 (the head) and MASTER_PORT (RGT_RDZV_PORT), which env:// reads

They are set for every job, whatever file it came from: they are true on every platform, and
an rgt spec that borrows a SkyPilot or dstack launch line then runs it as written.

On a one-machine box (local, SSH, AutoDL, a cloud instance, a Kubernetes pod) the values are
fixed before the job starts: rank 0 of 1 node whose address is 127.0.0.1 — the one address
every process on that machine reaches it by, whatever its interfaces. On Slurm the batch
script and each step read them from Slurm at run time (`allocation_exports`,
`allocation_rank_exports`, given the scheduler's own variables by the platform): the addresses
are the allocation's hostnames (`scontrol show hostnames`), which every node
resolves; rgt does not turn them into IPs (a node resolving its own name can answer 127.0.1.1,
which the other nodes would then dial).
"""

from __future__ import annotations

import json

ONE_MACHINE_ADDRESS = "127.0.0.1"
RANK_NAMES = ("RGT_NODE_RANK", "SKYPILOT_NODE_RANK", "DSTACK_NODE_RANK")
# SkyPilot's setup sees its own copies (on Slurm a task's setup runs in each node's step)
SETUP_RANK_NAMES = ("SKYPILOT_SETUP_NODE_RANK",)
NODE_COUNT_NAMES = ("RGT_NUM_NODES", "SKYPILOT_NUM_NODES", "DSTACK_NODES_NUM")
ADDRESS_LIST_NAMES = ("RGT_NODE_IPS", "SKYPILOT_NODE_IPS", "SKYPILOT_SETUP_NODE_IPS",
                      "DSTACK_NODES_IPS")
HEAD_NAMES = ("RGT_HEAD_NODE", "DSTACK_MASTER_NODE_IP")
GPUS_PER_NODE_NAMES = ("RGT_GPUS_PER_NODE", "SKYPILOT_NUM_GPUS_PER_NODE", "DSTACK_GPUS_PER_NODE")
RDZV_PORT = 29500  # torch's default; where the head node's rendezvous listens


def one_machine(*, gpus: int, run_id: str, job: str, platform: str,
                region: str | None) -> dict[str, str]:
    """The values on a box that is one machine: rank 0 of 1, reached at 127.0.0.1."""
    env = {name: "0" for name in RANK_NAMES + SETUP_RANK_NAMES}
    # one job, not one of `sky jobs launch --num-jobs N`: rank 0 of 1 processes everything
    env.update(SKYPILOT_JOB_RANK="0", SKYPILOT_NUM_JOBS="1")
    env.update({name: "1" for name in NODE_COUNT_NAMES})
    env.update({name: ONE_MACHINE_ADDRESS for name in ADDRESS_LIST_NAMES + HEAD_NAMES})
    env.update({name: str(gpus) for name in GPUS_PER_NODE_NAMES})
    env["DSTACK_GPUS_NUM"] = str(gpus)
    # MASTER_ADDR/PORT are left to torchrun on one machine: set without one, they would make
    # a library that looks for them (to decide it runs distributed) think it does
    env["RGT_RDZV_PORT"] = str(RDZV_PORT)
    env["SKYPILOT_TASK_ID"] = run_id
    env["DSTACK_RUN_NAME"] = job
    # SkyPilot's JSON (keys cluster_name, cloud, region, zone): rgt has no cluster name to
    # give, so that key is left out rather than filled with something it is not.
    env["SKYPILOT_CLUSTER_INFO"] = json.dumps({"cloud": platform, "region": region,
                                               "zone": None})
    return env


def group(addresses: list[str], *, gpus_per_node: int, port: int = RDZV_PORT
          ) -> dict[str, str]:
    """The values every node of a group shares, where the addresses are known before the job
    starts (a group of SSH machines, rented instances, a Kubernetes Indexed Job's pod names):
    `addresses` head first. The rank differs per node: `rank(i)` for a fixed one,
    `allocation_rank_exports` for one the platform gives each node at run time."""
    if not addresses:
        raise ValueError("a group has at least one node")
    listing = "\n".join(addresses)
    env = {name: str(len(addresses)) for name in NODE_COUNT_NAMES}
    env.update({name: listing for name in ADDRESS_LIST_NAMES})
    env.update({name: addresses[0] for name in HEAD_NAMES})
    env.update({name: str(gpus_per_node) for name in GPUS_PER_NODE_NAMES})
    env["DSTACK_GPUS_NUM"] = str(gpus_per_node * len(addresses))
    env.update(RGT_RDZV_PORT=str(port), MASTER_ADDR=addresses[0], MASTER_PORT=str(port))
    return env


def rank(i: int) -> dict[str, str]:
    """Node i's own values (its rank under every name)."""
    return {name: str(i) for name in RANK_NAMES + SETUP_RANK_NAMES}


def allocation_exports(gpus_per_node: int, *, hosts: str, node_count: str) -> list[str]:
    """Batch-script lines (on the allocation's first node, after the script has set
    RGT_HEAD_NODE) that set the node list, the node count and the GPU counts from the
    scheduler's own variables; every step inherits them. `hosts`: the shell command that lists
    the allocation's hostnames, one a line; `node_count`: the variable holding the node count
    (the platform names both: Slurm's `scontrol show hostnames`, SLURM_NNODES)."""
    names = " ".join(ADDRESS_LIST_NAMES)
    counts = " ".join(f'{n}="${node_count}"' for n in NODE_COUNT_NAMES)
    per_node = " ".join(f"{n}={gpus_per_node}" for n in GPUS_PER_NODE_NAMES)
    return [
        f"RGT_NODE_IPS=$({hosts})",
        " ".join(f"{n}=$RGT_NODE_IPS" for n in ADDRESS_LIST_NAMES[1:]),
        'DSTACK_MASTER_NODE_IP=$RGT_HEAD_NODE MASTER_ADDR=$RGT_HEAD_NODE',
        f'MASTER_PORT="${{RGT_RDZV_PORT:-{RDZV_PORT}}}"',
        f"export {names} RGT_HEAD_NODE DSTACK_MASTER_NODE_IP MASTER_ADDR MASTER_PORT",
        f"export {counts} {per_node}",
        f"export DSTACK_GPUS_NUM=$(( {gpus_per_node} * {node_count} ))",
    ]


def allocation_rank_exports(node_id: str) -> str:
    """The line each step's shell runs first: this node's rank is the scheduler's node id
    there (`node_id`: the variable that holds it, e.g. SLURM_NODEID)."""
    return "export " + " ".join(f'{n}="${node_id}"' for n in RANK_NAMES + SETUP_RANK_NAMES)
