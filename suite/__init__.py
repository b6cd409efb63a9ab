"""cardtime: a benchmark suite for rented multi-GPU nodes, rehearsed on a CPU first. At the top: the runner,
the run directory, config and sections, facts, verdicts; below: stages, launch, cluster, hardware, workloads,
parsers, plan. Imported by reports (a run's data) and provisioning (the laptop's side); the suite imports
neither.
"""
