"""The run directory's records, typed: what each field of manifest.json, verdicts.json and results.parquet
holds when a run wrote it, checked as the file is read (suite/results.py's loaders call these).

A file that parses can still hold what no run writes: an int where a name is, a list where a status is, text
in the `value` column, an infinite size. Read on, each would end as a TypeError deep in a report's figure or a
check's sort. Here each is one line naming the field and what it holds, raised by the loader as RunDirError;
`python -m reports` shows a manifest or table refused this way as missing, `suite check` and `run --resume`
refuse the run (exit 2). Fields the schema does not name (facts, the profile's sections) are left to their own
readers (suite/fromjson.py rebuilds the profile, field by field).
"""

from __future__ import annotations

import math
from typing import Any

STAGE_STATES = ("pending", "running", "complete", "error")
VERDICT_FIELDS = ("id", "stage", "status", "expected", "observed", "reason")

_OBJECT, _LIST, _TEXT, _COUNT = "an object", "a list", "text", "a whole number ≥ 0"
_OPTIONAL_TEXT = "text or null"

# The manifest's top-level fields: what each holds (absent is always fine: older runs wrote fewer).
MANIFEST_FIELDS = {
    "run_id": _TEXT,
    "profile_name": _TEXT,
    "started": _TEXT,
    "finished": _OPTIONAL_TEXT,
    "profile": _OBJECT,
    "host": _OBJECT,
    "git": _OBJECT,
    "versions": _OBJECT,
    "facts": _OBJECT,
    "stage_texts": _OBJECT,
    "stages": _OBJECT,
    "stages_selected": _LIST,
    "ingested": _OBJECT,
    "gpu_stages_skipped": _OBJECT,
    "env_file": _OBJECT,
}
# What every run records when it starts (runner.initial_manifest): a manifest without one was cut or edited.
# A box verdict needs the profile (a box's run or a rehearsal?) and the stages selected (which never ended?);
# a resume needs them all.
VERDICT_NEEDS = ("profile", "stages_selected")
RESUME_NEEDS = ("run_id", "profile", "stages_selected", "stages")


def unrecorded_problem(manifest: dict, needed: tuple[str, ...] = VERDICT_NEEDS) -> str | None:
    """The fields of `needed` the manifest lacks, in one line; None when it has them all."""
    missing = [key for key in needed if key not in manifest]
    if not missing:
        return None
    return f"no {', '.join(missing)}: a run records {'them' if len(missing) > 1 else 'it'} when it starts"


# Each stage's state, as runner.run_stage and finish_stage write it.
STAGE_FIELDS = {
    "attempt": _COUNT,
    "start": _OPTIONAL_TEXT,
    "end": _OPTIONAL_TEXT,
    "rows": _COUNT,
    "verdicts": _COUNT,
    "stage_code": _OPTIONAL_TEXT,
}
HOST_FIELDS = {"hostname": _TEXT, "platform": _TEXT, "python": _TEXT, "cpus": "a whole number ≥ 0 or null"}
GIT_FIELDS = {"commit": _OPTIONAL_TEXT, "dirty": "true, false or null"}


def _holds(value: Any, kind: str) -> bool:
    if kind == _OBJECT:
        return isinstance(value, dict)
    if kind == _LIST:
        return isinstance(value, list)
    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _OPTIONAL_TEXT:
        return value is None or isinstance(value, str)
    if kind.startswith("a whole number"):
        return (value is None and kind.endswith("null")) or (
            isinstance(value, int) and not isinstance(value, bool) and value >= 0
        )
    if kind == GIT_FIELDS["dirty"]:
        return value is None or isinstance(value, bool)
    raise AssertionError(kind)


def _shown(value: Any) -> str:
    """A value as the message shows it: a container by its JSON type, a scalar itself (cut to 40
    characters)."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'list'}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _fields(data: dict, schema: dict[str, str], where: str) -> list[str]:
    return [
        f"{where}{key!r} holds {_shown(data[key])}, not {kind}"
        for key, kind in schema.items()
        if key in data and not _holds(data[key], kind)
    ]


def first_of(problems: list[str]) -> str:
    """The first problem as the one line a loader raises, saying how many more there are."""
    return problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


def schema_version_problem(version: Any) -> str | None:
    """Why `version` is no schema version (a bool is not: True == 1 in Python); None for a whole number."""
    if isinstance(version, int) and not isinstance(version, bool):
        return None
    return f"its schema_version is {_shown(version)}, not a whole number"


def manifest_problems(manifest: dict[str, Any]) -> list[str]:
    """One line per field of the manifest that holds what no run writes; [] for a manifest a run wrote."""
    problems = _fields(manifest, MANIFEST_FIELDS, "")
    if problems:  # the containers below are only read when they are what they should be
        return problems
    for section, schema in (("host", HOST_FIELDS), ("git", GIT_FIELDS)):
        problems += _fields(manifest.get(section) or {}, schema, f"{section}.")
    for name, value in (manifest.get("versions") or {}).items():
        if value is not None and not isinstance(value, str):
            problems.append(f"versions.{name} holds {_shown(value)}, not {_OPTIONAL_TEXT}")
    selected = manifest.get("stages_selected") or []
    problems += [
        f"stages_selected holds {_shown(s)}, not a stage name" for s in selected if not isinstance(s, str)
    ]
    for name, texts in (manifest.get("stage_texts") or {}).items():
        if not isinstance(texts, dict) or not all(isinstance(t, str) for t in texts.values()):
            problems.append(f"stage_texts.{name} holds {_shown(texts)}, not an object of texts")
    for name, state in (manifest.get("stages") or {}).items():
        if not isinstance(state, dict):
            problems.append(f"the state of stage {name!r} is not a JSON object")
            continue
        status = state.get("status")
        if status not in STAGE_STATES:
            problems.append(
                f"stage {name!r} has status {_shown(status)}, not one of {', '.join(STAGE_STATES)}"
            )
        problems += _fields(state, STAGE_FIELDS, f"stage {name!r}: ")
    return problems


def verdict_problem(entry: Any) -> str | None:
    """Why a verdicts.json entry is not a verdict (not an object, a field missing or not text); None if it
    is."""
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an object"
    for key in VERDICT_FIELDS:
        if key not in entry:
            return f"no {key!r} field"
        if not isinstance(entry[key], str):
            return f"{key!r} holds {_shown(entry[key])}, not text"
    return None


# results.parquet's columns by what they hold (suite/results.py ROW_COLUMNS); the loader casts them to these.
TEXT_COLUMNS = (
    "stage",
    "case",
    "metric",
    "unit",
    "dtype",
    "redop",
    "placement",
    "source",
    "algo",
    "overlap",
    "text",
)
WHOLE_COLUMNS = ("size_bytes", "count", "root", "world", "tp", "zero", "rank", "repeat")
REAL_COLUMNS = ("value", "t")


def column_problems(frame) -> list[str]:
    """One line per column of a rows table that holds what its type does not: text in `value`, a list where a
    name is, a size of 1.5 or infinity, a negative count (root is −1 where none). [] for a table a run
    wrote."""
    import numpy as np
    import pandas as pd

    problems = []
    for column in (c for c in (*TEXT_COLUMNS, *WHOLE_COLUMNS, *REAL_COLUMNS) if c in frame.columns):
        values = frame[column].dropna()
        if values.empty:
            continue
        if column in TEXT_COLUMNS:
            if isinstance(values.dtype, pd.StringDtype):  # parquet's string type: text by construction
                continue
            odd = [v for v in values if not isinstance(v, str)]
            if odd:
                problems.append(
                    f"column {column!r} holds {_shown(odd[0])} ({type(odd[0]).__name__}), not text"
                )
            continue
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            problems.append(f"column {column!r} holds {values.dtype} values, not numbers")
            continue
        if column in WHOLE_COLUMNS:
            floor = -1 if column == "root" else 0
            numbers = values.to_numpy(dtype="float64")
            bad = numbers[~(np.isfinite(numbers) & (numbers == np.floor(numbers)) & (numbers >= floor))]
            if bad.size:
                problems.append(f"column {column!r} holds {float(bad[0])!r}, not a whole number ≥ {floor}")
    return problems


def typed_frame(frame):
    """The rows table with the schema's column types (text as string, whole numbers as Int64, values float64),
    once column_problems found nothing: a table written by an older pandas reads the same as today's."""
    typed = frame.copy()
    for column in typed.columns:
        if column in TEXT_COLUMNS:
            typed[column] = typed[column].astype("string")
        elif column in WHOLE_COLUMNS:
            typed[column] = typed[column].astype("float64").astype("Int64")
        elif column in REAL_COLUMNS:
            typed[column] = typed[column].astype("float64")
    return typed


def clean_record(data: dict[str, Any]) -> dict[str, Any]:
    """A row or expectation read back (a parquet record, a CSV line): empty cells and NaN parameters become
    None, whole-number parameters int (ValueError for 1.5, infinity, a 5000-digit number, text), `value` a
    float."""
    out = {}
    for key, value in data.items():
        if isinstance(value, float) and math.isnan(value) and key != "value":
            value = None
        if value == "" and key not in ("case", "metric", "unit", "basis"):
            value = None
        if value is not None and key in WHOLE_COLUMNS:
            number = float(value)
            if not (math.isfinite(number) and number.is_integer()):
                raise ValueError(f"{key} {str(value)[:20]!r} is not a whole number")
            value = int(number)
        if value is not None and key in REAL_COLUMNS:
            value = float(value)
        if key == "value":
            value = float("nan") if value is None or value == "" else float(value)
        out[key] = value
    return out
