"""What `suite check` and `run --resume` verify beyond each file reading as its type (suite/run_schema.py):
that the records agree with each other. A run whose rows were emptied or doubled, or whose verdicts vanished
or came twice, still reads; accepting it would accept measurements nobody made, and resuming it would carry
the damage on. Each problem names the file and what disagrees; `python -m reports` shows the same lines as
what is incomplete."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from suite.results import RunDir, RunDirError, Verdict
from suite.run_schema import first_of


def consistency_problems(run: RunDir, frame, verdicts: list[Verdict]) -> list[str]:
    """Every disagreement found, each one line naming its file; [] for a run whose records agree."""
    problems = []
    stages = run.manifest.get("stages") or {}
    twice = sorted(i for i, n in Counter(v.id for v in verdicts).items() if n > 1)
    if twice:
        problems.append(
            f"{run.VERDICTS}: verdict {twice[0]!r} appears more than once"
            + (f" ({len(twice)} ids do)" if len(twice) > 1 else "")
            + "; each check judges once"
        )
    rows_per_stage = Counter(frame["stage"]) if "stage" in frame.columns else Counter()
    verdicts_per_stage = Counter(v.stage for v in verdicts)
    for name, state in stages.items():
        if state.get("status") != "complete":
            continue
        for key, counted, file in (
            ("rows", rows_per_stage, run.RESULTS_PARQUET),
            ("verdicts", verdicts_per_stage, run.VERDICTS),
        ):
            recorded = state.get(key)  # written when the stage ended (older runs recorded no verdict count)
            if recorded is not None and recorded != counted[name]:
                problems.append(
                    f"{file}: stage {name!r} holds {counted[name]} {key}; the manifest recorded "
                    f"{recorded} when the stage ended"
                )
    return problems


def load_checked(path: Path) -> tuple[RunDir, list[Verdict]]:
    """The run and its verdicts, every record read, typed and agreeing; RunDirError naming the first file that
    is not (FileNotFoundError: not a run directory). What `suite check` judges and `run --resume`
    continues."""
    run = RunDir.load(path)
    verdicts = run.verdicts()
    frame = run.rows_frame()
    run.expectations()
    problems = consistency_problems(run, frame, verdicts)
    if problems:  # records that disagree: the run is damaged, not judged
        file, _, problem = problems[0].partition(": ")
        raise RunDirError(run.path / file, first_of([problem, *problems[1:]]))
    return run, verdicts
