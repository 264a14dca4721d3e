"""Where one run lives on its box, where its job keeps checkpoints, and what it sees in its
environment: the same for every platform, so a run moves between them unchanged.

Checkpoints belong to the job, not to one run: every run of a job sees the same
`$RGT_CKPT_DIR` (its checkpoint home on the durable tier), so launching it again — after a
crash, a preemption, on another box — resumes from the newest checkpoint there.
"""

from __future__ import annotations

from dataclasses import dataclass

from rgt.profiles import Profile
from rgt.remote import node_env
from rgt.spec import JobSpec
from rgt.store import Box


@dataclass
class Layout:
    """Where one run lives on the box (DESIGN: everything of a run under <DATA_DIR>/rgt/<id>)
    and where its job keeps checkpoints (`ckpt`, shared by every run of the job)."""

    run_dir: str
    durable_run_dir: str
    ckpt: str

    @classmethod
    def of(cls, box: Box, run_id: str, spec: JobSpec) -> Layout:
        return cls(f"{box.data_dir}/rgt/{run_id}", f"{box.durable_dir}/rgt/{run_id}",
                   checkpoint_home(box, spec))

    @property
    def run_id(self) -> str:
        return self.run_dir.rsplit("/", 1)[-1]

    @property
    def code(self) -> str:
        return f"{self.run_dir}/code"

    @property
    def out(self) -> str:
        return f"{self.durable_run_dir}/out"

    @property
    def lib(self) -> str:
        """The `rgt.ckpt` shipped with the code (`rgt.lifecycle.ship`), first on PYTHONPATH."""
        return f"{self.run_dir}/lib"


def checkpoint_home(box: Box, spec: JobSpec) -> str:
    """The job's checkpoint home on `box`: the spec's absolute path, else one directory per
    job name on the durable tier (an object-store URL is a mirror; the home stays here)."""
    if spec.checkpoint_dir and spec.checkpoint_dir.startswith("/"):
        return spec.checkpoint_dir.rstrip("/") or "/"
    return f"{box.durable_dir}/rgt/jobs/{spec.name}/ckpt"


def job_environment(spec: JobSpec, profile: Profile, layout: Layout) -> dict:
    env = dict(profile.network.mirror_env)
    if "HF_HOME" in profile.overrides and "{" not in profile.overrides["HF_HOME"]:
        env["HF_HOME"] = profile.overrides["HF_HOME"].split()[0]
    # where the job's nodes are, under rgt's, SkyPilot's and dstack's names (remote.node_env);
    # these are one machine's values: Slurm's batch script and steps set them again at run time
    env.update(node_env.one_machine(gpus=spec.resources.gpu_count, run_id=layout.run_id,
                                    job=spec.name, platform=profile.facts.platform,
                                    region=spec.resources.region))
    env.update(spec.env)
    env.update({"RGT_RUN_ID": layout.run_id, "RGT_RUN_DIR": layout.run_dir,
                "RGT_CKPT_DIR": layout.ckpt, "RGT_DURABLE_DIR": layout.durable_run_dir,
                "RGT_OUT_DIR": layout.out})
    if spec.checkpoint_url:
        env["RGT_CKPT_URL"] = spec.checkpoint_url
    return env
