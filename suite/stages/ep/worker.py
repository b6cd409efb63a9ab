"""Expert parallelism in one launch: the golden comparison of the expert-parallel mixture of experts
with the single-process one, for a uniform and a skewed router (and the deliberate mistakes asked for),
the load each saw, then the timings.

    ctx.torchrun("suite.stages.ep.worker", ["--ep", json_of(cfg_ep)], tag="ep")

EP = every rank of the launch (E/P experts each). Rank 0 emits the rows; every number in them is
already reduced over the ranks.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch
import torch.distributed as dist

from suite.results import Row
from suite.stages.ep.golden import EpResult, ep_case
from suite.stages.ep.moe_layer import MISTAKES, MoeShape
from suite.stages.ep.timing import dispatch_bandwidth, step_times
from suite.workloads.golden import CHECK_DTYPE
from suite.workloads.gpt import torch_dtype
from suite.workloads.worker import worker_session
from suite.workloads.worker_cli import log, mistakes_from

STAGE = "ep"


def routers(cfg: dict) -> dict[str, float]:
    """Router name → logit skew: uniform (random init only) and skewed."""
    return {"uniform": 0.0, "skewed": cfg["skew"]}


def golden_rows(result: EpResult, prefix: str, router: str, world: int) -> list[Row]:
    common = dict(stage=STAGE, world=world, dtype=CHECK_DTYPE, source="hand", algo=router)
    rows = [
        Row(case=f"{prefix}{router}.{q}", metric="max_abs_error", value=v, unit="abs", **common)
        for q, v in result.errors.items()
    ]
    rows += [
        Row(
            case=f"{prefix}{router}",
            metric="token_set_mismatches",
            value=float(result.token_set_mismatches),
            unit="count",
            **common,
        ),
        Row(
            case=f"{prefix}{router}",
            metric="assignments",
            value=float(result.assignments),
            unit="count",
            **common,
        ),
        Row(case=f"{prefix}{router}", metric="dropped", value=float(result.dropped), unit="count", **common),
        Row(
            case=f"{prefix}{router}",
            metric="dropped_reference",
            value=float(result.dropped_reference),
            unit="count",
            **common,
        ),
    ]
    return rows


def load_rows(result: EpResult, router: str, world: int) -> list[Row]:
    common = dict(stage=STAGE, world=world, source="hand", algo=router, unit="count")
    routed = result.routed_per_expert
    mean = sum(routed) / len(routed)
    rows = [
        Row(case=f"{router}.expert{e}", metric="tokens_routed", value=float(v), **common)
        for e, v in enumerate(routed)
    ]
    rows += [
        Row(case=f"{router}.expert{e}", metric="tokens_kept", value=float(v), **common)
        for e, v in enumerate(result.kept_per_expert)
    ]
    rows += [
        Row(case=f"{router}.rank{r}", metric="tokens_received", value=float(v), **common)
        for r, v in enumerate(result.received_per_rank)
    ]
    rows.append(
        Row(
            stage=STAGE,
            case=router,
            metric="imbalance",
            value=max(routed) / mean if mean else float("nan"),
            unit="ratio",
            world=world,
            source="hand",
            algo=router,
        )
    )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ep", required=True, help="the profile's ep section as JSON")
    p.add_argument(
        "--mistakes", default="", help="comma-separated deliberate mistakes to check as well (tests)"
    )
    args = p.parse_args()
    cfg = json.loads(args.ep)
    mistakes = mistakes_from(args)
    unknown = [m for m in mistakes if m not in MISTAKES]
    if unknown:
        raise SystemExit(f"unknown ep mistakes {unknown}: choose from {', '.join(MISTAKES)}")
    t0 = time.monotonic()
    with worker_session() as w:
        torch.set_float32_matmul_precision("highest")
        group = dist.group.WORLD
        golden = MoeShape(
            tokens=cfg["golden_tokens"],
            hidden=cfg["golden_hidden"],
            ffn=cfg["golden_ffn"],
            experts=cfg["experts"],
            top_k=cfg["top_k"],
            capacity_factor=cfg["capacity_factor"],
        )
        rows = []
        for router, skew in routers(cfg).items():
            result = ep_case(w.device, golden, cfg["seed"], skew, group)
            rows += golden_rows(result, "", router, w.world) + load_rows(result, router, w.world)
            for m in mistakes:
                rows += golden_rows(
                    ep_case(w.device, golden, cfg["seed"], skew, group, m), f"mistake.{m}.", router, w.world
                )
            log(t0, f"{router}: errors {result.errors}, mismatches {result.token_set_mismatches}")
        if w.rank == 0:
            w.emit(rows)
        dtype = torch_dtype(cfg["dtype"])
        timed = MoeShape(
            tokens=cfg["tokens"],
            hidden=cfg["hidden"],
            ffn=cfg["ffn"],
            experts=cfg["experts"],
            top_k=cfg["top_k"],
            capacity_factor=0.0,
        )
        rows = []
        for router, skew in routers(cfg).items():
            rows += dispatch_bandwidth(w, group, timed, router, skew, cfg["reps"], dtype)
            for i, cf in enumerate(cfg["capacity_factors"]):
                w.progress(
                    f"{router} router, capacity factor {cf:g}", done=i, of=len(cfg["capacity_factors"])
                )
                rows += step_times(
                    w, group, dataclasses.replace(timed, capacity_factor=cf), router, skew, cfg["reps"], dtype
                )
        if w.rank == 0:
            w.emit(rows)
        log(t0, "timed")


if __name__ == "__main__":
    main()
