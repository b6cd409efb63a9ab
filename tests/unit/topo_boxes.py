"""Facts as the topology stage publishes them, built from the real `nvidia-smi topo -m` captures in
tests/data/topo."""

from __future__ import annotations

from pathlib import Path

from suite.config import NCCL_GPU
from suite.parsers.topo import parse
from suite.stages.topology.smi import matrix_facts

TOPO = Path(__file__).resolve().parent.parent / "data" / "topo"


def box_facts(stem: str, model: str, per_gpu: dict | None = None, keep: list[str] | None = None) -> dict:
    """`{"profile", "topology"}` facts for a capture, with every GPU named `model` as `nvidia-smi -L` would.

    per_gpu: the PCIe generation and width per GPU, as `nvidia-smi -q` gives them. keep: a GPU subset of
    the real matrix, renumbered GPU0… as a box (or VM) holding only those GPUs shows it."""
    t = parse((TOPO / f"{stem}.txt").read_text(encoding="utf-8"))
    if keep is not None:
        names = {old: f"GPU{i}" for i, old in enumerate(keep)}
        t.links = {f"{names[a]}-{names[b]}": t.link(a, b) for i, a in enumerate(keep) for b in keep[i + 1 :]}
        t.gpus = list(names.values())
    topo = {"gpus": [model] * len(t.gpus), "gpu_model": model, **matrix_facts(t, model)}
    if per_gpu is not None:
        topo["pcie"] = {"per_gpu": per_gpu}
    return {"profile": NCCL_GPU.to_dict(), "topology": topo}
