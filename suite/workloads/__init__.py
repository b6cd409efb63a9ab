"""Code that runs INSIDE torchrun workers: sweeps, the hand-written ring and tree, the model, TP/DP/ZeRO, the
fault drill. Each module is started as `-m suite.workloads.<name>` by suite.launch; it imports torch, the cost
model, hardware. Imported (for its constants and references) by the stages, suite.cluster and suite.launch.
"""

import os as _os

# Who launched this worker (torchrun's agent), read before the worker spends seconds importing torch:
# worker_session compares it after arming PR_SET_PDEATHSIG, to notice a launcher that died meanwhile.
LAUNCHER_PID = _os.getppid()
# When the process that stands in for this worker was spawned, where it is not this process itself (the warm
# launcher's suite/launch/warm_python.py, whose fork this worker is): the worker's start as its launcher saw
# it.
SPAWNED_AT: float | None = None
