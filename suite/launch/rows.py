"""A stage's torchrun launch whose failure becomes a row instead of an exception, so that the stage's
other tool still runs and keeps its data (bandwidth and crossover: a torch sweep that runs out of
memory must not cost the nccl-tests rows that follow it). Not a stage: the underscore keeps it out
of discovery.

    rows = launch_rows(ctx, "suite.workloads.collective_sweep", args, tag="torch")
    rows += _nccl_tests.sweep(profile, ctx, collectives)      # runs whatever became of the launch
"""

from __future__ import annotations

from suite.launch.torchrun import LaunchError, LaunchResult, launch_out_dir
from suite.results import Row, Verdict, atomic_write_text
from suite.verdicts import verdicts_for

CASE_PREFIX = "launch."


def launch_rows(ctx, module: str, args: list[str], *, tag: str, **kwargs) -> list[Row]:
    """The launch's rows; when it fails, the rows its workers wrote before failing plus one status row
    saying how it failed (the command, exit code and log tail kept in raw/<stage>/<tag>.launch-error.txt)."""
    try:
        return ctx.torchrun(module, args, tag=tag, **kwargs).rows()
    except LaunchError as error:
        atomic_write_text(ctx.raw_dir / f"{tag}.launch-error.txt", error.describe() + "\n")
        written = LaunchResult(
            command=error.command, exit_code=-1, seconds=0.0, out_dir=launch_out_dir(ctx.raw_dir, tag)
        ).rows()
        return written + [
            Row(
                stage=ctx.stage,
                case=CASE_PREFIX + tag,
                metric="status",
                value=0.0,
                unit="count",
                source="torchrun",
                text=(
                    f"{error} (exit code {error.exit_code}); {len(written)} rows "
                    f"written before it failed; see raw/{ctx.stage}/{tag}."
                    f"launch-error.txt and raw/{ctx.stage}/{tag}.rank0.log"
                ),
            )
        ]


def launch_verdicts(stage: str, rows: list[Row]) -> list[Verdict]:
    """One `fail` per launch that failed, with what it said; none when every launch exited 0."""
    verdicts = verdicts_for(stage)
    return [
        verdicts.fail(
            r.case,
            expected="the launch exits 0",
            observed=r.text or "failed",
            reason="the torch workers failed; the rows they wrote before it and the other tool's rows "
            "are kept and judged — read the log named above (out of memory: lower "
            "sweep.max_bytes)",
        )
        for r in rows
        if r.metric == "status" and r.source == "torchrun" and r.case.startswith(CASE_PREFIX)
    ]
