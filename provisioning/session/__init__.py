"""The SSH session to one host and what it tells: HOST parsing, the connection, quoting, the preflight probe,
make remote's options and its step lines. The bottom layer: it imports nothing else of provisioning's.
Every provisioning package above it may import this: job, runtime, cluster, slurm, remote, __main__."""
