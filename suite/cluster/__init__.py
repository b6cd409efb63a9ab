"""The nodes of a multi-node run and the agents that reach them: node lists (multinode), ssh and containers
(node_rsh, node_container), Slurm and mpirun (slurm, slurm_job, mpirun), one launch across them (multilaunch),
probes, sweeps. Imported by the stages, StageContext, the commands, suite.ingest, reports, provisioning; it
builds on suite.launch.

The stages' multi-node parts live here too, each the one place a stage goes for its work across nodes:
bandwidth_nodes (bandwidth; over node_pairs, intra_node, intra_judges), across_nodes (dp, zero), node_loss
(fault), node_nics (topology); with node_addrs, node_ports (rendezvous addresses and the connection
preflight), slurm_pyxis, nccl_net (which network NCCL took), and nccl_tests, alphabeta_fit (the nccl-tests
binaries and the α-β fit, on one node or several).
"""
