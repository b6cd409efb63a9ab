"""Runs on the LAPTOP: drives rented hosts (Fabric, docker) and archives run directories (boto3). Layers,
bottom up: session/ → job/ → runtime/ → cluster/ and slurm/ → remote.py (make remote) → __main__ (flags and
dispatch only). Nothing in suite/ or reports/ imports this; `python -m provisioning` and the tests do."""
