"""How a stage's ranks start: torchrun command lines (torchrun), the rehearsal's fork launcher (forklaunch,
zygote, zygote_exec, warm_python), process trees (procs), launch rows (rows); across nodes:
suite.cluster.multilaunch. Imported by the runner, StageContext, the stages, suite.cluster and
suite.workloads; it imports no stage.
"""
