"""Code that runs INSIDE torchrun workers: sweeps, the hand-written ring and tree, the model, TP/DP/ZeRO, the fault drill."""
