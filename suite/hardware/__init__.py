"""What the hardware is and can do: GPU tables (gpus), CUDA and driver lines (cuda_lines), host checks and probes
(gpu_host_checks, hostprobe), ring and link peaks (ring_peak), what fits on the card (card_fit, stage_fit).
Imported by facts, the stages, suite.cluster, suite.plan, reports and provisioning; it imports suite.parsers, costmodel.
card_fit holds the headroom and nccl-tests' buffers; stage_fit pp's, cp's, ep's and the scaling stages' sizes.
No verdict rules.
"""
