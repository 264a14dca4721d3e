"""Multi-node training on Kubernetes, through rgt, on the fake cluster: an Indexed Job of two
pods under a headless Service, each pod a real process with its own loopback address,
hostname and /etc/hosts (the fake's stand-in for the cluster DNS), so pod i reaches pod j at
`<job>-<j>.<service>` as on a real cluster.

PyTorch's multi-node DDP example (tests/ddp_examples.py: gloo on CPU) trains across both pods
under the torchrun rgt starts; a SkyPilot task file shows each pod's contract variables are
what node_env says; one pod killed fails the Job as a whole; cancel (a dstack task file) and
`down` take the Service with the Job. Everything goes through the `rgt` command, as a user's
does."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import boxkit
import pytest
from cli import rgt
from ddp_examples import multinode_workdir
from kube_api import FakeKubeApi
from kube_cluster import Cluster
from kubekit import IMAGE, make_tls, write_kubeconfig
from sshd import free_port

from rgt.platforms.k8s.manifests import dns_name

NS = "ml"
# one worker: the tests share this module's cluster and build on each other's runs, and every
# fake cluster's PVC door listens on one port (tests/conftest.py groups the other k8s tests)
pytestmark = pytest.mark.xdist_group("kubernetes")


def wait_for(predicate, timeout: float = 60, what: str = ""):
    return boxkit.wait_for(predicate, timeout, every=0.1, what=what)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One fake cluster (two nodes) and one box on a ReadWriteMany claim for the module."""
    root = tmp_path_factory.mktemp("k8s-multinode")
    cert, key, ca = make_tls(root / "tls")
    api = FakeKubeApi(namespaces=("default", NS)).start(tls=(cert, key))
    # one GPU a node: a job asking one GPU a pod gets its two pods on the two nodes
    cluster = Cluster(api, root / "cluster", nodes={"node-a": 1, "node-b": 1}, images={IMAGE})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KUBECONFIG", str(write_kubeconfig(root / "kubeconfig", api.url, ca=ca)))
        env.setenv("RGT_HOME", str(root / "rgt-home"))
        made = rgt("up", "k8s", "--profile", "kubernetes", "--image", IMAGE, "--disk", "1",
                   "--mount-path", str(root / "mnt" / "shared"), "--access-mode",
                   "ReadWriteMany")
        assert made.returncode == 0, made.stdout + made.stderr
        yield cluster, root
    cluster.stop()
    api.stop()


def job_pods(api: FakeKubeApi, run_id: str) -> list[dict]:
    return [p for p in api.list("pods", NS) if p["metadata"]["labels"].get("rgt.dev/run")
            == run_id]


CONTRACT = ("RGT_NODE_RANK", "SKYPILOT_NODE_RANK", "DSTACK_NODE_RANK", "RGT_NUM_NODES",
            "SKYPILOT_NUM_NODES", "DSTACK_NODES_NUM", "RGT_HEAD_NODE", "DSTACK_MASTER_NODE_IP",
            "MASTER_ADDR", "MASTER_PORT", "RGT_GPUS_PER_NODE", "JOB_COMPLETION_INDEX")


SHOW = """import os, socket, time
names = os.environ["RGT_NODE_IPS"].split("\\n")
for v in CONTRACT_NAMES:
    print(f"{v}={os.environ.get(v, '<unset>')}")
print("IPS=" + " ".join(names))
print("HOST=" + socket.gethostname())
for name in names:  # the DNS lags a pod's start a little, as a real cluster's does
    for _ in range(50):
        try:
            print(f"RESOLVES {name} {socket.gethostbyname(name)}")
            break
        except socket.gaierror:
            time.sleep(0.1)
port = int(os.environ["MASTER_PORT"])
if os.environ["RGT_NODE_RANK"] == "0":
    conn, _ = socket.create_server(("", port)).accept()
    print("HEAD GOT", conn.recv(64).decode())
else:
    for _ in range(200):
        try:
            socket.create_connection((os.environ["RGT_HEAD_NODE"], port), timeout=5).sendall(
                b"hello from node 1")
            print("SENT")
            break
        except OSError:
            time.sleep(0.1)
""".replace("CONTRACT_NAMES", repr(CONTRACT))


def test_each_pod_gets_its_rank_the_addresses_and_reaches_the_others(cluster):
    """A SkyPilot-style task (run as written on every node): the contract's variables, each
    address resolving to that pod's own IP, and the head reachable by name from node 1."""
    fake, root = cluster
    port = free_port()
    work = root / "contract"
    work.mkdir(exist_ok=True)
    (work / "show.py").write_text(SHOW)
    task = root / "sky.yaml"  # a SkyPilot task file, as SkyPilot's users write them
    task.write_text(f"name: contract\nworkdir: {work}\nnum_nodes: 2\n"
                    f'envs:\n  RGT_RDZV_PORT: "{port}"\nrun: |\n  python show.py\n')
    started = rgt("run", "k8s", str(task))
    assert started.returncode == 0, started.stdout + started.stderr
    assert "2 pods, one Indexed Job" in " ".join(started.stdout.split()), started.stdout
    run_id = state()["id"]
    job = dns_name("rgt", run_id)
    service = fake.api.get("services", NS, job)
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"]
    done = rgt("watch", "k8s", "--until-done", "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    logs = rgt("logs", "k8s").stdout
    names = [f"{job}-0.{job}", f"{job}-1.{job}"]
    ips = {}
    for pod in job_pods(fake.api, run_id):
        rank = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        ips[rank] = pod["status"]["podIP"]
        assert pod["spec"]["hostname"] == f"{job}-{rank}" and pod["spec"]["subdomain"] == job
    assert len(set(ips.values())) == 2, ips  # each pod an address of its own
    blocks = logs.split("[rgt] ---- node ")[1:]
    assert [b.split(":")[0] for b in blocks] == ["0", "1"], logs
    for rank, block in enumerate(blocks):
        for name, want in (("RGT_NODE_RANK", rank), ("SKYPILOT_NODE_RANK", rank),
                           ("DSTACK_NODE_RANK", rank), ("JOB_COMPLETION_INDEX", rank),
                           ("RGT_NUM_NODES", 2), ("SKYPILOT_NUM_NODES", 2),
                           ("DSTACK_NODES_NUM", 2), ("RGT_HEAD_NODE", names[0]),
                           ("DSTACK_MASTER_NODE_IP", names[0]), ("MASTER_ADDR", names[0]),
                           ("MASTER_PORT", port), ("RGT_GPUS_PER_NODE", 0),
                           ("IPS", " ".join(names)), ("HOST", f"{job}-{rank}")):
            assert f"\n{name}={want}\n" in block, (name, block)
        for i, name in enumerate(names):  # every pod resolves every pod, to its own IP
            assert f"RESOLVES {name} {ips[str(i)]}" in block, block
    assert "HEAD GOT hello from node 1" in blocks[0] and "SENT" in blocks[1], logs


def state() -> dict:
    """The latest run as `rgt watch --json` reports it."""
    done = rgt("watch", "k8s", "--json")
    return json.loads(done.stdout)["run"]


@pytest.fixture(scope="module")
def ddp_spec(cluster) -> Path:
    _, root = cluster
    multinode_workdir(root / "ddp")
    spec = root / "ddp.yaml"
    spec.write_text("name: ddp\nworkdir: ddp\nrun: python multinode.py 6 2\n"
                    'resources: {nodes: 2, gpu: "A100:1"}\n'
                    f'env: {{RGT_RDZV_PORT: "{free_port()}", RGT_CKPT_WRITE_S: "1"}}\n')
    return spec


def test_ddp_example_trains_across_two_pods(cluster, ddp_spec, tmp_path):
    fake, _ = cluster
    started = rgt("run", "k8s", str(ddp_spec))
    assert started.returncode == 0, started.stdout + started.stderr
    done = rgt("watch", "k8s", "--until-done", "--timeout", "120")
    assert done.returncode == 0, done.stdout + done.stderr
    logs = rgt("logs", "k8s").stdout
    # both ranks trained every epoch, each in its own pod (node 0's pod hosts rank 0)
    node0, node1 = logs.split("[rgt] ---- node 1:")
    for epoch in range(6):
        assert f"[GPU0] Epoch {epoch} | Batchsize: 32 | Steps: 32" in node0, logs
        assert f"[GPU1] Epoch {epoch} | Batchsize: 32 | Steps: 32" in node1, logs
    assert "Training snapshot saved" in node0 and "Training snapshot saved" not in node1
    assert "(node 0 of 2) on node node-a" in node0 and "(node 1 of 2) on node node-b" in node1
    one = rgt("logs", "k8s", "--node", "1")  # not "ran on one machine": it ran on two
    assert one.returncode == 2 and "2 nodes are one job" in one.stderr, one.stderr
    pulled = rgt("pull", "k8s", "--dest", str(tmp_path / "got"))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    run_id = state()["id"]
    text = (tmp_path / "got" / "logs" / f"{run_id}.log").read_text()  # node 0's, the run's
    assert "[GPU0] Epoch 5" in text and "[GPU1]" not in text and "(node 0 of 2)" in text
    text = (tmp_path / "got" / "logs" / f"{run_id}.node1.log").read_text()  # node 1's
    assert "[GPU1] Epoch 5" in text and "[GPU0]" not in text and "(node 1 of 2)" in text
    job = fake.api.get("jobs", NS, dns_name("rgt", state()["id"]))
    service = fake.api.get("services", NS, job["metadata"]["name"])  # kept with its Job,
    assert [(o["kind"], o["uid"]) for o in service["metadata"]["ownerReferences"]] == \
        [("Job", job["metadata"]["uid"])]  # which owns it: the GC deletes it with the Job


def test_one_pod_killed_fails_the_whole_job(cluster, ddp_spec):
    fake, _ = cluster
    ddp_spec.write_text(ddp_spec.read_text().replace("multinode.py 6 2", "multinode.py 400 50"))
    started = rgt("run", "k8s", str(ddp_spec))
    assert started.returncode == 0, started.stdout + started.stderr
    run_id = state()["id"]
    log1 = wait_for(lambda: next((fake.root / "volumes").glob(f"*/rgt/{run_id}/log.node-1"),
                                 None), what="node 1's log on the claim")
    wait_for(lambda: "[GPU1] Epoch 2" in log1.read_text(), what="node 1 training")
    (victim,) = [p for p in job_pods(fake.api, run_id) if p["metadata"]["annotations"]
                 ["batch.kubernetes.io/job-completion-index"] == "1"]
    os.killpg(fake.procs[victim["metadata"]["uid"]].popen.pid, signal.SIGKILL)  # node 1 dies
    done = rgt("watch", "k8s", "--until-done", "--timeout", "60")
    assert done.returncode != 0, done.stdout + done.stderr
    ended = state()
    assert ended["status"] == "failed", ended
    assert any("node 1 failed first" in c and "exit 137" in c and "fails as a whole" in c
               for c in ended["causes"]), ended["causes"]
    job = fake.api.get("jobs", NS, dns_name("rgt", run_id))
    failed = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "PodFailurePolicy", job["status"]
    # Kubernetes stopped node 0 too: nothing of the run is left running
    wait_for(lambda: not [p for p in job_pods(fake.api, run_id)
                          if p["status"]["phase"] in ("Pending", "Running")],
             what="node 0 stopped")
    assert "[GPU0] Epoch 399" not in rgt("logs", "k8s").stdout


def test_audit_names_the_engines_and_down_takes_the_services(cluster):
    fake, _ = cluster
    fake.api.extra_groups = {"jobset.x-k8s.io": ("v1alpha2", {"jobsets": "JobSet"}),
                             "kubeflow.org": ("v1", {"pytorchjobs": "PyTorchJob"})}
    audit = rgt("audit", "k8s")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    text = " ".join(audit.stdout.split())
    assert "serves JobSet (jobset.x-k8s.io/v1alpha2), PyTorchJob (Kubeflow training " \
           "operator) (kubeflow.org/v1); rgt runs resources.nodes > 1 as an Indexed Job" \
           in text, text
    fake.api.extra_groups = {}
    kept = {s["metadata"]["name"] for s in fake.api.list("services", NS)}
    assert len(kept) == 3, kept  # the finished runs' (their Jobs kept for their logs)
    # a Job deleted as ttlSecondsAfterFinished (or kubectl) deletes it takes its Service along
    gone = sorted(kept)[0]
    fake.delete("jobs", NS, gone, propagation="Background", grace=None)
    kept.discard(gone)
    assert {s["metadata"]["name"] for s in fake.api.list("services", NS)} == kept
    task = cluster[1] / "dstack.yaml"  # a dstack task file, as dstack's users write them
    task.write_text("type: task\nname: sleeper\nnodes: 2\ncommands:\n  - sleep 60\n")
    started = rgt("run", "k8s", str(task))
    assert started.returncode == 0, started.stdout + started.stderr
    wait_for(lambda: state()["status"] == "running", what="both sleepers running")
    cancelled = rgt("cancel", "k8s", "--yes")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    job = dns_name("rgt", state()["id"])
    assert f"its headless service {job} went with the Job" in cancelled.stdout or \
        f"delete its headless service {job}" in cancelled.stdout, cancelled.stdout
    assert fake.api.get("services", NS, job) is None and fake.api.get("jobs", NS, job) is None
    assert {s["metadata"]["name"] for s in fake.api.list("services", NS)} == kept
    down = rgt("down", "k8s", "--discard-results", input="k8s\n")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "headless Service(s)" in " ".join(down.stdout.split())
    wait_for(lambda: not fake.api.list("services", NS) and not fake.api.list("jobs", NS),
             what="the Jobs and Services gone")


def test_the_node_the_job_controller_names_is_the_cause():
    """Both nodes Failed in the same second (node 0's collective broke when node 1 died): the
    cause is the pod the Job controller's FailJob condition names, not the first in rank."""
    from rgt.platforms.k8s.group import group_summary

    def pod(rank: int, code: int) -> dict:
        return {"metadata": {"name": f"rgt-x-{rank}-abcde", "creationTimestamp":
                             "2026-01-01T00:00:00Z",
                             "annotations": {"batch.kubernetes.io/job-completion-index":
                                             str(rank)}},
                "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {
                    "exitCode": code, "reason": "Error",
                    "finishedAt": "2026-01-01T00:01:00Z"}}}]}}

    job = {"status": {"startTime": "2026-01-01T00:00:00Z", "conditions": [
        {"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
         "message": "Container train for pod ml/rgt-x-1-abcde failed with exit code 137 "
                    "matching FailJob rule at index 0"}]}}
    summary = group_summary(job, [pod(0, 1), pod(1, 137)], [], [], nodes=2,
                            last_status="running")
    assert summary["status"] == "failed" and summary["exit_code"] == 137
    assert summary["causes"][0].startswith("node 1 failed first"), summary["causes"]
    job["status"]["conditions"][0]["message"] = ""  # no word from the controller: earliest,
    summary = group_summary(job, [pod(0, 143), pod(1, 137)], [], [], nodes=2,  # a kill's
                            last_status="running")  # SIGTERM (143) is a consequence
    assert summary["causes"][0].startswith("node 1 failed first"), summary["causes"]
