"""Every manifest rgt emits validates strictly (unknown fields refused) against the official
OpenAPI schemas of Kubernetes 1.29 through 1.33, as shipped by `kubernetes-validate`; and the
rules a schema cannot state hold (K8S2 restartPolicy, GPUs in limits with requests equal)."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
import yaml
from kubekit import IMAGE

from rgt.errors import UserError
from rgt.onbox import script_source
from rgt.platforms import platform_for
from rgt.platforms.k8s.manifests import (
    dns_name,
    door_manifest,
    door_secret_manifest,
    grace_seconds,
    job_manifest,
    pod_script,
    pvc_manifest,
    quantity,
    require_digest,
    seconds_of,
)
from rgt.spec import JobSpec, load_spec
from rgt.store import Box

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
    yield "job-kubernetes-section", job(
        gpus=1, selector={"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"},
        service_account="trainer", priority_class="high-priority",
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "ml",
                      "effect": "NoSchedule"},
                     {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                      "effect": "NoExecute", "tolerationSeconds": 600},
                     {"operator": "Exists"}],
        extra_labels={"team": "vision", "example.com/cost-center": "42"})
    yield "job-from-a-spec", yaml.safe_load_all(section_render())
    yield "multi-node-from-a-spec", list(yaml.safe_load_all(multi_node_render()))
    yield "door", door_manifest(name=dns_name("rgt-door", "gpu-box", "a1b2c3", limit=63),
                                box="gpu-box", image=IMAGE, claim="rgt-gpu-box",
                                mount_path="/checkpoints", source=script_source("door").decode(),
                                secret=dns_name("rgt-door", "gpu-box", "a1b2c3", limit=63),
                                pull_secret="regcred")
    yield "door-secret", door_secret_manifest(
        name=dns_name("rgt-door", "gpu-box", "a1b2c3", limit=63), box="gpu-box", token="t0k")


SECTION = {"image": "reg.example/train@sha256:" + "c" * 64, "service_account": "trainer",
           "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
           "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
           "priority_class": "batch-low", "labels": {"team": "vision", "gpu": True}}


def section_render(section: dict | None = None) -> str:
    """What the Kubernetes platform renders for a registered box and a spec's `kubernetes:`."""
    spec = JobSpec.model_validate({"name": "mnist", "run": "python train.py",
                                   "resources": {"gpu": "H100:2"},
                                   "kubernetes": SECTION if section is None else section})
    box = Box(name="gpu-box", profile="kubernetes", connection={"namespace": "ml"},
              data_dir="/checkpoints", durable_dir="/checkpoints", rate=None, state="up",
              created=0.0, extra={"claim": "rgt-gpu-box", "image": IMAGE})
    return platform_for("kubernetes").render(box, spec, "mnist-20260101-120000-ab12")


def multi_node_render(**spec) -> str:
    """`rgt render` of a 2-node job for a box never registered: PVC, Service, Job."""
    job_spec = JobSpec.model_validate({"name": "ddp", "run": "python multinode.py 6 2",
                                       "resources": {"gpu": "H100:8", "nodes": 2}, **spec})
    box = Box(name="gpu-box", profile="kubernetes", connection={"namespace": "ml"},
              data_dir="/checkpoints", durable_dir="/checkpoints", rate=None, state="up",
              created=0.0, extra={"image": IMAGE})
    return platform_for("kubernetes").render(box, job_spec, "ddp-20260101-120000-ab12")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("label,manifest", list(every_manifest()),
                         ids=[label for label, _ in every_manifest()])
def test_manifest_validates_strictly(label, manifest, version):
    for document in manifest if label.endswith("-from-a-spec") else [manifest]:
        kubernetes_validate.validate(document, version, strict=True)


def test_the_spec_kubernetes_section_reaches_the_pod():
    (job_doc,) = yaml.safe_load_all(section_render())  # a registered box: the Job only
    pod = job_doc["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == SECTION["image"]  # the job's, not the box's
    assert pod["serviceAccountName"] == "trainer" and pod["priorityClassName"] == "batch-low"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod["tolerations"] == [  # the GPU taint's toleration stays, the spec's follow
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    for where in (job_doc["metadata"], job_doc["spec"]["template"]["metadata"]):
        assert where["labels"]["team"] == "vision" and where["labels"]["gpu"] == "true"
        assert where["labels"]["rgt.dev/box"] == "gpu-box"
    plain = next(yaml.safe_load_all(section_render({})))["spec"]["template"]["spec"]
    assert plain["containers"][0]["image"] == IMAGE  # no section image: the box's
    assert not {"serviceAccountName", "priorityClassName", "nodeSelector"} & set(plain)


@pytest.mark.parametrize("section,says", [
    ({"image": "pytorch/pytorch:latest"}, "not pinned by digest"),
    ({"namespace": "other"}, "kubernetes.namespace` is not a known field"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "value": "v"}]}, "takes no value"),
    ({"tolerations": [{"value": "v"}]}, "without a key needs operator: Exists"),
    ({"tolerations": [{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}]},
     "only to effect: NoExecute"),
    ({"tolerations": [{"key": "a", "effect": "Sometimes"}]}, "NoSchedule, PreferNoSchedule"),
    ({"tolerations": [{"key": "a", "toleration_seconds": 5}]}, "did you mean "
                                                               "`tolerationSeconds`"),
    ({"labels": {"rgt.dev/run": "x"}}, "rgt's own label"),
    ({"labels": {"team": "a b"}}, "not a valid label value"),
    ({"node_selector": {"bad key!": "x"}}, "not a valid label key"),
    ({"service_account": "Trainer_1"}, "not a Kubernetes object name"),
    ({"priorty_class": "x"}, "did you mean `priority_class`"),
])
def test_a_bad_kubernetes_section_is_refused_by_name(tmp_path, section, says):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"name": "j", "run": "x", "kubernetes": section}))
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert says in str(err.value) and "kubernetes" in str(err.value)


def test_two_different_images_in_one_spec_are_refused():
    spec = JobSpec.model_validate({"name": "j", "run": "x", "resources": {"image": IMAGE},
                                   "kubernetes": {"image": SECTION["image"]}})
    box = Box(name="b", profile="kubernetes", connection={}, data_dir="/c", durable_dir="/c",
              rate=None, state="up", created=0.0, extra={"claim": "c", "image": IMAGE})
    with pytest.raises(UserError, match="two images"):
        platform_for("kubernetes").render(box, spec, "j-1")


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


def test_multi_node_is_an_indexed_job_under_a_headless_service():
    pvc, service, job_doc = yaml.safe_load_all(multi_node_render())
    assert [d["kind"] for d in (pvc, service, job_doc)] == \
        ["PersistentVolumeClaim", "Service", "Job"]  # the Service before the Job
    name = job_doc["metadata"]["name"]
    spec, pod = job_doc["spec"], job_doc["spec"]["template"]["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == \
        ("Indexed", 2, 2)
    assert spec["backoffLimit"] == 0  # one pod failing fails the Job: no pod retried alone
    assert [r["action"] for r in spec["podFailurePolicy"]["rules"]] == ["FailJob", "FailJob"]
    assert service["metadata"]["name"] == pod["subdomain"] == name
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
    assert set(service["spec"]["selector"].items()) <= \
        set(spec["template"]["metadata"]["labels"].items())
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["RGT_NODE_IPS"] == f"{name}-0.{name}\n{name}-1.{name}"
    assert env["MASTER_ADDR"] == env["RGT_HEAD_NODE"] == f"{name}-0.{name}"
    assert env["RGT_NUM_NODES"] == "2" and env["RGT_GPUS_PER_NODE"] == "8"
    assert "RGT_NODE_RANK" not in env  # each pod's own: its completion index, in the script
    script = pod["containers"][0]["command"][2]
    assert 'RGT_NODE_RANK="$JOB_COMPLETION_INDEX"' in script
    assert "torchrun --nnodes=$RGT_NUM_NODES --nproc-per-node=8" in script
    # a SkyPilot task's run is its own per-node launch line: run as written
    sky = next(d for d in yaml.safe_load_all(multi_node_render(dialect="skypilot"))
               if d["kind"] == "Job")["spec"]["template"]["spec"]["containers"][0]
    assert "torchrun" not in sky["command"][2] and "python multinode.py 6 2" in sky["command"][2]


@pytest.mark.parametrize("spec,says", [
    ({"grid": {"lr": [0.1, 0.2]}}, "multi-node sweep is not supported"),
    ({"recover": {"max_restarts": 2}}, "a lone replacement cannot rejoin"),
    ({"run": "torchrun --nproc-per-node=8 train.py"}, "without a rendezvous"),
])
def test_multi_node_refuses_what_it_cannot_honour(spec, says):
    with pytest.raises(UserError, match=says):
        multi_node_render(**spec)


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
