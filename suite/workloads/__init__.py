"""Code that runs INSIDE torchrun workers: sweeps, the hand-written ring and tree, the model, TP/DP/ZeRO, the fault drill."""

import os as _os

# Who launched this worker (torchrun's agent), read before the worker spends seconds importing torch:
# worker_session compares it after arming PR_SET_PDEATHSIG, to notice a launcher that died meanwhile.
LAUNCHER_PID = _os.getppid()
# When the process that stands in for this worker was spawned, where it is not this process itself (the warm
# launcher's suite/warm_python.py, whose fork this worker is): the worker's start as its launcher saw it.
SPAWNED_AT: float | None = None
