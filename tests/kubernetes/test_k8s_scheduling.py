"""What `watch` makes of the cluster's own troubles, and sweeps as Indexed Jobs: a pod Pending
for want of GPUs (K8S1), a node lost with its pod and the claim still attached there
(Multi-Attach, K8S4) until the replacement starts elsewhere, no GPU inside the container (K8S6),
and a grid run as one Indexed Job with parallelism = max_parallel, pulled cell by cell."""

from __future__ import annotations

import functools

import boxkit
from cli import rgt
from kubekit import IMAGE, counter_spec, up

from rgt.lifecycle.launch import launch
from rgt.lifecycle.watch import refresh, wait_until_done
from rgt.spec import load_spec
from rgt.store import Store


def run(spec) -> list[str]:
    """`rgt run`, in this process (the CLI path is tests/kubernetes/test_k8s_lifecycle.py)."""
    return launch(Store(), "k8s", load_spec(spec))[1]


def watch_json() -> dict:
    store = Store()
    box = store.box("k8s")
    return refresh(store, box, store.run("k8s", None))


def until_done() -> dict:
    store = Store()
    return wait_until_done(store, store.box("k8s"), store.run("k8s", None), poll_s=0.2,
                           timeout_s=60)


# boxkit's, at this file's pace: 30 s at most, a look every 0.1 s
wait_for = functools.partial(boxkit.wait_for, timeout=30, every=0.1)


def test_pending_for_gpus_names_k8s1(kube, home, tmp_path, monkeypatch):
    monkeypatch.setenv("RGT_K8S_START_WAIT_S", "1")
    up(tmp_path)
    spec = counter_spec(tmp_path)
    spec.write_text(spec.read_text().replace('"A100:1"', '"A100:4"'))
    notes = run(spec)
    assert any("Insufficient nvidia.com/gpu" in n for n in notes), notes
    assert any("no node offers 4 GPUs (at most 1" in n for n in notes), notes
    state = watch_json()
    assert state["status"] == "starting"
    assert any("0/2 nodes are available: 2 Insufficient nvidia.com/gpu" in c
               for c in state["causes"])
    assert any(c.startswith("K8S1") for c in state["causes"]), state["causes"]


def test_lost_node_multi_attach_then_resume_elsewhere(kube, home, tmp_path):
    kube.cluster.detach_delay_s = 1.5  # the old node's attachment outlives it for a while
    up(tmp_path)
    run(counter_spec(tmp_path, steps=30))
    pod = wait_for(lambda: [p for p in kube.pods() if p["status"]["phase"] == "Running"
                            and p["metadata"]["labels"].get("rgt.dev/part") == "job"],
                   what="the training pod")[0]
    # the sidecar is written last: a .pt alone may still be a checkpoint in the making
    volumes = kube.cluster.root / "volumes"
    wait_for(lambda: list(volumes.glob("*/rgt/jobs/counter/ckpt/ckpt-*.json")),
             what="a first whole checkpoint on the PVC")
    kube.cluster.lose_node(pod["spec"]["nodeName"])
    state = wait_for(lambda: (lambda s: s if any(c.startswith("K8S4") for c in s["causes"])
                              else None)(watch_json()), what="Multi-Attach in watch")
    assert any("TaintManagerEviction" in r["why"] for r in state["restarts"]), state
    assert state["status"] in ("starting", "running")
    assert any("Multi-Attach error for volume" in c for c in state["causes"])
    assert until_done()["status"] == "succeeded"
    logs = rgt("logs", "k8s").stdout
    assert "resumed step=" in logs  # the replacement picked up the PVC checkpoint


def test_no_gpu_in_the_container_is_k8s6(kube, home, tmp_path):
    up(tmp_path)
    spec = counter_spec(tmp_path, steps=100)
    lines = spec.read_text().splitlines()
    lines = [f"""run: 'echo "GPU available: False, used: False" && {line[5:]}'"""
             if line.startswith("run: ") else line for line in lines]
    spec.write_text("\n".join(lines) + "\n")
    run(spec)
    state = wait_for(lambda: (lambda s: s if s["probe_warnings"] else None)(watch_json()),
                     what="the K8S6 warning")
    assert "K8S6" in state["probe_warnings"][0]


def test_sweep_is_one_indexed_job(kube, home, tmp_path):
    up(tmp_path)
    spec = tmp_path / "sweep.yaml"
    (tmp_path / "sweep").mkdir()
    spec.write_text("name: sweep\nworkdir: sweep\n"
                    "run: echo \"seed={seed} lr={lr}\" > \"$RGT_OUT_DIR/cell.txt\"\n"
                    "outputs: [cell.txt]\ngrid: {seed: [0, 1], lr: [0.1]}\nmax_parallel: 1\n")
    run(spec)
    job = kube.jobs()[0]
    assert (job["spec"]["completionMode"], job["spec"]["completions"],
            job["spec"]["parallelism"]) == ("Indexed", 2, 1)
    assert until_done()["status"] == "succeeded"
    assert kube.jobs()[0]["status"]["completedIndexes"] == "0,1"
    assert "seed=" not in rgt("logs", "k8s", "--cell", "1").stdout  # the cell wrote a file
    dest = tmp_path / "results"
    pulled = rgt("pull", "k8s", "--dest", str(dest))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert [(dest / "cells" / str(i) / "out" / "cell.txt").read_text() for i in (0, 1)] == \
        ["seed=0 lr=0.1\n", "seed=1 lr=0.1\n"]


def test_dry_run_prints_a_valid_job_and_submits_nothing(kube, home, tmp_path):
    import kubernetes_validate
    import yaml

    up(tmp_path)
    shown = rgt("run", "k8s", str(counter_spec(tmp_path)), "--dry-run")
    assert shown.returncode == 0, shown.stderr
    job = yaml.safe_load(shown.stdout)
    assert job["kind"] == "Job" and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    kubernetes_validate.validate(job, "1.33.0", strict=True)
    assert kube.jobs() == []


def test_cancel_deletes_the_job_and_the_trainer_checkpoints(kube, home, tmp_path):
    """`rgt cancel` reaches KubernetesPlatform.cancel (the on-box stop script has no runner to
    signal here: the pod is the Job controller's)."""
    up(tmp_path)
    run(counter_spec(tmp_path, steps=200))
    wait_for(lambda: "step=2" in rgt("logs", "k8s").stdout, what="training")
    (job,) = kube.jobs()
    grace = job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace != 30  # the profile's 30 s would be the wrong number to print
    other = rgt("cancel", "k8s", "--yes", "--grace", "5")  # the pods' grace is the Job's
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1
    assert f"their own grace, {grace} s" in other.stderr and kube.jobs(), other.stderr
    cancelled = rgt("cancel", "k8s", "--yes")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert f"SIGKILL after {grace} s ..." in cancelled.stdout, cancelled.stdout
    assert "(delete job rgt-counter-" in cancelled.stdout, cancelled.stdout
    assert kube.jobs() == []
    wait_for(lambda: not kube.pods(), what="the pods gone")
    log = next((kube.cluster.root / "volumes").glob("*/rgt/counter-*/log")).read_text()
    assert "preempted step=" in log  # SIGTERM reached the trainer, which checkpointed
    assert watch_json()["status"] == "cancelled"
    again = rgt("cancel", "k8s", "--yes")
    assert again.returncode == 2 and "already ended (cancelled)" in again.stderr, again.stderr


def test_audit_runs_in_a_door_and_names_the_nodes_gpus(kube, home, tmp_path):
    up(tmp_path)
    audit = rgt("audit", "k8s")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    text = " ".join(audit.stdout.split())
    assert "PVC rgt-k8s: Bound, ReadWriteOnce" in text
    assert "GPUs per node: gpu-node-1 1, gpu-node-2 1" in text
    wait_for(lambda: not kube.pods(), what="the door gone")


def test_push_leaves_out_what_every_push_leaves_out(kube, home, tmp_path):
    up(tmp_path)
    spec = counter_spec(tmp_path, steps=1, pause=0)
    work = tmp_path / "counter"
    for rel in (".git/HEAD", "__pycache__/x.pyc", "data/big.bin", "src/keep.py",
                "src/data/also_kept.txt"):
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(rel)
    (work / ".rgtignore").write_text("/data/\n")
    run(spec)
    assert until_done()["status"] == "succeeded"
    code = next((kube.cluster.root / "volumes").glob("*/rgt/counter-*/code"))
    arrived = sorted(str(p.relative_to(code)) for p in code.rglob("*") if p.is_file())
    assert arrived == [".rgtignore", "count.py", "out/count.txt", "src/data/also_kept.txt",
                       "src/keep.py"], arrived


def test_image_pull_backoff_in_watch_is_k8s3(kube, home, tmp_path):
    """A pull that fails after `rgt run` returned (a registry emptied, a secret revoked): the
    Job, its pod and events as the API returns them read as K8S3."""
    from rgt.platforms.k8s.api import BATCH, CORE
    from rgt.platforms.k8s.checks import kube_for
    from rgt.platforms.k8s.diagnose import job_summary
    from rgt.platforms.k8s.manifests import job_manifest

    up(tmp_path)
    missing = IMAGE[:-4] + "0000"
    with kube_for(Store().box("k8s")) as api:
        api.create(api.ns(BATCH, "jobs"), job_manifest(
            name="late", box="k8s", run_id="late", image=missing, script="true", env={},
            claim="rgt-k8s", mount_path=str(tmp_path / "mnt" / "checkpoints")))
        pods = wait_for(lambda: [p for p in api.items(CORE, "pods", labels="job-name=late")
                                 if (p["status"].get("containerStatuses") or [{}])[0]
                                 .get("state", {}).get("waiting", {}).get("reason")
                                 == "ImagePullBackOff"], what="ImagePullBackOff")
        events = api.items(CORE, "events")
        state = job_summary(api.find(api.ns(BATCH, "jobs", "late")), pods, events, [])
    assert state["status"] == "starting"
    assert any("ImagePullBackOff" in c for c in state["causes"]), state["causes"]
    assert any(c.startswith("K8S3") for c in state["causes"]), state["causes"]
