"""A SkyPilot task on a real (private, one-node) Slurm cluster: its `run` sees its rank, the
node list and the counts from Slurm at run time, and its multi-line script runs as written
(issue 29 item 2)."""

from __future__ import annotations

from pathlib import Path

from rgt.lifecycle import watch
from rgt.lifecycle.launch import launch
from rgt.spec import load_spec

TASK = """\
workdir: .
resources: {cpus: 1, memory: 0.5}
setup: |
  echo "setup=$SKYPILOT_SETUP_NODE_RANK" > "$RGT_DURABLE_DIR/setup.txt"
run: |
  # it's a script: quotes, pipes and variables as bash reads them
  head=$(echo "$SKYPILOT_NODE_IPS" | head -n1)
  echo "rank=$SKYPILOT_NODE_RANK n=$SKYPILOT_NUM_NODES gpus=$SKYPILOT_NUM_GPUS_PER_NODE \\
  head=$head dstack=$DSTACK_MASTER_NODE_IP host=$(hostname -s)" > "$RGT_DURABLE_DIR/env.txt"
"""


def test_skypilot_task_gets_slurms_values(slurm_cluster, slurm_box, tmp_path):
    store, box = slurm_box
    work = tmp_path / "work"
    work.mkdir()
    (work / "task.yaml").write_text(TASK)
    run, _ = launch(store, "hpc", load_spec(work / "task.yaml"))
    slurm_cluster.wait_for_job(run.spec["platform_run"]["job_id"], timeout=90)
    summary = watch.refresh(store, box, store.run("hpc", run.id))
    assert summary["status"] == "succeeded", summary
    durable = Path(run.spec["durable_run_dir"])
    assert (durable / "setup.txt").read_text() == "setup=0\n"  # in the node's step
    text = (durable / "env.txt").read_text()
    values = dict(word.split("=", 1) for word in text.split())
    assert (values["rank"], values["n"], values["gpus"]) == ("0", "1", "0"), text
    # the allocation's hostname from `scontrol show hostnames`, not 127.0.0.1
    assert values["head"] == values["dstack"] != "127.0.0.1", text
    assert values["head"].split(".")[0] == values["host"], text
