"""Context parallelism in one launch: the golden comparison of ring attention and Ulysses at every CP
degree (causal and not, forward and backward, and the deliberate mistakes asked for), torch's own
context_parallel() on GPUs, then the timings.

    ctx.torchrun("suite.stages.cp.worker", ["--cp", json_of(cfg_cp), "--degrees", "2,4"], tag="cp")

For each degree d the ranks form world/d groups of d consecutive ranks; every group runs the check on
the same seeded input, and each error is the maximum over all ranks. The forward's bytes sent per rank
are counted in the golden run (non-causal) for the stage to compare with the formula. Timings run on
ranks 0..d−1 while the others wait at a barrier.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist

from suite.results import Row
from suite.stages.cp.golden import AttentionShape, cp_errors, full_inputs, reference
from suite.stages.cp.ring_attention import MISTAKES as RING_MISTAKES
from suite.stages.cp.ring_attention import CommLedger
from suite.stages.cp.timing import layer_times, overlap_times
from suite.stages.cp.ulysses import MISTAKES as ULYSSES_MISTAKES
from suite.workloads.golden import CHECK_DTYPE, group_max
from suite.workloads.gpt import torch_dtype
from suite.workloads.worker import Worker, worker_session
from suite.workloads.worker_cli import degrees_from, log, mistakes_from

STAGE = "cp"
ALGOS = ("ring", "ulysses")
MISTAKE_ALGO = {**{m: "ring" for m in RING_MISTAKES}, **{m: "ulysses" for m in ULYSSES_MISTAKES}}
MASKS = {"full": False, "causal": True}


def golden_rows(w: Worker, cfg: dict, d: int, group, mistakes: list[str]) -> list[Row]:
    shape = AttentionShape(cfg["batch"], cfg["heads"], cfg["golden_seq_len"], cfg["head_dim"])
    inputs = full_inputs(shape, cfg["seed"], w.device)
    rows = []
    common = dict(stage=STAGE, unit="abs", world=d, dtype=CHECK_DTYPE, source="hand", count=shape.seq_len)
    for mask, causal in MASKS.items():
        ref = reference(inputs, causal)
        for algo in ALGOS:
            ledger = CommLedger()
            errors = cp_errors(inputs, ref, group, algo, causal, ledger=ledger)
            rows += [
                Row(case=f"{mask}.{q}", metric="max_abs_error", value=group_max(v), algo=algo, **common)
                for q, v in errors.items()
            ]
            if not causal:
                rows.append(
                    Row(
                        stage=STAGE,
                        case="comm.forward",
                        metric="bytes_sent",
                        value=group_max(ledger.bytes_sent),
                        unit="bytes",
                        algo=algo,
                        world=d,
                        dtype=CHECK_DTYPE,
                        source="hand",
                        count=shape.seq_len,
                    )
                )
        for m in mistakes:
            errors = cp_errors(inputs, ref, group, MISTAKE_ALGO[m], causal, mistake=m)
            rows += [
                Row(
                    case=f"mistake.{m}.{mask}.{q}",
                    metric="max_abs_error",
                    value=group_max(v),
                    algo=MISTAKE_ALGO[m],
                    **common,
                )
                for q, v in errors.items()
            ]
        if w.device.type == "cuda":
            rows += torch_cp_rows(w, inputs, d, mask, causal, common)
    return rows


def torch_cp_rows(w: Worker, inputs, d: int, mask: str, causal: bool, common: dict) -> list[Row]:
    """torch's context_parallel() against the same reference; a failure is a row saying so (judged fail)."""
    from suite.stages.cp.torch_cp import QUANTITIES as TORCH_QUANTITIES
    from suite.stages.cp.torch_cp import torch_cp_errors
    from suite.workloads.parallel_plans import tp_submesh

    try:
        errors = torch_cp_errors(inputs, tp_submesh(w.device.type, w.world, d), causal)
    except Exception as error:  # noqa: BLE001 - reported as a failed comparison with its message
        return [
            Row(
                case=f"{mask}.{q}",
                metric="max_abs_error",
                value=float("nan"),
                algo="torch_cp",
                text=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300],
                **common,
            )
            for q in TORCH_QUANTITIES
        ]
    return [
        Row(case=f"{mask}.{q}", metric="max_abs_error", value=group_max(v), algo="torch_cp", **common)
        for q, v in errors.items()
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cp", required=True, help="the profile's cp section as JSON")
    p.add_argument("--degrees", default="2,4")
    p.add_argument(
        "--mistakes", default="", help="comma-separated deliberate mistakes to check as well (tests)"
    )
    args = p.parse_args()
    cfg = json.loads(args.cp)
    degrees = degrees_from(args.degrees)
    mistakes = mistakes_from(args)
    unknown = [m for m in mistakes if m not in MISTAKE_ALGO]
    if unknown:
        raise SystemExit(f"unknown cp mistakes {unknown}: choose from {', '.join(MISTAKE_ALGO)}")
    t0 = time.monotonic()
    with worker_session() as w:
        torch.set_float32_matmul_precision("highest")  # the golden check in true float32 (no TF32)
        groups = {d: dist.new_subgroups(group_size=d)[0] for d in degrees}
        log(t0, "groups up")
        for d, group in groups.items():
            rows = golden_rows(w, cfg, d, group, mistakes)
            if w.rank == 0:
                w.emit(rows)
            errors = [
                r.value for r in rows if r.metric == "max_abs_error" and not r.case.startswith("mistake.")
            ]
            log(t0, f"CP={d} golden: worst {max(errors, default=float('nan')):.3g}")
        dtype = torch_dtype(cfg["dtype"])
        for d, group in groups.items():
            for i, seq_len in enumerate(cfg["seq_lens"]):
                w.progress(f"CP={d} timing S={seq_len}", done=i, of=len(cfg["seq_lens"]))
                if w.rank < d:
                    shape = AttentionShape(cfg["batch"], cfg["heads"], seq_len, cfg["head_dim"])
                    rows = layer_times(w, group, d, shape, cfg["reps"], dtype)
                    rows += overlap_times(w, group, d, shape, cfg["reps"], dtype)
                    if w.rank == 0:
                        w.emit(rows)
                dist.barrier()
            log(t0, f"CP={d} timed")


if __name__ == "__main__":
    main()
