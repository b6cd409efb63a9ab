"""Sampler rows from a real `nvidia-smi -q -d PERFORMANCE` capture (one moment, every GPU): the throttle
reasons the sampler's verdicts and figures read, at t = 0, for tests that start from such a capture."""

from __future__ import annotations

from suite.parsers.smi_sampling import parse_performance
from suite.results import Row


def rows_from_performance(text: str, stage: str) -> list[Row]:
    return [
        Row(
            stage=stage,
            case="sampler",
            metric="reasons",
            value=float(g["mask"]),
            unit="mask",
            rank=g["index"],
            t=0.0,
            source="nvidia-smi",
            text=g["bus_id"],
        )
        for g in parse_performance(text)
    ]
