"""What the stages run in: RUNTIME=docker's images (engine, build, push, the suite's container),
RUNTIME=host's venv, and the GPU check in either. It imports provisioning.session, job.codesync and
provisioning/cuda_check_host.py. provisioning.cluster, slurm, remote and __main__ import this."""
