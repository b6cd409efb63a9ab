"""What the hardware is and can do: GPU tables (gpus), CUDA and driver lines (cuda_lines), host checks and probes
(gpu_host_checks, hostprobe), ring and link peaks (ring_peak). Tables and thin probes, no verdict rules.
Imported by facts, the stages, suite.cluster, suite.plan, reports and provisioning; it imports only suite.parsers.
"""
