"""The parts of the Slurm platform (`platform.py` here), each small enough to read.

    options     the job's resources and the spec's `slurm:` section as #SBATCH words, and
                the values they take (walltime, sizes, the signal lead, arrays, dependencies)
    script      the batch script, whole and in one place: the step (srun, torchrun across
                nodes), the requeue-safe preamble and epilogue, a sweep's job array
    accounting  what Slurm says about a job (scontrol, sacct, the job completion log) read
                into the state `rgt watch` shows
    audit       partitions, GPUs, limits and shared filesystems, for `rgt audit` (SLURM5)
    platform    SlurmPlatform: sbatch, state, cancel and release (scancel) on the login node

Nothing here needs a Slurm library: rgt runs Slurm's own commands through the box's transport.
"""
