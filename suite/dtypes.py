"""Bytes per element of the dtypes a profile may name (torch-free: the plan and the cost model use it too)."""

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}
