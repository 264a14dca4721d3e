"""The whole lifecycle on Kubernetes, over the fake API server and its cluster (real processes,
the PVC a real directory mounted in each pod): up → run → watch (the pod evicted for
ephemeral-storage mid-training → the Job controller's new pod resumes from the PVC checkpoint)
→ logs → pull (verified) → ckpt verify → down. The run's final weights are bitwise those of an
uninterrupted run. The transcript is printed (pytest -s shows it; the README quotes one)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from pathlib import Path

import boxkit
import torch
from cli import rgt
from kubekit import EVERY, STEPS, job_spec, up_cli

import rgt.examples.train_mlp as train_mlp

_CLOCK = [time.monotonic()]


def say(transcript: list[str], command: str, done: subprocess.CompletedProcess) -> None:
    took, _CLOCK[0] = time.monotonic() - _CLOCK[0], time.monotonic()
    transcript.append(f"$ {command}   # exit {done.returncode}, {took:.1f} s")
    transcript += [f"  {line}" for line in (done.stdout + done.stderr).rstrip().splitlines()]


def reference_run(tmp_path: Path) -> dict:
    """The same training, uninterrupted, on this machine."""
    out = tmp_path / "reference"
    subprocess.run([sys.executable, train_mlp.__file__, "--ckpt-dir", str(out / "ckpt"),
                    "--out", str(out / "out"), "--steps", str(STEPS), "--save-every",
                    str(EVERY)], check=True, capture_output=True, timeout=120)
    return torch.load(out / "out" / "final.pt", weights_only=True)


# boxkit's, at this file's pace: 60 s at most, a look every 0.05 s
wait_for = functools.partial(boxkit.wait_for, timeout=60, every=0.05)


def same_tensors(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a == b


def test_up_run_evicted_resume_pull_verify_down(kube, home, tmp_path):
    transcript: list[str] = []
    _CLOCK[0] = time.monotonic()
    say(transcript, "rgt up k8s --profile kubernetes --image …@sha256:abab… --disk 1 "
                    "--mount-path …/checkpoints", made := up_cli(tmp_path))
    assert made.returncode == 0, made.stdout + made.stderr
    say(transcript, "rgt ls", ls := rgt("ls"))
    assert ls.returncode == 0 and "k8s" in ls.stdout
    spec = job_spec(tmp_path)
    run = rgt("run", "k8s", str(spec))
    say(transcript, "rgt run k8s job.yaml", run)
    assert run.returncode == 0, run.stderr
    assert "SIGTERM lead (terminationGracePeriodSeconds): 31 s" in run.stdout

    # training on the PVC: wait for a checkpoint past step 10, then the kubelet evicts the pod
    volumes = kube.cluster.root / "volumes"
    wait_for(lambda: any(int(p.stem.split("-")[1]) >= 10
                         for p in volumes.glob("*/rgt/jobs/mlp/ckpt/ckpt-*.pt")),
             what="a checkpoint at step 10 on the PVC")
    first = [p for p in kube.pods() if p["metadata"]["labels"].get("rgt.dev/part") == "job"]
    assert len(first) == 1 and first[0]["status"]["phase"] == "Running"
    kube.cluster.evict_for_storage(first[0])
    transcript.append(f"# the kubelet evicts {first[0]['metadata']['name']} "
                      "(node low on ephemeral-storage)")
    replaced = wait_for(lambda: [p for p in kube.pods()
                                 if p["metadata"]["labels"].get("rgt.dev/part") == "job"
                                 and p["metadata"]["name"] != first[0]["metadata"]["name"]],
                        what="the Job controller's replacement pod")
    status = json.loads(rgt("watch", "k8s", "--json").stdout)["run"]
    transcript.append("$ rgt watch k8s --json   # while the replacement runs")
    transcript += [f"  status={status['status']}"] + [f"  cause: {c}" for c in status["causes"]]
    assert status["status"] in ("running", "starting")
    assert any("Evicted" in c and replaced[0]["metadata"]["name"] in c
               for c in status["causes"]), status["causes"]
    assert any(c.startswith("K8S5") for c in status["causes"]), status["causes"]

    done = rgt("watch", "k8s", "--until-done", "--timeout", "90")
    say(transcript, "rgt watch k8s --until-done", done)
    assert done.returncode == 0, done.stdout + done.stderr
    logs = rgt("logs", "k8s")
    say(transcript, "rgt logs k8s", logs)
    assert "resumed step=" in logs.stdout and f"done step={STEPS}" in logs.stdout

    dest = tmp_path / "results"
    pull = rgt("pull", "k8s", "--dest", str(dest))
    say(transcript, "rgt pull k8s --dest results", pull)
    assert pull.returncode == 0, pull.stdout + pull.stderr
    log = (dest / "logs").glob("*.log")
    pvc_log = next(log).read_text()
    assert "preempted step=" in pvc_log and "resumed step=" in pvc_log  # both pods, on the PVC
    final = next(dest.rglob("final.pt"))  # out/final.pt (out/out/ before outputs were flat)
    verify = rgt("ckpt", "verify", str(final))
    say(transcript, f"rgt ckpt verify {final.relative_to(tmp_path)}", verify)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    pulled = torch.load(final, weights_only=True)
    assert same_tensors(pulled, reference_run(tmp_path)), "resumed run is not bitwise equal"
    transcript.append("# final.pt == an uninterrupted run's, tensor for tensor (torch.equal)")

    down = rgt("down", "k8s", "--yes")
    say(transcript, "rgt down k8s --yes", down)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "nodes keep billing" in " ".join(down.stdout.split())
    wait_for(lambda: not kube.pods() and not kube.jobs()
             and not kube.api.list("persistentvolumeclaims", "ml"), what="everything deleted")
    print("\n".join(transcript))


def test_down_panel_says_what_release_deletes_and_keeps(kube, home, tmp_path):
    """The panel before the confirmation is the platform's word, not the profile's tiers: the
    profile's meter-stop verb (scaling the node pool down) keeps every PVC, but rgt's release
    deletes the one it created and keeps one the user brought (--claim)."""
    from kubekit import IMAGE, up

    from rgt.lifecycle import boxes
    from rgt.spec import Resources
    from rgt.store import Store

    up(tmp_path)  # box k8s: rgt creates PVC rgt-k8s
    boxes.up(Store(), "mine", "kubernetes", None, rate=None, data_dir=None, durable_dir=None,
             resources=Resources(image=IMAGE),
             options={"claim": "rgt-k8s", "mount_path": str(tmp_path / "mnt" / "ckpt2")})
    kept = rgt("down", "mine", input="no\n")
    assert kept.returncode == 1, kept.stdout + kept.stderr  # shown, then not confirmed
    panel = " ".join(kept.stdout.split())
    assert "keeps the PVC rgt-k8s" in panel and "yours, rgt did not create it" in panel
    assert "still billing after the PVC rgt-k8s's volume" in panel, panel
    assert "destroys the PVC" not in panel
    assert rgt("down", "mine", "--yes").returncode == 0
    assert [c["metadata"]["name"] for c in kube.api.list("persistentvolumeclaims", "ml")] \
        == ["rgt-k8s"]

    down = rgt("down", "k8s", "--yes")
    assert down.returncode == 0, down.stdout + down.stderr
    panel = " ".join(down.stdout.split())
    assert "destroys the PVC rgt-k8s" in panel and "rgt created it, so down deletes it" in panel
    assert "keeps pvc" not in panel and "keeps object-storage" not in panel, panel
    assert "still billing after the cluster's GPU nodes" in panel
    assert "rgt does not scale the node pool down" in panel
    wait_for(lambda: not kube.api.list("persistentvolumeclaims", "ml"), what="the PVC gone")
