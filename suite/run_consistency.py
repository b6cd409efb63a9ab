"""What `suite check` verifies beyond each file parsing: that the records agree with the schema's types and with
each other. A run whose rows were emptied, doubled or turned to text, or whose verdicts vanished, still parses;
accepting it would accept measurements nobody made. Each problem names the file and what disagrees."""

from __future__ import annotations

import math
from collections import Counter

from suite.results import STAGE_STATES, RunDir, Verdict

# Columns that hold numbers whenever they hold anything (a size of `inf` or "abc" is no measurement).
_NUMERIC = ("value", "size_bytes", "count", "world", "rank", "repeat")


def consistency_problems(run: RunDir, frame, verdicts: list[Verdict]) -> list[str]:
    """Every disagreement found, each one line naming its file; [] for a run whose records agree."""
    import pandas as pd

    problems = []
    stages = run.manifest.get("stages") or {}
    for name, state in stages.items():
        status = state.get("status")
        if status not in STAGE_STATES:
            problems.append(f"{run.MANIFEST}: stage {name!r} has status {status!r}, not one of {', '.join(STAGE_STATES)}")
    for column in (c for c in _NUMERIC if c in frame.columns):
        values = frame[column].dropna()
        if values.empty:
            continue
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            problems.append(f"{run.RESULTS_PARQUET}: column {column!r} holds {values.dtype} values, not numbers")
        elif column != "value" and not all(math.isfinite(v) and v >= 0 for v in values.astype(float)):
            problems.append(f"{run.RESULTS_PARQUET}: column {column!r} holds a negative or infinite value")
    rows_per_stage = Counter(frame["stage"]) if "stage" in frame.columns else Counter()
    verdicts_per_stage = Counter(v.stage for v in verdicts)
    for name, state in stages.items():
        if state.get("status") != "complete":
            continue
        for key, counted, file in (("rows", rows_per_stage, run.RESULTS_PARQUET),
                                   ("verdicts", verdicts_per_stage, run.VERDICTS)):
            recorded = state.get(key)  # written when the stage ended (older runs recorded no verdict count)
            if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded != counted[name]:
                problems.append(f"{file}: stage {name!r} holds {counted[name]} {key}; the manifest recorded "
                                f"{recorded} when the stage ended")
    return problems
