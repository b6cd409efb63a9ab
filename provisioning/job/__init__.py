"""The job on the host and the run's way home: code shipped, run lock, detached job, follow, fetch, report,
archive. It imports provisioning.session only. provisioning.runtime (codesync's checkout), cluster, slurm,
remote and __main__ import this."""
