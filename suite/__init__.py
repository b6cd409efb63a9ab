"""cardtime: a benchmark suite for rented multi-GPU nodes, rehearsed on a CPU first."""
