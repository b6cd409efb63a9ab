"""Runs on the LAPTOP: drives rented hosts (Fabric, docker), archives run directories (boto3). Bottom up:
session/ → job/ → runtime/ → cluster/, slurm/ → group.py, drive.py (the one driver) → remote.py → __main__.
Nothing in suite/ or reports/ imports this; `python -m provisioning` and the tests do."""
