"""The one resources vocabulary (issue 14 items 2-4): each platform maps it or refuses a field
by name before anything is rented; SkyPilot task files read as specs; `rgt render` for Slurm.

No box, no API: these run the real parsing, mapping and rendering code paths; the CLI ones run
`rgt` in a child process with an empty RGT_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rgt.errors import UserError
from rgt.platforms import platform_for
from rgt.platforms.base import Request, refuse_unsupported, size_gb
from rgt.platforms.slurm.options import BatchOptions, settings_words
from rgt.spec import JobSpec, Resources, load_spec
from rgt.store import Store


def rgt(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "RGT_HOME": str(home)}
    for key in ("LAMBDA_API_KEY", "VAST_API_KEY"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "rgt", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


# -- the vocabulary, per platform ----------------------------------------------------------

def test_every_profile_has_a_platform_with_the_verbs():
    for name in ("local", "generic-ssh", "autodl", "lambda", "vastai", "slurm", "runpod",
                 "kubernetes", "colab", "kaggle"):
        platform = platform_for(name)
        for verb in ("connect", "provision", "launch", "state", "logs", "fetch", "release",
                     "audit_extras"):
            assert callable(getattr(platform, verb)), (name, verb)


@pytest.mark.parametrize("profile,field,value", [
    ("generic-ssh", "gpu", "H100:1"),    # a machine you already rented is what it is
    ("local", "mem", "16G"),
    ("lambda", "image", "pytorch/pytorch:2.4.0"),  # Lambda launches its own image
    ("lambda", "disk", "100G"),          # an instance type's disk is what it is
    ("vastai", "region", "EU"),
    ("vastai", "time", "2h"),
    ("slurm", "spot", True),
    ("slurm", "region", "EU"),          # a cluster is where it is
])
def test_a_field_a_platform_cannot_honour_is_refused_before_anything(tmp_path, profile, field,
                                                                      value):
    os.environ["RGT_HOME"] = str(tmp_path)
    store = Store()
    request = Request(name="b", resources=Resources.model_validate({field: value}))
    with pytest.raises(UserError) as err:
        platform_for(profile).provision(store, request)
    assert f"{profile} cannot honour resources.{field}" in str(err.value)
    assert store.boxes() == []  # nothing registered, nothing rented


def test_refusal_names_the_first_field_and_what_the_platform_maps():
    asked = Resources(gpu="A100:1", image="img", region="x")
    with pytest.raises(UserError) as err:
        refuse_unsupported("lambda", frozenset({"gpu", "region"}), asked)
    assert str(err.value).startswith("lambda cannot honour resources.image ('img')")
    assert "it maps: gpu, region" in str(err.value)
    refuse_unsupported("lambda", frozenset({"gpu", "region", "image"}), asked)  # all mapped


def test_sizes_read_as_gb():
    assert size_gb("50G") == 50 and size_gb("512M") == 0.5 and size_gb("1T") == 1024
    assert Resources(disk=256).disk == "256G" and Resources(mem=32.5).mem == "32.5G"


def spec(**resources) -> JobSpec:
    return JobSpec(name="j", run="python train.py", resources=resources)


def test_slurm_maps_the_vocabulary_to_sbatch_words():
    header = BatchOptions.from_spec(
        spec(gpu="A100:2", cpus=8, mem="1.5G", time="90m", nodes=2, disk="50G"),
        "/l/%j.out").header()
    assert "#SBATCH --gres=gpu:2" in header  # GRES type names are the cluster's own
    assert "#SBATCH --cpus-per-task=8" in header
    assert "#SBATCH --mem=1536M" in header
    assert "#SBATCH --time=01:30:00" in header
    assert "#SBATCH --nodes=2" in header
    assert "#SBATCH --tmp=50G" in header  # the README's job asks for disk: a node's TmpDisk


def test_slurm_section_is_typed_and_the_old_env_knob_still_works():
    typed = JobSpec.model_validate({"name": "j", "run": "x", "slurm": {
        "partition": "gpu", "account": "lab", "qos": "high", "constraint": "a100",
        "sbatch_args": "--exclusive --mail-type=END", "modules": ["cuda/12.1"]}})
    assert settings_words(typed) == ["--partition=gpu", "--account=lab", "--qos=high",
                                     "--constraint=a100", "--exclusive", "--mail-type=END"]
    old = JobSpec(name="j", run="x", env={"RGT_SLURM_SBATCH_ARGS": "--partition=debug"})
    assert settings_words(old) == ["--partition=debug"]
    from rgt.platforms.slurm.options import deprecations, environment_hook
    assert environment_hook(typed, "module load cuda") == "module load cuda/12.1"
    assert any("RGT_SLURM_SBATCH_ARGS is deprecated" in n for n in deprecations(old))
    with pytest.raises(ValueError, match="one word"):
        JobSpec.model_validate({"name": "j", "run": "x", "slurm": {"partition": "a b"}})


def test_a_misspelt_slurm_setting_points_at_the_right_one(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: j\nrun: x\nslurm: {partiton: gpu}\n")
    with pytest.raises(UserError, match=r"slurm.partiton` is not a known field; did you mean "
                                        r"`partition`"):
        load_spec(path)


# -- SkyPilot task files -------------------------------------------------------------------

def sky(tmp_path: Path, task: dict, name: str = "task.yaml") -> JobSpec:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(task))
    return load_spec(path)


@pytest.mark.parametrize("accelerators,gpu,alternatives", [
    ("A100:2", "A100:2", []),
    ("H100", "H100:1", []),
    ({"A100": 2, "H100": 1}, "A100:2", ["A100:2", "H100:1"]),     # any one of
    (["L4:1", "A100:1"], "L4:1", ["L4:1", "A100:1"]),               # ordered preference
])
def test_skypilot_accelerator_forms(tmp_path, accelerators, gpu, alternatives):
    for key in ("accelerators", "gpus"):  # `gpus` is its alias
        job = sky(tmp_path, {"run": "python train.py", "resources": {key: accelerators}})
        assert job.resources.gpu == gpu and job.resources.gpu_alternatives == alternatives


def test_a_skypilot_task_runs_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # SkyPilot reads a relative workdir from where it runs
    (tmp_path / "code").mkdir()
    job = sky(tmp_path, {
        "name": "llm-ft", "workdir": "code", "num_nodes": 2,
        "setup": "pip install -r requirements.txt", "run": "python train.py",
        "envs": {"MODEL": "llama", "STEPS": 100}, "secrets": {"HF_TOKEN": None},
        "resources": {"accelerators": "A100:8", "cpus": "8+", "memory": "32+",
                      "disk_size": 256, "use_spot": True,
                      "image_id": "docker:nvcr.io/nvidia/pytorch:24.05-py3"}})
    r = job.resources
    assert (job.name, job.workdir, job.env, job.secrets) == (
        "llm-ft", (tmp_path / "code").resolve(), {"MODEL": "llama", "STEPS": "100"},
        ["HF_TOKEN"])
    assert (r.gpu, r.cpus, r.mem, r.disk, r.spot, r.nodes, r.image) == (
        "A100:8", 8, "32G", "256G", True, 2, "nvcr.io/nvidia/pytorch:24.05-py3")
    assert sky(tmp_path, {"run": "x", "resources": {"cpus": 4, "memory": 16}},
               "my task.yaml").name == "my-task"  # no name: the file's


@pytest.mark.parametrize("task,says", [
    ({"run": "x", "file_mounts": {"/d": "r2://b"}}, "file_mounts./d: r2:// is not copied"),
    ({"run": "x", "resources": {"cloud": "aws"}}, "resources.cloud 'aws': rgt has no aws"),
    ({"run": "x", "resources": {"instance_type": "p3.2xlarge"}}, "resources.instance_type"),
    ({"run": "x", "resources": {"image_id": "ami-0868a20f5a3bf9702"}}, "docker:IMAGE"),
    ({"run": "x", "resources": {"accelerators": "A100:0"}}, "expected NAME or NAME:COUNT"),
    ({"run": "x", "resources": {"accelerators": "A100:2", "gpus": "A100:2"}}, "not both"),
    ({"run": "x", "resources": {"cpus": "lots"}}, "resources.cpus 'lots'"),
    ({"run": "x", "resources": {"disk_size": "big"}}, "resources.disk_size"),
    ({"run": "x", "envs": {"K": None}}, "envs K has no value in the file and is not set"),
    ({"run": "x", "secrets": {"HF_TOKEN": "hf_abc"}}, "secrets.HF_TOKEN has its value"),
    ({"envs": {"A": 1}}, "has no `run`"),
    ({"run": "x", "resources": [{"accelerators": "A100"}]}, "must be a mapping"),
])
def test_skypilot_fields_rgt_cannot_honour_are_refused_by_name(tmp_path, task, says):
    with pytest.raises(UserError) as err:
        sky(tmp_path, task)
    assert says in str(err.value) and str(tmp_path / "task.yaml") in str(err.value)


# -- render ----------------------------------------------------------------------------------

def test_render_prints_the_sbatch_script_without_any_box(tmp_path):
    (tmp_path / "job.yaml").write_text(
        "name: mlp\nrun: python train.py\nresources: {gpu: A100:1, mem: 8G}\n"
        "slurm: {partition: gpu, account: lab}\n")
    result = rgt("render", "job.yaml", "--profile", "slurm", "--durable-dir", "/scratch/me",
                 "--time", "2h", home=tmp_path / "home", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    script = result.stdout
    assert script.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --gres=gpu:1", "#SBATCH --mem=8G", "#SBATCH --time=02:00:00",
                 "#SBATCH --partition=gpu", "#SBATCH --account=lab", "--requeue"):
        assert line in script
    assert "/scratch/me/rgt/jobs/mlp/ckpt" in script and "python train.py" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert not (tmp_path / "home" / "rgt.db").exists()  # no box was registered


def test_render_refuses_what_slurm_cannot_honour_and_a_platform_with_nothing_to_render(
        tmp_path):
    (tmp_path / "job.yaml").write_text("name: j\nrun: x\nresources: {spot: true}\n")
    spot = rgt("render", "job.yaml", "--profile", "slurm", "--durable-dir", "/s",
               home=tmp_path / "h", cwd=tmp_path)
    assert spot.returncode == 2 and "slurm cannot honour resources.spot" in spot.stderr
    local = rgt("render", "job.yaml", "--profile", "generic-ssh", home=tmp_path / "h",
                cwd=tmp_path)
    assert local.returncode == 2 and "submits nothing to render" in local.stderr
    assert "Traceback" not in spot.stderr + local.stderr


DIGEST_IMAGE = "reg.example/train@sha256:" + "d" * 64


def test_render_prints_kubernetes_manifests_that_validate(tmp_path):
    import kubernetes_validate
    (tmp_path / "job.yaml").write_text(
        "name: mlp\nrun: python train.py\nresources: {gpu: A100:1, mem: 8G}\n"
        "kubernetes: {tolerations: [{key: spot, operator: Exists}], labels: {team: ml}}\n")
    no_image = rgt("render", "job.yaml", "--profile", "kubernetes", home=tmp_path / "h",
                   cwd=tmp_path)
    assert no_image.returncode == 2 and "name one pinned by digest" in no_image.stderr
    assert "--image on `rgt up` / `rgt render`" in no_image.stderr
    result = rgt("render", "job.yaml", "--profile", "kubernetes", "--image", DIGEST_IMAGE,
                 home=tmp_path / "h", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    claim, job = yaml.safe_load_all(result.stdout)  # the claim `rgt up` would make, the Job
    for document in (claim, job):
        kubernetes_validate.validate(document, "1.33.0", strict=True)
    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert pod["containers"][0]["image"] == DIGEST_IMAGE
    assert {"key": "spot", "operator": "Exists"} in pod["tolerations"]
    assert not (tmp_path / "h" / "rgt.db").exists()
    # the spec's own image satisfies it too, and wins over --image
    own = DIGEST_IMAGE.replace("d" * 64, "e" * 64)
    (tmp_path / "own.yaml").write_text(f"name: j\nrun: x\nkubernetes: {{image: '{own}'}}\n")
    for extra in ((), ("--image", DIGEST_IMAGE)):
        out = rgt("render", "own.yaml", "--profile", "kubernetes", *extra, home=tmp_path / "h",
                  cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert list(yaml.safe_load_all(out.stdout))[1]["spec"]["template"]["spec"][
            "containers"][0]["image"] == own


def test_a_platform_section_on_another_platform_is_refused_by_name(tmp_path):
    (tmp_path / "k.yaml").write_text(f"name: j\nrun: x\nkubernetes: {{image: '{DIGEST_IMAGE}'}}\n")
    (tmp_path / "s.yaml").write_text("name: j\nrun: x\nslurm: {partition: gpu}\n")
    for spec, profile, section in (("k.yaml", "slurm", "kubernetes"),
                                   ("s.yaml", "kubernetes", "slurm"),
                                   ("k.yaml", "generic-ssh", "kubernetes")):
        out = rgt("render", spec, "--profile", profile, "--durable-dir", "/s",
                  home=tmp_path / "h", cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert f"`{section}:` section applies only to a {section} box" in out.stderr
        assert "Traceback" not in out.stderr
    slurm = rgt("render", "s.yaml", "--profile", "slurm", "--durable-dir", "/s",
                "--image", DIGEST_IMAGE, home=tmp_path / "h", cwd=tmp_path)
    assert slurm.returncode == 2 and "--image does not apply to --profile slurm" in slurm.stderr


def test_rgt_run_refuses_another_platforms_section_before_pushing(tmp_path):
    home = tmp_path / "h"
    assert rgt("up", "here", "--profile", "local", home=home, cwd=tmp_path).returncode == 0
    (tmp_path / "k.yaml").write_text(f"name: j\nrun: x\nkubernetes: {{image: '{DIGEST_IMAGE}'}}\n")
    out = rgt("run", "here", "k.yaml", home=home, cwd=tmp_path)
    assert out.returncode == 2 and "`kubernetes:` section applies only to a kubernetes box; " \
        "local would ignore it" in out.stderr
    assert Store(home / "rgt.db").runs("here") == []
