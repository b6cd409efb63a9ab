"""The cost model (α-β, sizing, buckets, tolerances): pure arithmetic, no torch. The network itself is suite/workloads/gpt.py."""
