"""What the hardware is and can do: GPU tables (gpus), CUDA and driver lines (cuda_lines), host checks and probes
(gpu_host_checks, hostprobe), ring and link peaks (ring_peak), what fits on the card (card_fit: the headroom and
nccl-tests; stage_fit: pp, cp, ep and the scaling stages' model). No verdict rules.
Imported by facts, the stages, suite.cluster, suite.plan, reports and provisioning; it imports suite.parsers, costmodel.
"""
