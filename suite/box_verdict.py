"""One verdict for the box: ACCEPT, REJECT, INCONCLUSIVE or REHEARSAL, from a run's manifest and verdicts.

    box = box_verdict(run.manifest, verdicts)            # fail_on="fail" (or "warn")
    box.word, box.exit_code, box.line()                  # "INCONCLUSIVE", 3, "INCONCLUSIVE: 7 checks left
                                                         # open …"

The most reported failure of acceptance tools is a false pass: a box accepted because every check that
would have caught it skipped (DCGM's diag passing with its tests not run, gpu-burn passing with no GPU
found, an unknown instance type whose peaks were never known). So a box is accepted only on evidence:

- REJECT: a verdict at the --fail-on level (fail; or warn too).
- INCONCLUSIVE: nothing rejected, but a planned check skipped (an unknown GPU's peak check, a tool that did
  not run, a capture that does not hold it), a planned stage never finished, or — for a run built by
  `suite ingest` — a stage the captures could have fed and did not. Each is listed with why.
  A skip whose reason opens with verdicts.NOT_APPLICABLE (one GPU has no pair) leaves nothing open.
- ACCEPT: every planned check ran and none was rejected.
- REHEARSAL: a CPU run (the profile judges no performance): its numbers say nothing about a box; it is
  REHEARSAL whatever passed, and still exits 1 when a check of the code itself failed.

Exit codes (suite check): 0 ACCEPT or a clean REHEARSAL, 1 REJECT (or a rehearsal with a fail), 3
INCONCLUSIVE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from suite.results import Verdict
from suite.verdicts import NOT_APPLICABLE

ACCEPT, REJECT, INCONCLUSIVE, REHEARSAL = "ACCEPT", "REJECT", "INCONCLUSIVE", "REHEARSAL"
EXIT_CODES = {ACCEPT: 0, REJECT: 1, INCONCLUSIVE: 3}
REJECTS = {"fail": ("fail",), "warn": ("fail", "warn")}
"""What each --fail-on level rejects."""
SHOWN = 12
"""Open checks named on the one-line form; the rest are counted (`check` and the report list them all)."""


@dataclass(frozen=True)
class Open:
    """A planned check the run leaves undecided, and why."""

    id: str
    why: str

    def line(self) -> str:
        return f"{self.id}: {self.why}"


@dataclass(frozen=True)
class BoxVerdict:
    word: str
    rejected: list[str] = field(default_factory=list)
    """Verdict ids at the --fail-on level."""
    open: list[Open] = field(default_factory=list)
    """Planned checks skipped, stages that did not run or were not captured."""

    @property
    def exit_code(self) -> int:
        # a failed check of the code, else a stage that did not run to its end: never 0
        if self.word == REHEARSAL:
            return 1 if self.rejected else EXIT_CODES[INCONCLUSIVE] if self.open else 0
        return EXIT_CODES[self.word]

    def line(self) -> str:
        """The verdict in one line: what rejected it, or how many checks are open and which."""
        if self.word == REHEARSAL:
            tail = (
                f"; {len(self.rejected)} check(s) of the code failed: {', '.join(self.rejected)}"
                if self.rejected
                else ""
            )
            if self.open:
                tail += (
                    f"; {len(self.open)} stage(s) did not run to the end: "
                    f"{', '.join(o.id for o in self.open)}"
                )
            return f"{REHEARSAL}: CPU numbers judge the code, not a box{tail}"
        if self.word == REJECT:
            return f"{REJECT}: {', '.join(self.rejected)}"
        if self.word == INCONCLUSIVE:
            named = ", ".join(o.id for o in self.open[:SHOWN])
            more = f" and {len(self.open) - SHOWN} more" if len(self.open) > SHOWN else ""
            return f"{INCONCLUSIVE}: {len(self.open)} planned check(s) not decided: {named}{more}"
        return f"{ACCEPT}: every planned check ran and none failed"


def judges_performance(manifest: Mapping[str, Any]) -> bool:
    profile = manifest.get("profile")
    return (
        isinstance(profile, dict)
        and profile.get("device") != "cpu"
        and bool(profile.get("judge_performance"))
    )


def leaves_open(v: Verdict) -> bool:
    """A skip that leaves its check undecided (every skip but one that does not apply to the box)."""
    return v.status == "skip" and not v.reason.startswith(NOT_APPLICABLE)


def unfinished(manifest: Mapping[str, Any], verdicts: Iterable[Verdict]) -> list[str]:
    """Selected stages that neither completed nor left a verdict: an interrupted run's missing work."""
    judged = {v.stage for v in verdicts}
    stages = manifest.get("stages") or {}
    return [
        name
        for name in manifest.get("stages_selected") or stages
        if (stages.get(name) or {}).get("status") != "complete" and name not in judged
    ]


def not_captured(manifest: Mapping[str, Any]) -> list[str]:
    """An ingested run's stages the captures could have fed and did not (feed.BOX_STAGES, recorded as
    planned)."""
    ingested = manifest.get("ingested")
    if not isinstance(ingested, dict):
        return []
    selected = set(manifest.get("stages_selected") or ())
    return [s for s in ingested.get("planned") or () if s not in selected]


def box_verdict(manifest: Mapping[str, Any], verdicts: list[Verdict], fail_on: str = "fail") -> BoxVerdict:
    rejected = [v.id for v in verdicts if v.status in REJECTS[fail_on]]
    stopped = [
        Open(s, "stage did not run to the end (resume: python -m suite run --resume RUN_DIR)")
        for s in unfinished(manifest, verdicts)
    ]
    # a rehearsal's skips are its profile's; a stage that never ended is not
    if not judges_performance(manifest):
        return BoxVerdict(REHEARSAL, rejected=rejected, open=stopped)
    open_ = [Open(v.id, first_line(v.reason) or "skipped") for v in verdicts if leaves_open(v)] + stopped
    open_ += [
        Open(s, "not captured: no file among the ingested ones feeds this stage")
        for s in not_captured(manifest)
    ]
    if rejected:
        return BoxVerdict(REJECT, rejected=rejected, open=open_)
    return BoxVerdict(INCONCLUSIVE if open_ else ACCEPT, open=open_)


def first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")
