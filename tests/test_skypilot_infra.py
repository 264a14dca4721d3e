"""`--infra` and `--instance-type` on the commands that read a SkyPilot task (issue 32): SkyPilot's
own overrides (`sky launch --infra k8s task.yaml`, `-t none`), so that a task pinned to a cloud
rgt has no platform for runs on the box the user names, with one note saying what was
replaced; a pinned instance type the box's platform lacks is refused as SkyPilot refuses it,
naming the override that drops it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from boxkit import Rgt
from cli import rgt

from rgt import skycloud
from rgt.errors import UserError
from rgt.skypipeline import load_pipeline
from rgt.spec import load_spec

DATA = Path(__file__).parent / "data" / "skypilot"


def on(profile: str, infra: str | None = "box", instance_type: str | None = None):
    """The overrides of `rgt run BOX … --infra INFRA` on a box of `profile` (its real facts)."""
    return skycloud.overrides(infra, instance_type, "box b", profile)


def write(tmp_path: Path, task: dict, name: str = "task.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(task))
    return path


def test_a_pinned_task_runs_on_the_box_named_with_infra_box(tmp_path, monkeypatch):
    """End to end on the local box: refused without the override (one line, exit 2, naming
    it), run with it, the override said once."""
    monkeypatch.chdir(tmp_path)
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    task = str(DATA / "pinned-aws.yaml")
    refused = cli("run", "box", task, "-d")
    assert refused.returncode == 2, refused.stderr
    assert "rgt has no aws platform" in refused.stderr and "add `--infra box`" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    started = cli.ok("run", "box", task, "--infra", "box", "-d")
    said = [line for line in started.stderr.splitlines() if "--infra box overrides" in line]
    assert said == ["note: pinned-aws.yaml: --infra box overrides the task's resources.infra "
                    "'aws/us-east-1', any_of[0].infra 'gcp', any_of[1].infra 'azure': it runs "
                    "on box box (local), as `sky launch --infra ssh` runs it"], started.stderr
    run_id = started.stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert "pinned ran on rank 0" in cli.ok("logs", "box", run_id).stdout


def test_the_override_replaces_every_candidates_placement_as_skypilots_does(capfd):
    """SkyPilot overrides each candidate (Task.set_resources_override): the aws candidate of
    any-of.yaml, left out unchanged, is kept under --infra box; the region goes with it."""
    unchanged = load_spec(DATA / "any-of.yaml").resources
    assert unchanged.gpu_alternatives == ["A100:8", "A100-80GB:8"]
    r = load_spec(DATA / "any-of.yaml", overrides=on("kubernetes")).resources
    assert (r.gpu, r.gpu_alternatives, r.region) == ("H100:8", ["H100:8", "A100:8",
                                                               "A100-80GB:8"], None)
    assert "any_of[2].infra '*/us-east-1'" in capfd.readouterr().err


def test_an_image_keeps_the_meaning_of_the_infra_the_file_named(tmp_path):
    """On infra k8s a bare image_id is a container image; moved to another box it still is."""
    path = write(tmp_path, {"run": "x", "resources": {"infra": "k8s", "image_id": "ghcr.io/o/i:1"}})
    assert load_spec(path, overrides=on("generic-ssh")).resources.image == "ghcr.io/o/i:1"


def test_instance_types_under_the_override(tmp_path, capfd):
    """Kept where the box's platform has it; another's refused naming --instance-type none,
    which drops it: the GPUs then are the accelerators, or what rgt reads the type held."""
    k8s = load_spec(DATA / "cloud-fields.yaml", overrides=on("kubernetes")).resources
    assert (k8s.gpu, k8s.cpus) == ("H100:1", 4)
    with pytest.raises(UserError, match=r"'4CPU--16GB--H100:1' is a kubernetes instance type, "
                                        r"which box b \(slurm\) does not have .*add "
                                        r"`--instance-type none` to drop it"):
        load_spec(DATA / "cloud-fields.yaml", overrides=on("slurm"))
    lam = write(tmp_path, {"run": "x", "resources": {"infra": "lambda",
                                                     "instance_type": "gpu_8x_a100_80gb_sxm4"}})
    assert load_spec(lam, overrides=on("slurm", instance_type="none")).resources.gpu == \
        "A100-80GB:8"
    assert "the GPUs it held, A100-80GB:8, are the request" in capfd.readouterr().err
    aws = write(tmp_path, {"run": "x", "resources": {"infra": "aws", "instance_type": "p3.2xlarge",
                                                     "accelerators": "V100:1"}}, "aws.yaml")
    assert load_spec(aws, overrides=on("slurm", instance_type="none")).resources.gpu == "V100:1"


@pytest.mark.parametrize("task,profile,infra,instance_type,says", [
    ({"infra": "aws"}, "local", "k8s", None,
     "--infra k8s names kubernetes, but box b is a local box: `--infra box`"),
    ({"infra": "aws"}, "kubernetes", "gcp/us-central1", None,
     "--infra gcp/us-central1: rgt has no gcp platform (the nearest rgt profile is kubernetes "
     "(GKE)"),
    ({"infra": "aws"}, "runpod", "runpod/US/us-1a", None, "a zone has no rgt equivalent"),
    ({"infra": "aws"}, "generic-ssh", "*/us-east-1", None, "a region means nothing on box b"),
    ({"infra": "aws", "instance_type": "p4d.24xlarge"}, "kubernetes", "box", "none",
     "--instance-type none drops the task's resources.instance_type 'p4d.24xlarge', and the "
     "task names no accelerators: the GPUs it asks for cannot be told without it"),
    ({"instance_type": "gpu_1x_a100"}, "lambda", "box", " ", "--instance-type is empty"),
    ({"instance_type": "p4d.24xlarge", "accelerators": "A100:8", "any_of": 3}, "kubernetes",
     "box", "none",
     "resources.any_of must be a list of resource mappings"),  # (not a TypeError on the way)
])
def test_what_the_override_cannot_mean_is_named(tmp_path, task, profile, infra, instance_type,
                                                says):
    path = write(tmp_path, {"run": "x", "resources": task})
    with pytest.raises(UserError) as err:
        load_spec(path, overrides=on(profile, infra, instance_type))
    assert says in str(err.value), str(err.value)


def test_every_stage_of_a_pipeline_and_rgt_render_take_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump_all([{"name": "a", "run": "x", "resources": {"infra": "aws"}},
                                        {"name": "b", "run": "y", "resources": {
                                            "cloud": "gcp", "accelerators": "A100:1"}}]))
    stages = load_pipeline(path, overrides=on("slurm")).stages
    assert [s.resources.gpu for s in stages] == [None, "A100:1"]
    result = rgt("render", str(DATA / "pinned-aws.yaml"), "--profile", "slurm",
                 "--durable-dir", "/s", "--infra", "slurm", env={"RGT_HOME": str(tmp_path / "h")})
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --job-name=pinned" in result.stdout
    assert "as `sky launch --infra slurm` runs it" in result.stderr


def test_an_rgt_spec_has_nothing_to_override_and_says_so(tmp_path, capfd):
    path = write(tmp_path, {"name": "j", "run": "x", "resources": {"gpu": "A100:1"}})
    assert load_spec(path, overrides=on("slurm")).resources.gpu == "A100:1"
    assert "an rgt spec runs on the box you name as it is" in capfd.readouterr().err


def test_an_instance_type_under_infra_any_is_read_as_under_no_infra(tmp_path):
    """SkyPilot's '*' is any infra: not a cloud named '*' ("a * instance type")."""
    path = write(tmp_path, {"run": "x", "resources": {"infra": "*", "instance_type": "foo"}})
    with pytest.raises(UserError, match="'foo' is not a name rgt can read for any platform"):
        load_spec(path)
