"""The nodes of a multi-node run and the agents that reach them: node lists (multinode, hostlist), ssh and
containers (node_rsh, node_container), Slurm and mpirun (slurm*, mpirun), one launch across them
(multilaunch), the nodes' addresses, ports, NICs and probes. Imported by the stages, StageContext, the
commands, suite.ingest, reports, provisioning; it builds on suite.launch. What stages run across nodes
is theirs: bandwidth's split within and across nodes (bandwidth/intra_node.py, nodesweep.py), the
nccl-tests binaries and the network NCCL took (stages/_nccl_tests.py, _nccl_net.py), the α-β fit
(stages/_alphabeta_fit.py), fault's node loss, dp's and zero's judgement (stages/_across_nodes.py).
"""
