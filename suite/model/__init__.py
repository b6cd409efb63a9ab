"""The α-β cost model and link peaks: pure arithmetic, no torch."""
