"""DDP training steps under a profiler: Nsight Systems (through the CUDA profiler API) or torch.profiler.

    ctx.torchrun("suite.stages.profile.worker", ["--model", json, "--capture", "torch", "--trace-dir", raw])
    ctx.torchrun("suite.stages.profile.worker", ["--nsys", "/usr/bin/nsys", "--trace-dir", raw, "--model",
    json,
                                                 "--capture", "cuda-profiler-api"])

--nsys: before anything else (torch is not imported yet) the worker replaces itself with
`nsys profile … python -m suite.stages.profile.worker ARGS`: one report per rank
(<trace-dir>/rank_<RANK>.nsys-rep), torchrun still watching the same process. Under
`--capture cuda-profiler-api` the steps run between torch.cuda.profiler.start() and stop(), the
capture range nsys waits for, each step in an NVTX range. Under `--capture torch` they run inside
torch.profiler (CPU activity, and CUDA on a GPU), written to <trace-dir>/rank<RANK>.trace.json.gz.
The trace analysis (suite/parsers/traces.py) leaves out the last ProfilerStep: the stage asks for
one step more than it analyses. Rows: step_time_s (median of the profiled steps, this rank).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import warnings
from typing import Sequence

NSYS_TRACE = "cuda,nvtx,osrt"


def nsys_command(nsys: str, report: str, python: str, module_args: Sequence[str]) -> list[str]:
    """`nsys profile` around this worker: capture range = the CUDA profiler API's start/stop, cuda+nvtx
    traced.

    CPU sampling and context-switch tracing are off: with one profiler per GPU, eight samplers
    interrupting every core perturb the very timeline (kernel overlap, step time) being judged.
    """
    return [
        nsys,
        "profile",
        f"--trace={NSYS_TRACE}",
        "--sample=none",
        "--cpuctxsw=none",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--force-overwrite=true",
        f"--output={report}",
        python,
        "-m",
        "suite.stages.profile.worker",
        *module_args,
    ]


def strip_nsys(argv: Sequence[str]) -> list[str]:
    """The arguments without --nsys PATH (the wrapped worker must not wrap itself again)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--nsys":
            skip = True
            continue
        if arg.startswith("--nsys="):
            continue
        out.append(arg)
    return out


def exec_under_nsys(argv: Sequence[str]) -> None:
    """Replace this process by nsys profiling it again (same pid: torchrun keeps watching it)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--nsys")
    parser.add_argument("--trace-dir", required=True)
    known, _ = parser.parse_known_args(argv)
    rank = os.environ.get("RANK", "0")
    report = os.path.join(known.trace_dir, f"rank_{rank}")
    command = nsys_command(known.nsys, report, sys.executable, strip_nsys(argv))
    print("$ " + shlex.join(command), file=sys.stderr, flush=True)
    os.execv(known.nsys, command)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a == "--nsys" or a.startswith("--nsys=") for a in argv):
        exec_under_nsys(argv)

    import json
    import statistics

    import torch

    from suite.config import GptConfig
    from suite.results import Row
    from suite.workloads.ddp_modes import OverlapMode, train_step, wrap
    from suite.workloads.gpt import build_model
    from suite.workloads.training import local_batch, make_optimizer
    from suite.workloads.worker import worker_session

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the GptConfig as JSON")
    parser.add_argument("--capture", choices=("torch", "cuda-profiler-api"), required=True)
    parser.add_argument("--trace-dir", required=True, help="folder of the per-rank traces")
    parser.add_argument("--steps", type=int, required=True, help="profiled steps")
    args = parser.parse_args(argv)
    cfg = GptConfig(**json.loads(args.model))
    mode = OverlapMode.parse("default")

    with worker_session() as w:
        ddp = wrap(build_model(cfg, w.device), mode, w.device)
        optimizer = make_optimizer(ddp.parameters())

        def step(index: int) -> float:
            return train_step(
                ddp, mode, *local_batch(cfg, index, w.rank, w.world, w.device), optimizer, w.synchronize
            ).step_s

        # Untraced: DDP rebuilds its buckets after the first step and syncs them in the second.
        warmup = max(cfg.warmup_steps, 2)
        for index in range(warmup):
            step(index)
        w.progress("profiled steps", done=0, of=args.steps)
        times = []
        if args.capture == "cuda-profiler-api":
            torch.cuda.profiler.start()
            for index in range(args.steps):
                with torch.cuda.nvtx.range(f"step {index}"):
                    times.append(step(warmup + index))
            torch.cuda.profiler.stop()
        else:
            from torch.profiler import ProfilerActivity, profile, schedule

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if w.device.type == "cuda" else [])
            path = os.path.join(args.trace_dir, f"rank{w.rank}.trace.json.gz")  # gzipped by torch (.gz)
            # A schedule makes the profiler mark each step (ProfilerStep#N); the trace is written
            # when the last active step ends. The untraced steps above were the warm-up.
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
            with profile(
                activities=activities,
                schedule=schedule(wait=0, warmup=0, active=args.steps, repeat=1),
                on_trace_ready=lambda p: p.export_chrome_trace(path),
            ) as prof:
                for index in range(args.steps):
                    times.append(step(warmup + index))
                    prof.step()
        w.progress("profiled steps", done=args.steps, of=args.steps)
        w.emit(
            [
                Row(
                    stage="profile",
                    case="ddp",
                    metric="step_time_s",
                    value=statistics.median(times),
                    unit="s",
                    rank=w.rank,
                    world=w.world,
                    overlap=mode.label,
                    dtype=cfg.dtype,
                    source="nsys" if args.capture == "cuda-profiler-api" else "torch.profiler",
                )
            ]
        )


if __name__ == "__main__":
    main()
