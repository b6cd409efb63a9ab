"""make remote HOSTS=a,b: the nodes (HOSTS=/HOSTFILE=, reaching the others, their agreement), the multi-node
driver, one image on every node. It imports provisioning.session, job and runtime. Only provisioning.remote
imports this (it hands a HOSTS= run to cluster.driver.cluster_main)."""
