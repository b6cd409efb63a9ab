"""The fault stage's three judgements of one drill case: detection (how, how fast), resume (from which step,
how many lost) and loss (the resumed trajectory against the uninterrupted reference). Pure: rows in, verdicts
out."""

from __future__ import annotations

from suite.config import Profile
from suite.results import Row, Verdict
from suite.stages.fault.timeline import STAGE
from suite.values import is_missing
from suite.verdicts import verdicts_for

VERDICTS = verdicts_for(STAGE)


def number_of(got: dict[str, Row], metric: str) -> float | None:
    row = got.get(metric)
    return row.value if row is not None and not is_missing(row.value) else None


def text_of(got: dict[str, Row], metric: str) -> str | None:
    row = got.get(metric)
    return row.text if row is not None else None


def judge_detection(
    scenario: str,
    got: dict[str, Row],
    pg_timeout: float,
    warn_after: float,
    hang_after: float,
    fault_step: int,
) -> Verdict:
    detect, restart = number_of(got, "detect_s"), number_of(got, "restart_s")
    error = text_of(got, "error")
    expected = f"a surviving rank raises within {hang_after:.0f} s (timeout {pg_timeout:g} s + margin)"
    check = f"detect.{scenario}"
    if detect is None:
        if restart is not None and restart <= hang_after:
            return VERDICTS.passed(
                check,
                expected=expected,
                observed=f"no survivor raised; torchrun restarted the group {restart:.2f} s after the fault",
                reason="torchrun saw the faulted process exit and stopped the others before they raised",
            )
        launch = text_of(got, "launch_error")
        if number_of(got, "fault_step") is None:
            return VERDICTS.fail(
                check,
                expected=expected,
                observed="the fault never happened",
                reason=f"the drill did not reach step {fault_step}: {launch or 'see its rank logs'}; "
                f"raw/fault/{scenario}/ holds torchrun's and every rank's log",
            )
        return VERDICTS.fail(
            check,
            expected=expected,
            observed="no surviving rank raised",
            reason="hangs without an error: set a timeout / enable async error handling "
            "(init_process_group(timeout=…), TORCH_NCCL_ASYNC_ERROR_HANDLING=1)"
            + (f"; {launch}" if launch else ""),
        )
    observed = f"{detect:.3f} s: {error or '(no error text)'}"
    if detect > hang_after:
        return VERDICTS.fail(
            check,
            expected=expected,
            observed=observed,
            reason="raised only after the timeout plus margin: effectively a hang; lower the "
            "process-group timeout or enable async error handling",
        )
    return VERDICTS.check(
        check,
        detect <= warn_after,
        expected=expected,
        observed=observed,
        reason_ok="a surviving rank raised; torchrun could restart the group",
        reason_bad=f"detection slower than the timeout + 10 s ({warn_after:.0f} s): check the "
        f"process-group timeout and TORCH_NCCL_ASYNC_ERROR_HANDLING",
        bad="warn",
    )


def judge_resume(scenario: str, got: dict[str, Row], steps: int) -> Verdict:
    resumed, last = number_of(got, "resumed_from_step"), number_of(got, "last_checkpoint_step")
    done = number_of(got, "steps_done")
    last = 0.0 if last is None else last  # no checkpoint before the fault: resuming from step 0 is right
    expected = f"resumes from the last checkpoint (step {last:.0f}) and finishes all {steps} steps"
    check = f"resume.{scenario}"
    if resumed is None:
        launch = text_of(got, "launch_error")
        return VERDICTS.fail(
            check,
            expected=expected,
            observed="training did not resume",
            reason="no restarted rank loaded a checkpoint and trained: see raw/fault/"
            f"{scenario}/torchrun.log" + (f" ({launch})" if launch else ""),
        )
    observed = (
        f"resumed from step {resumed:.0f}, {number_of(got, 'steps_lost') or 0:.0f} step(s) redone, "
        f"{(done or 0):.0f}/{steps} steps done"
    )
    if resumed < last:
        return VERDICTS.fail(
            check,
            expected=expected,
            observed=observed,
            reason=f"resumed from an earlier step than the last checkpoint ({last:.0f}): "
            "the newest complete checkpoint was not found or not loaded",
        )
    return VERDICTS.check(
        check,
        done is not None and done >= steps,
        expected=expected,
        observed=observed,
        reason_ok="restarted from the newest checkpoint and trained to the end",
        reason_bad="the restarted group did not train to the last step: see its rank logs",
    )


def judge_loss(scenario: str, got: dict[str, Row]) -> Verdict:
    tolerance = number_of(got, "loss_tolerance") or 0.0
    diffs = {m: number_of(got, m) for m in ("loss_diff", "replay_diff", "pre_fault_diff")}
    expected = f"resumed losses equal the uninterrupted run's within {tolerance:g} nats"
    observed = ", ".join(f"{m} {v:.2e}" if v is not None else f"{m} n/a" for m, v in diffs.items())
    check = f"loss.{scenario}"
    if diffs["loss_diff"] is None:
        return VERDICTS.fail(
            check,
            expected=expected,
            observed=observed,
            reason="no loss after resuming to compare: training did not resume",
        )
    bad = [m for m, v in diffs.items() if v is not None and v > tolerance]
    reasons = {
        "loss_diff": "the resumed run left the uninterrupted trajectory: model or optimizer state not "
        "restored "
        "(check what the checkpoint holds)",
        "replay_diff": "a step redone after resuming gave another loss than before the fault: the checkpoint "
        "does not hold the state of that step",
        "pre_fault_diff": "the drill differs from the reference before any fault: DDP and one process "
        "disagree "
        "(data split or seed), so the comparison says nothing",
    }
    return VERDICTS.check(
        check,
        not bad,
        expected=expected,
        observed=observed,
        reason_ok="the resumed run continues the same trajectory",
        reason_bad="; ".join(reasons[m] for m in bad),
    )


def too_few_ranks(profile: Profile) -> str | None:
    """Why the single-node drills cannot run on this profile (fewer than 2 processes on a node, as
    fault.drill_ranks counts them), or None when they can."""
    nproc = profile.nproc
    ranks = min(profile.section("fault").ranks or nproc, nproc)
    if ranks >= 2:
        return None
    option = "GPUS_PER_NODE=" if len(profile.nodes) > 1 else "--nproc "
    return (
        f"{ranks} process per node ({option}{nproc}): a rank lost on a node needs a survivor beside it; "
        "2 processes per node run these drills"
    )


def judge_forensics(scenario: str, got: dict[str, Row], fault_rank: int, within_s: float) -> Verdict:
    """The hang forensics must name the faulted rank and this host from what the ranks left, before the
    stopped rank is ended, within the time a survivor has to raise (the detection's own bound)."""
    check = f"forensics.{scenario}"
    expected = (
        f"rank {fault_rank} on this host named by the hang forensics within {within_s:.0f} s of the fault"
    )
    named, line = number_of(got, "forensics_named"), text_of(got, "forensics_named")
    after = number_of(got, "forensics_after_s")
    if named is None and number_of(got, "detect_s") is not None:
        return VERDICTS.skip(
            check,
            expected=expected,
            observed="a survivor raised, but the forensics left no reading",
            reason=f"see raw/fault/{scenario}/ (a run from before the forensics read drills has none)",
        )
    if named is None:
        return VERDICTS.not_applicable(
            check,
            expected=expected,
            observed="not asked: no survivor raised",
            why="torchrun saw the faulted process end and restarted the group before any survivor raised: "
            "its exit code named it",
        )
    observed = f"{line} ({after:.1f} s after the fault)" if after is not None else str(line)
    if named and (after is None or after <= within_s):
        return VERDICTS.passed(check, expected=expected, observed=observed, reason="the culprit named")
    return VERDICTS.fail(
        check,
        expected=expected,
        observed=observed,
        reason="the forensics did not name the faulted rank in time: raw/fault/"
        f"{scenario}/forensics.json holds every rank's record",
    )
