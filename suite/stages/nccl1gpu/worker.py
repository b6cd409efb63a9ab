"""What NCCL and torch.distributed do on one card; run by the nccl1gpu stage, one launch per case:

--case duplicate   2 ranks, NCCL, both on cuda:0: NCCL ≥ 2.5 refuses ("Duplicate GPU detected"); the
                   error's text is the row (NCCL_DEBUG=WARN adds its WARN line to the rank logs)
--case one_rank    1 rank, NCCL: communicator creation, new_group, async_op=True and work.wait() vs
                   torch.cuda.synchronize() behind a GEMM chain the collective must wait for
--case gloo_cuda   N ranks, gloo, CUDA tensors on the one card: each collective's result against the same
                   collective on CPU tensors (--device cpu runs the comparison code on CPU: a test's seam)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from suite.launch import procs
from suite.results import Row, write_rows_jsonl
from suite.workloads import LAUNCHER_PID
from suite.workloads.worker import init_process_group, redirect_output

STAGE = "nccl1gpu"


def row(case, metric, value=float("nan"), unit="count", text=None, **kw) -> Row:
    return Row(stage=STAGE, case=case, metric=metric, value=float(value), unit=unit, text=text, **kw)


def duplicate(rank: int, world: int, timeout_s: float) -> list[Row]:
    """Every rank on cuda:0 in one NCCL communicator (eager init through device_id, then one all_reduce)."""
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    try:
        init_process_group("nccl", device, timeout_s)
        x = torch.ones(4, device=device)
        dist.all_reduce(x)
        torch.cuda.synchronize(device)
    except Exception as e:  # the refusal is the measurement: record its text, whatever type torch gives it
        return [
            row("duplicate", "refused", 1.0, text=f"{type(e).__name__}: {e}"[:4000], rank=rank, world=world)
        ]
    return [
        row(
            "duplicate",
            "refused",
            0.0,
            text=f"accepted: all_reduce of ones gave {x[0].item():g}",
            rank=rank,
            world=world,
        )
    ]


def gemm_chain(device, n: int, count: int) -> tuple[torch.Tensor, torch.cuda.Event, torch.cuda.Event]:
    """`count` n×n fp32 matmuls on the current stream, bracketed by CUDA events; returns a scalar that depends
    on them."""
    a = torch.randn(n, n, device=device) / n**0.5
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    c = a
    for _ in range(count):
        c = c @ a
    end.record()
    return torch.ones(1, device=device) + 0 * torch.nan_to_num(c.sum()), start, end


def one_rank(timeout_s: float, gemm_n: int, gemm_count: int) -> list[Row]:
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    t0 = time.perf_counter()
    init_process_group("nccl", device, timeout_s)
    x = torch.arange(8, dtype=torch.float32, device=device)
    dist.all_reduce(x)
    torch.cuda.synchronize(device)
    out = [
        row("init", "first_collective_s", time.perf_counter() - t0, unit="s"),
        row("init", "identity_ok", float(torch.equal(x.cpu(), torch.arange(8, dtype=torch.float32)))),
    ]
    group = dist.new_group([0], backend="nccl")
    y = torch.full((8,), 3.0, device=device)
    dist.all_reduce(y, group=group)
    dist.broadcast(y, src=0, group=group)
    torch.cuda.synchronize(device)
    out.append(row("new_group", "result_ok", float(bool((y.cpu() == 3.0).all()))))
    torch.cuda.synchronize(device)
    value, start, end = gemm_chain(device, gemm_n, gemm_count)  # the collective's input waits on the chain
    t = time.perf_counter()
    work = dist.all_reduce(value, async_op=True)
    enqueued = time.perf_counter()
    work.wait()  # orders the current stream after the collective; does not block the host
    waited = time.perf_counter()
    completed_after_wait = work.is_completed()
    after = value * 2  # queued on the current stream: runs after the collective
    torch.cuda.synchronize(device)
    synced = time.perf_counter()
    out += [
        row("async", "enqueue_s", enqueued - t, unit="s"),
        row("async", "wait_host_s", waited - enqueued, unit="s"),
        row("async", "sync_host_s", synced - waited, unit="s"),
        row("async", "gemm_device_s", start.elapsed_time(end) / 1e3, unit="s"),
        row("async", "completed_after_wait", float(completed_after_wait)),
        row("async", "completed_after_sync", float(work.is_completed())),
        row("async", "value_ok", float(after.item() == 2.0)),
    ]
    return out


def gloo_collectives(rank: int, world: int, device: torch.device) -> list[Row]:
    """Each collective on `device` tensors against the same collective on CPU tensors, elementwise."""

    def base(n=4):
        return torch.arange(n * world, dtype=torch.float32) + 100 * rank

    cases = {
        "all_reduce_sum": lambda d: _inplace(lambda t: dist.all_reduce(t), base().to(d)),
        "all_reduce_max": lambda d: _inplace(
            lambda t: dist.all_reduce(t, op=dist.ReduceOp.MAX), base().to(d)
        ),
        "broadcast": lambda d: _inplace(lambda t: dist.broadcast(t, src=world - 1), base().to(d)),
        "reduce": lambda d: _at_root(_inplace(lambda t: dist.reduce(t, dst=0), base().to(d)), rank),
        "all_gather": lambda d: _gather(base().to(d), world),
        "all_gather_into_tensor": lambda d: _into(
            dist.all_gather_into_tensor, base().to(d), world * 4 * world, d
        ),
        "reduce_scatter_tensor": lambda d: _into(dist.reduce_scatter_tensor, base().to(d), 4, d),
        "all_to_all_single": lambda d: _into(dist.all_to_all_single, base().to(d), 4 * world, d),
    }
    out = []
    for name, fn in cases.items():
        reference = fn(torch.device("cpu"))
        try:
            got = fn(device).cpu()
        except (RuntimeError, ValueError, NotImplementedError) as e:
            out.append(
                row(
                    name,
                    "supported",
                    0.0,
                    text=f"{type(e).__name__}: {e}".splitlines()[0][:300],
                    rank=rank,
                    world=world,
                    source="gloo",
                )
            )
            dist.barrier()  # a collective the device refused must not leave the ranks out of step
            continue
        diff = float((got - reference).abs().max()) if got.shape == reference.shape else float("inf")
        out += [
            row(name, "supported", 1.0, rank=rank, world=world, source="gloo"),
            row(name, "max_abs_diff_vs_cpu", diff, unit="abs", rank=rank, world=world, source="gloo"),
            row(name, "result", text=json.dumps(got.tolist()), rank=rank, world=world, source="gloo"),
        ]
    return out


def _inplace(op, t):
    op(t)
    return t


def _at_root(t, rank):
    """reduce defines the result on dst only; elsewhere the buffer is the backend's scratch."""
    return t if rank == 0 else torch.zeros_like(t)


def _gather(t, world):
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t)
    return torch.cat(parts)


def _into(op, t, n, device):
    out = torch.empty(n, dtype=t.dtype, device=device)
    op(out, t)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=("duplicate", "one_rank", "gloo_cuda"), required=True)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--gemm-n", type=int, default=4096)
    p.add_argument("--gemm-count", type=int, default=40)
    args = p.parse_args(argv)
    procs.die_with_parent(expected_parent=LAUNCHER_PID)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out_dir = Path(os.environ.get("CARDTIME_OUT_DIR", "."))
    redirect_output(
        Path(os.environ.get("CARDTIME_RAW_DIR", ".")), os.environ.get("CARDTIME_LOG_PREFIX", ""), rank
    )
    timeout_s = float(os.environ.get("CARDTIME_PG_TIMEOUT_S", "60"))
    if args.case == "duplicate":
        rows = duplicate(rank, world, timeout_s)  # the group is broken: no barrier, no destroy
    elif args.case == "one_rank":
        rows = one_rank(timeout_s, args.gemm_n, args.gemm_count)
    else:
        device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
        # gloo: no device_id, CUDA tensors all the same
        init_process_group("gloo", torch.device("cpu"), timeout_s)
        rows = gloo_collectives(rank, world, device)
    write_rows_jsonl(out_dir / f"rows.rank{rank}.jsonl", rows)
    if args.case != "duplicate":
        dist.barrier()
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
