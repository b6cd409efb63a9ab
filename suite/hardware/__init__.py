"""What the hardware is and can do: GPU tables, CUDA lines, host probes, link peaks, card fit, load sampling.
Tables and thin probes, no verdict rules; it imports suite.parsers and suite.costmodel only.
Imported by facts, the stages, suite.cluster, suite.plan, reports and provisioning.

gpus, cuda_lines, gpu_host_checks, hostprobe, ring_peak; card_fit (the headroom and nccl-tests' buffers) and
stage_fit (pp's, cp's, ep's and the scaling stages' sizes on the card); gpu_sampler (clocks and power under
load); fabric_counters (NVLink/IB error counters before and after).
"""
