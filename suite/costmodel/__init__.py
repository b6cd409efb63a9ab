"""The cost model (α-β, sizing, buckets, tolerances, the memory formula): pure arithmetic, no torch. It
imports only suite.dtypes and suite.config (GptConfig's shape); anything may import it (stages, plan, facts,
reports). The network itself is suite/workloads/gpt.py.
"""
