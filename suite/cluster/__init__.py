"""The nodes of a multi-node run and the agents that reach them: node lists (multinode), ssh and containers
(node_rsh, node_container), Slurm and mpirun (slurm, slurm_job, mpirun), one launch across them (multilaunch),
probes, sweeps. Imported by the stages, StageContext, the commands, suite.ingest, reports, provisioning; it
builds on suite.launch.

Beside the agents, what more than one caller needs to run on several nodes: node_addrs and node_ports
(rendezvous addresses, the connection preflight), node_nics (topology, the node probe), nccl_tests and
nccl_net (the nccl-tests binaries, which network NCCL took), alphabeta_fit (bandwidth, crossover, intra_node),
intra_node and nodesweep (the split within and across nodes that bandwidth judges). A stage's own multi-node
half lives in its folder (bandwidth/nodes.py, fault/node_loss.py); dp's and zero's shared judgement across
nodes is suite/stages/_across_nodes.py.
"""
