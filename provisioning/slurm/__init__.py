"""make slurm SLURM_HOST=…: a Slurm cluster driven through its login node: the probe, the venv, sbatch, the
follow, the fetch. It imports provisioning.session, job and runtime.hostruntime. Only provisioning.__main__
imports this."""
