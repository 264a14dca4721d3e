"""SkyPilot pipelines and per-cloud fields (issue 32): a multi-document file read as SkyPilot
reads it and run as chained stages where the box's scheduler chains runs (the real Slurm run
is tests/slurm/test_slurm_skypilot_pipeline.py); instance_type and config mapped where rgt has
the platform, refused by name where it has not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from boxkit import Rgt

from rgt.errors import UserError
from rgt.skypipeline import load_pipeline
from rgt.spec import load_spec

DATA = Path(__file__).parent / "data" / "skypilot"


def write(tmp_path: Path, docs: list, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_a_pipeline_reads_as_skypilot_reads_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pipeline = load_pipeline(DATA / "pipeline.yaml")
    assert pipeline.name == "prepare-then-train"
    assert [s.name for s in pipeline.stages] == ["prepare", "train"]
    assert pipeline.stages[1].resources.gpu == "A100:1"
    assert {s.dialect for s in pipeline.stages} == {"skypilot"}
    # no header: every document is a task; unnamed ones are <pipeline>-<index>, as SkyPilot's
    unnamed = load_pipeline(write(tmp_path, [{"run": "a"}, {"run": "b", "num_nodes": 2}]))
    assert [s.name for s in unnamed.stages] == ["p-0", "p-1"]
    assert unnamed.stages[1].resources.nodes == 2
    one = load_pipeline(write(tmp_path, [{"name": "solo"}, {"name": "t", "run": "x"}]))
    assert [s.name for s in one.stages] == ["solo"]  # one task takes the pipeline's name
    for docs, says in (
            ([{"name": "g", "execution": "parallel"}, {"run": "a"}, {"run": "b"}],
             "is a SkyPilot job group of 2 tasks that run at the same time"),
            ([{"name": "a", "run": "x"}, {"name": "a", "run": "y"}],
             "stage 2 (a): another stage has this name"),
            ([{"name": "p"}, {"run": "x", "resources": {"infra": "aws"}}],
             "stage 1 (p): resources.infra 'aws': rgt has no aws platform")):
        with pytest.raises(UserError) as err:
            load_pipeline(write(tmp_path, docs))
        assert says in str(err.value), str(err.value)


def test_a_one_task_pipeline_runs_end_to_end_on_a_local_box(tmp_path, monkeypatch):
    """A header and one task needs no chaining: it runs on any box. Its mounts land where
    SkyPilot puts them (a relative destination and ~/sky_workdir/… are the workdir copy), a
    secret from this shell reaches the job, SKYPILOT_TASK_IDS is its own id."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "lr.txt").write_text("0.25\n")
    (project / "data" / "rows.csv").write_text("a\nb\nc\n")
    shutil.copy(DATA / "pipeline-one.yaml", project / "pipeline.yaml")
    monkeypatch.chdir(project)
    monkeypatch.setenv("TOKEN", "from-the-shell")
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", "pipeline.yaml").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    log = cli.ok("logs", "box", run_id).stdout
    assert "lr=0.25 rows=3 token=from-the-shell" in log, log
    assert f"ids=[{run_id}] own={run_id}" in log, log
    assert run_id.startswith("one-stage-")


def test_instance_types_map_to_what_they_hold_where_rgt_has_the_platform(tmp_path, capfd):
    spec = load_spec(DATA / "cloud-fields.yaml")
    r = spec.resources
    assert (r.gpu, r.cpus, r.mem) == ("H100:1", 4, "16G")
    k = spec.kubernetes
    assert k.labels == {"team": "vision", "project": "rgt"} and k.priority_class == "high"
    assert k.node_selector == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert k.tolerations[0].key == "nvidia.com/gpu"
    assert "instance_type '4CPU--16GB--H100:1' is taken as what it holds on kubernetes" \
        in capfd.readouterr().err
    for given, infra, held in (
            ("gpu_8x_a100_80gb_sxm4", "lambda", ("A100-80GB:8", None, None)),
            ("gpu_1x_h100_pcie", None, ("H100:1", None, None)),
            ("2x_RTX4090_COMMUNITY", "runpod", ("RTX4090:2", None, None)),
            ("1x-RTX_4090-16-65536", "vast", ("RTX4090:1", 16, "64G"))):
        task = {"run": "x", "resources": {"instance_type": given,
                                          **({"infra": infra} if infra else {})}}
        path = tmp_path / "t.yaml"
        path.write_text(yaml.safe_dump(task))
        r = load_spec(path).resources
        assert (r.gpu, r.cpus, r.mem) == held, given
    # what the task itself asks for wins over what the type holds
    path.write_text(yaml.safe_dump({"run": "x", "resources": {
        "instance_type": "gpu_1x_a10", "accelerators": "A10:1", "cpus": 2}}))
    assert (load_spec(path).resources.gpu, load_spec(path).resources.cpus) == ("A10:1", 2)


@pytest.mark.parametrize("resources,says", [
    ({"instance_type": "m5.8xlarge"}, "'m5.8xlarge' is an aws instance type: rgt has no aws "
                                      "platform; the nearest rgt profile is kubernetes (EKS)"),
    ({"instance_type": "a3-highgpu-8g"}, "is a gcp instance type"),
    ({"instance_type": "VM.GPU.A10.1"}, "is an oci instance type: rgt has no oci platform; "
                                        "the nearest rgt profile is generic-ssh"),
    ({"instance_type": "gpu_1x_h100", "infra": "kubernetes"},
     "is not a name rgt can read for kubernetes"),
])
def test_instance_types_of_clouds_rgt_lacks_are_refused_naming_the_nearest(
        tmp_path, resources, says):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"run": "x", "resources": resources}))
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert says in str(err.value), str(err.value)


@pytest.mark.parametrize("config,says", [
    ({"gcp": {"managed_instance_group": {"run_duration": 3600}}},
     "`config.gcp.managed_instance_group.run_duration` has no rgt equivalent: rgt uses the box "
     "as it is; gcp's provisioning settings belong to `rgt up`"),
    ({"kubernetes": {"pod_config": {"spec": {"volumes": [{"name": "shm"}]}}}},
     "`config.kubernetes.pod_config.spec.volumes[0].name` has no rgt equivalent"),
    ({"jobs": {"controller": {"resources": {"cpus": 2}}}},
     "SkyPilot's controllers have no rgt counterpart"),
])
def test_config_rgt_has_nothing_for_is_refused_by_path(tmp_path, config, says):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"run": "x", "config": config}))
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert says in str(err.value), str(err.value)


def test_a_kubernetes_section_from_config_is_refused_by_another_box(tmp_path):
    """config.kubernetes becomes the spec's kubernetes: section: a local box refuses it by
    name rather than dropping the pod settings silently."""
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    result = cli("run", "box", str(DATA / "cloud-fields.yaml"), "-d", "--dry-run")
    assert result.returncode == 2 and "kubernetes" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_pipeline_is_refused_where_jobs_cannot_wait_for_one_another(tmp_path, monkeypatch):
    """Kubernetes has a scheduler (sweeps run as one Indexed Job) but its Jobs cannot wait for
    one another: said before stage 1 is submitted, not after it."""
    from rgt.lifecycle.pipeline import refuse_unchainable
    from rgt.store import Box, Store

    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "state.db")
    store.add_box(Box(name="k", profile="kubernetes", connection={"context": "c"},
                      data_dir="/d", durable_dir="/d", rate=None, state="up", created=0.0))
    pipeline = load_pipeline(DATA / "pipeline.yaml")
    with pytest.raises(UserError) as err:
        refuse_unchainable(store, "k", pipeline, DATA / "pipeline.yaml", None)
    assert "is a SkyPilot pipeline of 2 tasks, each started once the one before succeeded: " \
           "kubernetes cannot chain them (--after: Kubernetes Jobs cannot wait" in str(err.value)
    one = load_pipeline(write(tmp_path, [{"name": "solo"}, {"run": "x"}]))
    refuse_unchainable(store, "k", one, tmp_path / "p.yaml", None)  # nothing to chain
