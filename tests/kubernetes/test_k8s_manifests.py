"""Every manifest rgt emits validates strictly (unknown fields refused) against the official
OpenAPI schemas of Kubernetes 1.29 through 1.33, as shipped by `kubernetes-validate`; and the
rules a schema cannot state hold (K8S2 restartPolicy, GPUs in limits with requests equal)."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
from kubekit import IMAGE

from rgt.errors import UserError
from rgt.onbox import script_source
from rgt.platforms.k8s.manifests import (
    dns_name,
    door_manifest,
    grace_seconds,
    job_manifest,
    pod_script,
    pvc_manifest,
    quantity,
    require_digest,
    seconds_of,
)

VERSIONS = ["1.29.0", "1.30.0", "1.31.0", "1.32.0", "1.33.0"]
CELLS = [{"lr": 0.1, "seed": 0}, {"lr": 0.01, "seed": 0}, {"lr": 0.1, "seed": 1}]


def job(**more):
    base = {"name": dns_name("rgt", "mnist-20260101-120000-ab12"), "box": "gpu-box",
            "run_id": "mnist-20260101-120000-ab12", "image": IMAGE,
            "script": pod_script(run="python train.py --lr {lr}", setup="pip install -r r.txt",
                                 outputs=["out/", "metrics.json"], lib="/checkpoints/lib"),
            "env": {"RGT_RUN_ID": "mnist-20260101-120000-ab12", "WANDB_MODE": "offline"},
            "claim": "rgt-gpu-box", "mount_path": "/checkpoints"}
    return job_manifest(**{**base, **more})


def every_manifest():
    yield "pvc", pvc_manifest("rgt-gpu-box", "gpu-box", "50G")
    yield "pvc-rwx-class", pvc_manifest("rgt-gpu-box", "gpu-box", "1.5T", storage_class="nfs",
                                        access_mode="ReadWriteMany")
    yield "job-cpu", job()
    yield "job-gpu", job(gpus=8, cpus=32, mem="256G", disk="200G", time_limit="2-00:00:00",
                         ckpt_write_s=95.5,
                         backoff_limit=5, selector={"nvidia.com/gpu.product": "NVIDIA-H100"},
                         pull_secret="regcred")
    yield "job-sweep", job(cells=len(CELLS), max_parallel=2, gpus=1, time_limit="90m",
                           script=pod_script(run="python train.py --lr {lr}", setup="",
                                             outputs=[], cells=CELLS))
    yield "door", door_manifest(name=dns_name("rgt-door", "gpu-box", "a1b2c3", limit=63),
                                box="gpu-box", image=IMAGE, claim="rgt-gpu-box",
                                mount_path="/checkpoints", source=script_source("door").decode(),
                                token="t0ken", pull_secret="regcred")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("label,manifest", list(every_manifest()),
                         ids=[label for label, _ in every_manifest()])
def test_manifest_validates_strictly(label, manifest, version):
    kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_validator_can_fail(version):
    bad = copy.deepcopy(job())
    bad["spec"]["backofLimit"] = 3  # a typo is an unknown field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, version, strict=True)


def test_job_shape_follows_the_rules_schemas_cannot_state():
    spec = job(gpus=2, mem="16G", time_limit="01:30:00", ckpt_write_s=45)["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert pod["restartPolicy"] in ("Never", "OnFailure")  # K8S2
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert container["resources"]["limits"]["memory"] == "16Gi"
    disk = job(disk="20G")["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert disk["limits"]["ephemeral-storage"] == disk["requests"]["ephemeral-storage"] == "20Gi"
    assert spec["activeDeadlineSeconds"] == 5400
    assert pod["terminationGracePeriodSeconds"] == 75
    assert spec["ttlSecondsAfterFinished"] > 0 and spec["backoffLimit"] >= 0
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0]["onPodConditions"][0]["type"] == "DisruptionTarget"
    assert rules[1]["onExitCodes"]["values"] == [85]
    assert {"name": "data", "mountPath": "/checkpoints"} in container["volumeMounts"]
    sweep = job(cells=3, max_parallel=2)["spec"]
    assert (sweep["completionMode"], sweep["completions"], sweep["parallelism"]) == \
        ("Indexed", 3, 2)
    assert "resources" not in job()["spec"]["template"]["spec"]["containers"][0]


def test_multi_node_is_refused_clearly():
    with pytest.raises(UserError, match="multi-node training .* is not supported"):
        job(nodes=2)


def test_units_and_names():
    assert [quantity(s, "x") for s in ("16G", "512M", "1.5G", "2T")] == \
        ["16Gi", "512Mi", "1536Mi", "2Ti"]
    assert [seconds_of(t) for t in ("90m", "2h", "45s", "30", "01:00:00", "1-00:00:00",
                                    "10:30")] == [5400, 7200, 45, 1800, 3600, 86400, 630]
    assert grace_seconds(None) == 60 and grace_seconds(0) == 30 and grace_seconds(100.2) == 131
    name = dns_name("rgt", "My_Job.v2-20260101")
    assert len(name) <= 52 and name == name.lower() and "_" not in name
    assert dns_name("rgt", "x" * 200) != dns_name("rgt", "x" * 199)
    with pytest.raises(UserError, match="not pinned by digest"):
        require_digest("pytorch/pytorch:latest", "resources.image")
    assert require_digest(IMAGE, "x") == IMAGE
