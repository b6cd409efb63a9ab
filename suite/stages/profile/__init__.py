"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 10 (checklist row 10): do communication kernels overlap compute kernels on each rank's timeline?

    python -m suite run --profile nccl-gpu --stages profile

One launch of DDP training (suite/stages/profile/worker.py, DDP's default buckets):
  nccl-gpu with nsys on PATH: each rank runs under `nsys profile` with the CUDA profiler API as
      capture range (the worker starts and stops it around the steps), cuda and nvtx traced, one
      report per rank: raw/profile/rank_<N>.nsys-rep, then `nsys export --type sqlite` beside it.
  nccl-gpu without nsys: torch.profiler with CUDA activity (said in the `profile.capture` verdict).
  gloo-cpu: torch.profiler (Kineto) per rank; gloo's all-reduce runs on its own thread.
Every trace is analysed by suite/parsers/traces.py: per rank, communication time, compute time,
the time both run at once, and overlap % = overlapped ÷ communication (Holistic Trace Analysis'
definition). A short window of each rank's timeline is published for the report's figure.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from suite import headlines as hl
from suite.config import Profile
from suite.context import StageContext
from suite.facts import Facts
from suite.facts import profile as profile_of
from suite.hardware.stage_fit import scaling_model
from suite.launch.torchrun import LaunchError
from suite.parsers import traces
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages._parallel_ranks import subset_expectations, subset_note
from suite.values import is_missing
from suite.verdicts import judges_performance, verdicts_for

NAME = "profile"

CONFIG = None


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs)."""
    step = p.step_s / p.parallel_ranks + p.dp_comm_s(p.parallel_ranks)
    return (
        p.assume.torchrun_launch_s + p.steps * step + p.assume.nsys_export_s,
        f"nsys over {p.steps} DDP steps + export of every rank's report",
    )


MIN_OVERLAP_PCT = 10.0
MIN_COMM_SHARE_PCT = 10.0
MIN_PROFILED_STEPS = 3
TIMELINE_MAX_INTERVALS = 400  # per lane and rank in the published window
EXPORT_TIMEOUT_S = 600.0


# ---------------------------------------------------------------- commands


def profiled_steps(profile: Profile) -> int:
    """The model's timed steps (10 on nccl-gpu) plus one: the analysis leaves out the last profiled step."""
    return max(profile.model.steps, MIN_PROFILED_STEPS) + 1


def capture_tool(profile: Profile) -> tuple[str, str | None]:
    """('nsys', path) on a GPU with Nsight Systems on PATH, else ('torch.profiler', None)."""
    if profile.device == "cuda":
        path = shutil.which("nsys")
        if path:
            return "nsys", path
    return "torch.profiler", None


def worker_args(profile: Profile, trace_dir: Path, nsys: str | None, facts: dict | None = None) -> list[str]:
    args = [
        "--model",
        json.dumps(dataclasses.asdict(scaling_model(profile, facts))),
        "--trace-dir",
        str(trace_dir),
        "--steps",
        str(profiled_steps(profile)),
        "--capture",
        "cuda-profiler-api" if nsys else "torch",
    ]
    return (["--nsys", nsys] if nsys else []) + args


def nsys_export_command(nsys: str, report: Path) -> list[str]:
    """`nsys export --type sqlite` of one report, written beside it (rank_0.nsys-rep → rank_0.sqlite)."""
    return [
        nsys,
        "export",
        "--type",
        "sqlite",
        "--force-overwrite",
        "true",
        "--output",
        str(report.with_suffix(".sqlite")),
        str(report),
    ]


def export_reports(nsys: str, raw_dir: Path) -> list[Path]:
    """Every rank's report exported to SQLite; a failed export raises with its command and output."""
    out = []
    log = raw_dir / "nsys-export.log"
    for report in sorted(raw_dir.glob("rank_*.nsys-rep")):
        command = nsys_export_command(nsys, report)
        with open(log, "ab") as f:
            f.write(("$ " + " ".join(command) + "\n").encode())
            f.flush()
            done = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, timeout=EXPORT_TIMEOUT_S)
        if done.returncode != 0:
            raise LaunchError(
                f"nsys export of {report.name} failed: see {log}",
                command=command,
                exit_code=done.returncode,
                log_tail=log.read_text(errors="replace")[-3000:],
            )
        out.append(report.with_suffix(".sqlite"))
    return out


# ---------------------------------------------------------------- expect


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    common = dict(stage=NAME, case="ddp", world=profile.parallel_ranks)
    return subset_expectations(NAME, profile, "DDP's batch") + [
        Expectation(
            metric="overlap_pct",
            value=MIN_OVERLAP_PCT,
            unit="%",
            **common,
            basis="at least this share of communication under compute whenever communication is more "
            f"than {MIN_COMM_SHARE_PCT:g}% of the captured span (DDP overlaps its buckets with backward)",
        ),
    ]


# ---------------------------------------------------------------- run


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    tool, nsys = capture_tool(profile)
    ctx.say(f"DDP under {tool}: {profiled_steps(profile)} steps{subset_note(profile)}")
    result = ctx.torchrun(
        "suite.stages.profile.worker",
        worker_args(profile, ctx.raw_dir, nsys, ctx.facts),
        tag="ddp",
        nproc=profile.parallel_ranks,
    )
    rows = result.rows()
    if nsys:
        ctx.say("nsys export --type sqlite")
        files = export_reports(nsys, ctx.raw_dir)
    else:
        files = sorted(ctx.raw_dir.glob("rank*.trace.json.gz"))
    ctx.say(f"overlap analysis of {len(files)} traces")
    timelines = [t for path in files for t in traces.timelines_of(path)]
    source = "nsys" if nsys else "torch.profiler"
    rows += analysis_rows(timelines, source, profile.parallel_ranks)
    for key, value in trace_facts(
        tool, files, profile.device == "cuda" and not nsys, timelines, profiled_steps(profile) - 1
    ).items():
        ctx.publish(key, value)
    return rows


def trace_facts(
    tool: str, files: list[Path], fallback: bool, timelines: list[traces.RankTimeline], steps: int
) -> dict[str, Any]:
    """What the stage publishes about its traces (run() and `suite ingest` alike): the capture and a timeline
    window."""
    return {
        "trace_capture": {"tool": tool, "files": [p.name for p in files], "fallback": fallback},
        "trace_timeline": timeline_windows(timelines, steps),
    }


def analysis_rows(timelines: list[traces.RankTimeline], source: str, world: int) -> list[Row]:
    out = []
    for t in timelines:
        o = t.overlap()
        common = dict(stage=NAME, case="ddp", rank=o.rank, world=world, source=source)
        out += [
            Row(metric="comm_us", value=o.comm_us, unit="us", **common),
            Row(metric="compute_us", value=o.compute_us, unit="us", **common),
            Row(metric="overlap_us", value=o.overlap_us, unit="us", **common),
            Row(metric="overlap_pct", value=o.overlap_pct, unit="%", **common),
            Row(metric="window_us", value=o.window_us, unit="us", **common),
            Row(metric="comm_share_pct", value=o.comm_share_pct, unit="%", **common),
        ]
    return out


def timeline_windows(timelines: list[traces.RankTimeline], steps: int) -> dict[str, Any]:
    """About one step of each rank's merged lanes, ending with its last communication, in µs from the window's
    start.

    Ranks are windowed separately: per-rank nsys reports do not share a time origin.
    """
    ranks = []
    for t in timelines:
        comm, compute = t.merged()
        everything = comm + compute
        if not everything:
            continue
        first, last = min(s for s, _ in everything), max(e for _, e in everything)
        length = (last - first) / max(steps, 1)
        end = comm[-1][1] if comm else last
        start = max(first, end - length)
        end = min(last, end + 0.05 * length)

        def lane(merged: list[traces.Interval]) -> list[list[float]]:
            return [[round(s - start, 1), round(e - start, 1)] for s, e in traces.clip(merged, start, end)][
                :TIMELINE_MAX_INTERVALS
            ]

        ranks.append(
            {
                "rank": t.rank,
                "source": t.source,
                "length_us": round(end - start, 1),
                "compute": lane(compute),
                "comm": lane(comm),
            }
        )
    return {"ranks": sorted(ranks, key=lambda r: r["rank"])}


# ---------------------------------------------------------------- judge

VERDICTS = verdicts_for(NAME)


def _by_rank(rows: list[Row], metric: str) -> dict[int, float]:
    return {r.rank: r.value for r in rows if r.metric == metric and r.rank is not None}


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    prof = profile_of(facts)
    world, device = prof.parallel_ranks, prof.device
    capture = facts.get("trace_capture") or {}
    comm, compute = _by_rank(rows, "comm_us"), _by_rank(rows, "compute_us")
    pct, share = _by_rank(rows, "overlap_pct"), _by_rank(rows, "comm_share_pct")
    out = [capture_verdict(capture, device, sorted(comm))]

    missing = [r for r in range(world) if r not in comm]
    empty = [r for r in sorted(comm) if not comm[r] > 0 or not compute.get(r, 0) > 0]
    seen = ", ".join(
        f"rank {r}: {comm[r] / 1e3:.1f} ms comm, {compute.get(r, 0) / 1e3:.1f} ms compute"
        for r in sorted(comm)
    )
    out.append(
        VERDICTS.check(
            "traces",
            not missing and not empty,
            expected=f"{world} traces, each with communication and compute",
            observed=seen or "no trace analysed",
            reason_ok="every rank's trace holds both communication and compute intervals",
            reason_bad=(
                f"no trace for rank(s) {missing}"
                if missing
                else f"rank(s) {empty} show no communication or no compute"
            )
            + f": look in raw/{NAME}/ (the worker logs ddp.rank<N>.log; the traces); the communication "
            f"pattern is "
            f"{traces.COMM_PATTERN!r}",
        )
    )

    for rank in sorted(pct):
        expected = f"overlap ≥ {MIN_OVERLAP_PCT:g}% when communication > {MIN_COMM_SHARE_PCT:g}% of the span"
        p, s = pct[rank], share.get(rank, float("nan"))
        observed = (
            f"overlap {p:.1f}% of {comm.get(rank, 0) / 1e3:.1f} ms communication ({s:.1f}% of the span)"
        )
        check = f"overlap.rank{rank}"
        if not judges_performance(facts):
            out.append(VERDICTS.cpu_skip(check, expected, observed))
            continue
        serial = not is_missing(p) and p < MIN_OVERLAP_PCT and s > MIN_COMM_SHARE_PCT
        out.append(
            VERDICTS.check(
                check,
                not serial,
                bad="warn",
                expected=expected,
                observed=observed,
                reason_ok="communication runs under compute",
                reason_bad="communication and compute serial on the timeline: DDP's all-reduce waits for "
                "backward "
                "(one bucket? gradient hooks disabled? a sync point between kernels?); open the rank's "
                f"report in raw/{NAME}/",
            )
        )
    return out


def capture_verdict(capture: dict, device: str, ranks: list[int]) -> Verdict:
    tool = capture.get("tool", "?")
    if device == "cuda" and capture.get("fallback"):
        return VERDICTS.warn(
            "capture",
            expected="Nsight Systems (nsys)",
            observed=f"torch.profiler, {len(ranks)} ranks",
            reason="nsys is not on PATH: torch.profiler traces were analysed instead; "
            "run inside the suite's image (it ships the Nsight Systems CLI) or install nsys",
        )
    expected = "Nsight Systems (nsys)" if device == "cuda" else "torch.profiler (Kineto) on CPU"
    return VERDICTS.passed(
        "capture",
        expected=expected,
        observed=f"{tool}, {len(ranks)} ranks",
        reason=f"traces captured with {tool}: {', '.join(capture.get('files', []))}",
    )


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Communication share and overlap, the median over the traced ranks."""
    import statistics

    share = [r.value for r in hl.matching(rows, "ddp", "comm_share_pct")]
    overlap = [r.value for r in hl.matching(rows, "ddp", "overlap_pct")]
    if not share:
        return None
    text = f"communication {statistics.median(share):.0f}% of the step over {len(share)} rank(s)"
    return text + (f", {statistics.median(overlap):.1f}% of it overlapped" if overlap else "")


STAGE = Stage(
    row=10,
    after=("fault",),  # needs no facts; the checklist ends with it
    title="Nsight Systems over ~10 steps",
    measures="whether communication kernels overlap compute kernels on each rank's timeline (~10 DDP steps)",
    wrong="overlap below 10% while communication is more than 10% of the step: communication and compute "
    "serial",
    rehearsal="torch.profiler traces of DDP on gloo; the same overlap analysis (gloo thread against the main "
    "thread)",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
