"""A SkyPilot pipeline on a real (private, one-node) Slurm cluster (issue 32): `rgt run` submits
its stages as jobs chained by afterok, and the second stage finds what the first wrote by the
first's task id, line 1 of SKYPILOT_TASK_IDS, as SkyPilot's train/eval pipelines do."""

from __future__ import annotations

from pathlib import Path

from cli import rgt

DATA = Path(__file__).parent.parent / "data" / "skypilot"


def test_a_skypilot_pipeline_runs_as_chained_slurm_jobs(slurm_cluster, slurm_box, slurm_env,
                                                         tmp_path, monkeypatch):
    store, box = slurm_box
    shared = tmp_path / "shared"
    path = tmp_path / "pipeline.yaml"
    path.write_text((DATA / "pipeline-ids.yaml").read_text()
                    .replace("/tmp/rgt-pipeline-test", str(shared)))
    monkeypatch.chdir(tmp_path)
    dry = rgt("run", "hpc", str(path), "--dry-run", env=slurm_env)
    assert dry.returncode == 0, dry.stderr
    assert "# stage 2 of 2 of pipeline train-eval: eval; submitted to start once stage 1" \
        in dry.stdout, dry.stdout
    result = rgt("run", "hpc", str(path), env=slurm_env)
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = result.stdout.strip().splitlines()[-2:]
    assert first.startswith("train-") and second.startswith("eval-"), result.stdout
    job = store.run("hpc", first).spec["platform_run"]["job_id"]
    script = Path(store.run("hpc", second).spec["platform_run"]["script"]).read_text()
    assert f"#SBATCH --dependency=afterok:{job}" in script
    done = rgt("watch", "hpc", second, "--until-done", "--timeout", "90", env=slurm_env,
               timeout=150)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (shared / f"eval-{second}.txt").read_text() == \
        f"eval read: weights of {first} ids=2\n"
