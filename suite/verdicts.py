"""The verdict vocabulary, said once: severity order, the summary line, and the builder every stage's judge()
uses.

    VERDICTS = verdicts_for("bandwidth")
    VERDICTS.passed("fit", expected="α and β fitted", observed="α = 5 µs", reason="published")
        # → Verdict(id="bandwidth.fit", stage="bandwidth", status="pass", expected=…, observed=…, reason=…)
    VERDICTS.check("peak.all_reduce", got >= floor, expected=…, observed=…, reason_ok=…, reason_bad=…)
    VERDICTS.cpu_skip("performance", expected=…)      # the CPU rehearsal's skip of a performance check

A verdict's id is `<stage>.<check>`, so a builder bound to its stage cannot misspell either half, and
`python -m suite check`, the report's board and `make rehearse` all order and count verdicts the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from suite.results import Verdict

SEVERITY: tuple[str, ...] = ("fail", "warn", "pass", "skip")
"""Statuses from the one a person must act on first to the one that says least: the order `check` prints and
the report's board lists."""
SEVERITY_RANK: dict[str, int] = {status: rank for rank, status in enumerate(SEVERITY)}
"""fail 0, warn 1, pass 2, skip 3: a sort key (`sorted(verdicts, key=lambda v: SEVERITY_RANK[v.status])`)."""

CPU_SAYS_NOTHING = "CPU numbers say nothing about GPUs"
NOT_APPLICABLE = "does not apply to this box"
"""The reason's opening words of a skip that leaves nothing open (one GPU has no pair, a PCIe box no NVLink):
the box verdict (suite/box_verdict.py) does not count such a skip as a check left undone."""


def summary_line(counts: Mapping[str, int]) -> str:
    """'3 passed, 1 warned, 0 failed, 12 skipped': what `make rehearse`, `python -m reports` and `check`
    print."""
    return (
        f"{counts.get('pass', 0)} passed, {counts.get('warn', 0)} warned, {counts.get('fail', 0)} failed, "
        f"{counts.get('skip', 0)} skipped"
    )


def failed_stages(
    manifest: Mapping[str, Any], verdicts: Iterable[Verdict], *, unfinished: bool = False
) -> set[str]:
    """The stages that judged a check failed or ended in error: what the evidence bundle gathers, the report's
    first screen shows and `suite run` makes a bundle for. With `unfinished`, also a stage that did not
    complete (stopped by an interrupted run): what `--recheck` reruns."""
    stages = manifest.get("stages", {})
    stages = stages if isinstance(stages, Mapping) else {}

    def ended_badly(state: Any) -> bool:
        status = state.get("status") if isinstance(state, Mapping) else None
        return status == "error" or (unfinished and status not in (None, "complete"))

    return {v.stage for v in verdicts if v.status == "fail"} | {
        s for s, st in stages.items() if ended_badly(st)
    }


def judges_performance(facts: Mapping[str, Any]) -> bool:
    """Whether performance verdicts are real (a GPU profile) or skipped (the CPU rehearsal): the typed
    profile of suite.facts.Facts, or a plain mapping's recorded one."""
    typed = getattr(facts, "profile", None)
    if typed is not None:
        return bool(typed.judge_performance)
    return bool(facts.get("profile", {}).get("judge_performance", False))


def not_captured(facts: dict[str, Any], source: str) -> bool:
    """Whether this run was built by `suite ingest` from captures holding no `source` output (its checks
    skip)."""
    ingest = facts.get("ingest")
    return isinstance(ingest, dict) and source not in ingest.get("sources", ())


@dataclass(frozen=True)
class StageVerdicts:
    """Makes one stage's verdicts: `<stage>.<check>` ids, the stage filled in, the status spelled by the
    method."""

    stage: str

    def verdict(self, check: str, status: str, *, expected: str, observed: str, reason: str) -> Verdict:
        """A verdict whose status was worked out by the caller (e.g. mapped from a tool's outcome)."""
        return Verdict(
            id=f"{self.stage}.{check}",
            stage=self.stage,
            status=status,
            expected=expected,
            observed=observed,
            reason=reason,
        )

    def passed(self, check: str, *, expected: str, observed: str, reason: str) -> Verdict:
        return self.verdict(check, "pass", expected=expected, observed=observed, reason=reason)

    def warn(self, check: str, *, expected: str, observed: str, reason: str) -> Verdict:
        return self.verdict(check, "warn", expected=expected, observed=observed, reason=reason)

    def fail(self, check: str, *, expected: str, observed: str, reason: str) -> Verdict:
        return self.verdict(check, "fail", expected=expected, observed=observed, reason=reason)

    def skip(self, check: str, *, expected: str, observed: str, reason: str) -> Verdict:
        return self.verdict(check, "skip", expected=expected, observed=observed, reason=reason)

    def check(
        self,
        check: str,
        ok: bool,
        *,
        expected: str,
        observed: str,
        reason: str | None = None,
        reason_ok: str | None = None,
        reason_bad: str | None = None,
        bad: str = "fail",
    ) -> Verdict:
        """pass when ok, else `bad` (fail or warn); the reason is `reason` either way, or reason_ok /
        reason_bad."""
        if bad not in ("fail", "warn"):
            raise ValueError(f"bad must be 'fail' or 'warn', not {bad!r}")
        pair = (reason_ok, reason_bad)
        if (reason is not None and pair != (None, None)) or (reason is None and None in pair):
            raise TypeError("give either reason, or both reason_ok and reason_bad")
        if reason is None:
            reason = reason_ok if ok else reason_bad
        return self.verdict(check, "pass" if ok else bad, expected=expected, observed=observed, reason=reason)

    def not_applicable(self, check: str, *, expected: str, observed: str, why: str) -> Verdict:
        """A skip of a check this box has nothing for (one GPU: no pair; no NVLink on a PCIe card): it leaves
        the box verdict as it was, unlike a skip of a check that could not be judged."""
        return self.skip(check, expected=expected, observed=observed, reason=f"{NOT_APPLICABLE}: {why}")

    def not_captured_skip(self, check: str, expected: str, what: str) -> Verdict:
        """The verdict of a check whose data an ingested run's captures do not hold (see not_captured)."""
        return self.skip(
            check,
            expected=expected,
            observed=f"no {what} among the ingested files",
            reason=f"this run was ingested from captured outputs (manifest: ingested) and they hold no "
            f"{what}",
        )

    def live_only_skip(self, check: str, expected: str, what: str) -> Verdict:
        """An ingested run's verdict of a check only a live run measures (the torch sweep, lscpu, the per-GPU
        GEMM): ingest reads no such output, so the box verdict is not held open by it."""
        return self.not_applicable(
            check,
            expected=expected,
            observed=f"no {what} among the ingested files",
            why=f"{what} is measured by a live run only (`suite ingest` reads tool outputs; "
            "`make remote` measures it)",
        )

    def cpu_skip(self, check: str, expected: str, observed: str = "") -> Verdict:
        """The verdict a performance check gets on the CPU rehearsal."""
        return self.skip(
            check, expected=expected, observed=observed or "measured on CPU", reason=CPU_SAYS_NOTHING
        )


def verdicts_for(stage: str) -> StageVerdicts:
    return StageVerdicts(stage)
