"""The run directory's tidy schema: rows, expectations, verdicts, the manifest, and their loaders.

One measurement per row. Every writer replaces a stage's records atomically (write a temporary
file, rename it over the old one), so a run killed at any instant leaves either the old or the
new records of a stage, never a half or a double.

    runs/<run-id>/
      manifest.json      schema_version, profile, commit, versions, host, stage status/start/end/attempt,
                         facts
      expectations.csv   what the model predicted, per stage and case, before the stage ran
      results.parquet    one measurement per row (results.csv: the same rows)
      verdicts.json      id, stage, status, expected, observed, reason
      raw/<stage>/       untouched tool output
      report.html
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from suite import run_schema
from suite.inert import inert_fields, inert_texts
from suite.runfiles import (
    RunDirError,
    atomic_write_text,
    atomic_write_with,
    read_csv_records,
    read_json_object,
    read_parquet,
)

SCHEMA_VERSION = 1

# Parameters a measurement may carry. A column is empty where it does not apply.
PARAM_COLUMNS: tuple[str, ...] = (
    "size_bytes",  # message size, bytes (nccl-tests `size`)
    "count",  # elements per rank buffer (nccl-tests `count`)
    "dtype",  # element type
    "redop",  # reduction (sum, none, ...)
    "root",  # root rank, -1 where none
    "placement",  # oop (out-of-place) or ip (in-place)
    "source",  # who measured: torch, nccl-tests, hand, nsys, ...
    "world",  # number of ranks taking part
    "algo",  # algorithm: ring, tree, NCCL_ALGO value, ...
    "tp",  # tensor-parallel degree
    "zero",  # ZeRO stage (0 = plain DDP)
    "overlap",  # communication overlap mode / bucket size
    "rank",  # which rank measured it; empty for a whole-group figure
    "repeat",  # repetition index, for run-to-run noise
    # seconds since the stage (or its phase) began, for a series over time (clocks, power, TFLOP/s windows)
    "t",
)
ROW_COLUMNS: tuple[str, ...] = ("stage", "case", "metric", "value", "unit", *PARAM_COLUMNS, "text")
EXPECTATION_COLUMNS: tuple[str, ...] = ("stage", "case", "metric", "value", "unit", "basis", *PARAM_COLUMNS)
VERDICT_STATUSES = ("pass", "warn", "fail", "skip")

INT_PARAMS = set(run_schema.WHOLE_COLUMNS)
FLOAT_PARAMS = {"t"}


class SchemaError(RunDirError):
    """A run directory written by another schema version; the message says what to do."""


@dataclass(frozen=True, kw_only=True)
class _Measurement:
    """What a row and an expectation share: which measurement, its value and unit, its parameters."""

    stage: str
    case: str
    metric: str
    value: float
    unit: str
    size_bytes: int | None = None
    count: int | None = None
    dtype: str | None = None
    redop: str | None = None
    root: int | None = None
    placement: str | None = None
    source: str | None = None
    world: int | None = None
    algo: str | None = None
    tp: int | None = None
    zero: int | None = None
    overlap: str | None = None
    rank: int | None = None
    repeat: int | None = None
    t: float | None = None

    def __post_init__(self) -> None:
        inert_fields(self)  # a GPU name from a capture: its escape, never a terminal command


@dataclass(frozen=True, kw_only=True)
class Row(_Measurement):
    """One measurement."""

    text: str | None = None
    """A measured string (an error's first line, a GPU name); value is then NaN."""

    def to_dict(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in ROW_COLUMNS}


@dataclass(frozen=True, kw_only=True)
class Expectation(_Measurement):
    """A value predicted before the stage ran, with how it was computed."""

    basis: str
    """How the value was obtained: 'ring α-β, α=5 µs β=200 GB/s', 'NVLink 4 × 18 links', ..."""

    def to_dict(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in EXPECTATION_COLUMNS}


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A judgement a person can act on."""

    id: str
    """Stable identifier, `<stage>.<check>[.<case>]`: the same check keeps its id across runs."""
    stage: str
    status: str
    """pass, warn, fail or skip."""
    expected: str
    observed: str
    reason: str

    def __post_init__(self) -> None:
        if self.status not in VERDICT_STATUSES:
            raise ValueError(f"verdict status {self.status!r} is not one of {VERDICT_STATUSES}")
        inert_fields(self)  # a GPU name from a capture: its escape, never a terminal command

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def row_from_dict(data: dict[str, Any]) -> Row:
    return Row(**run_schema.clean_record({k: data.get(k) for k in ROW_COLUMNS}))


def expectation_from_dict(data: dict[str, Any]) -> Expectation:
    return Expectation(**run_schema.clean_record({k: data.get(k) for k in EXPECTATION_COLUMNS}))


def verdict_from_dict(data: dict[str, Any]) -> Verdict:
    """A verdict read back; ValueError when the entry is not an object of six texts (suite/run_schema.py)."""
    problem = run_schema.verdict_problem(data)
    if problem:
        raise ValueError(problem)
    return Verdict(**{k: data[k] for k in run_schema.VERDICT_FIELDS})


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def dumps(data: Any) -> str:
    """JSON as the run directory writes it: NaN as null, stable key order."""
    return json.dumps(_nan_to_none(data), indent=2, sort_keys=True, default=_json_default) + "\n"


def _nan_to_none(data: Any) -> Any:
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: _nan_to_none(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_nan_to_none(v) for v in data]
    return data


# ---------------------------------------------------------------- the run directory


@dataclass
class RunDir:
    """A run directory on disk. Every method that writes replaces one stage's records atomically."""

    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    MANIFEST = "manifest.json"
    EXPECTATIONS = "expectations.csv"
    RESULTS_PARQUET = "results.parquet"
    RESULTS_CSV = "results.csv"
    VERDICTS = "verdicts.json"
    REPORT = "report.html"

    # -- creation and loading

    @classmethod
    def create(cls, path: Path, manifest: dict[str, Any]) -> "RunDir":
        path = Path(path)
        if (path / cls.MANIFEST).exists():
            raise FileExistsError(f"{path} already holds a run: resume it with --resume {path}")
        (path / "raw").mkdir(parents=True, exist_ok=True)
        run = cls(path=path, manifest={"schema_version": SCHEMA_VERSION, **manifest})
        run.save_manifest()
        run.write_expectations_all([])
        run.write_rows_all([])
        run.write_verdicts_all([])
        return run

    @classmethod
    def load(cls, path: Path) -> "RunDir":
        """Open an existing run directory; refuses one written by an unknown schema version."""
        path = Path(path)
        manifest_path = path / cls.MANIFEST
        if not manifest_path.exists():
            raise FileNotFoundError(f"{path} is not a run directory (no {cls.MANIFEST})")
        manifest = read_json_object(manifest_path)
        check_schema(manifest.get("schema_version"), manifest_path)
        problems = run_schema.manifest_problems(manifest)  # each field as a run writes it, or refused here
        if problems:
            raise RunDirError(manifest_path, run_schema.first_of(problems))
        return cls(path=path, manifest=manifest)

    def raw_dir(self, stage: str) -> Path:
        d = self.path / "raw" / stage
        d.mkdir(parents=True, exist_ok=True)
        return d

    # -- manifest

    def save_manifest(self) -> None:
        # Host facts come from the box (GPU names, driver strings): on disk without control characters.
        atomic_write_text(self.path / self.MANIFEST, dumps(inert_texts(self.manifest)))

    def stage_state(self, stage: str) -> dict[str, Any]:
        return self.manifest.setdefault("stages", {}).setdefault(stage, {"status": "pending", "attempt": 0})

    def facts(self) -> dict[str, Any]:
        return self.manifest.setdefault("facts", {})

    # -- rows

    def rows(self) -> list[Row]:
        file = self.path / self.RESULTS_PARQUET
        return _records(file, self.rows_frame().to_dict("records"), row_from_dict)

    def rows_frame(self):
        """All rows as a DataFrame of the schema's column types; RunDirError when results.parquet is damaged
        or a column holds what its type does not (text in `value`, an infinite size: suite/run_schema.py)."""
        file = self.path / self.RESULTS_PARQUET
        frame = read_parquet(file, ROW_COLUMNS[:5])  # a row is nothing without these
        problems = run_schema.column_problems(frame)
        if problems:
            raise RunDirError(file, run_schema.first_of(problems))
        return run_schema.typed_frame(frame)

    def replace_stage_rows(self, stage: str, rows: Iterable[Row]) -> None:
        kept = [r for r in self.rows() if r.stage != stage]
        self.write_rows_all(kept + list(rows))

    def write_rows_all(self, rows: list[Row]) -> None:
        frame = rows_to_frame(rows)
        atomic_write_with(self.path / self.RESULTS_PARQUET, lambda tmp: frame.to_parquet(tmp, index=False))
        atomic_write_with(self.path / self.RESULTS_CSV, lambda tmp: frame.to_csv(tmp, index=False))

    # -- expectations

    def expectations(self) -> list[Expectation]:
        file = self.path / self.EXPECTATIONS
        return _records(file, read_csv_records(file, EXPECTATION_COLUMNS[:5]), expectation_from_dict)

    def replace_stage_expectations(self, stage: str, expectations: Iterable[Expectation]) -> None:
        kept = [e for e in self.expectations() if e.stage != stage]
        self.write_expectations_all(kept + list(expectations))

    def write_expectations_all(self, expectations: list[Expectation]) -> None:
        import io

        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=EXPECTATION_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for e in expectations:
            writer.writerow({k: ("" if v is None else v) for k, v in e.to_dict().items()})
        atomic_write_text(self.path / self.EXPECTATIONS, buf.getvalue())

    # -- verdicts

    def verdicts(self) -> list[Verdict]:
        """Every verdict; RunDirError when verdicts.json is damaged or one verdict is not of the schema."""
        verdicts, problems = self.read_verdicts()
        if problems:
            raise RunDirError(self.path / self.VERDICTS, problems[0])
        return verdicts

    def read_verdicts(self) -> tuple[list[Verdict], list[str]]:
        """The verdicts that read, and one line for each that does not (an unknown status, a missing field).

        RunDirError when the file as a whole cannot be read (missing, truncated, another schema version).
        """
        file = self.path / self.VERDICTS
        data = read_json_object(file)
        check_schema(data.get("schema_version"), file)
        entries = data.get("verdicts")
        if not isinstance(entries, list):
            raise RunDirError(file, "has no list under 'verdicts'")
        verdicts, problems = [], []
        for index, entry in enumerate(entries):
            try:
                verdicts.append(verdict_from_dict(entry))
            except (TypeError, KeyError, ValueError) as e:
                name = entry.get("id") if isinstance(entry, dict) else None
                problems.append(f"verdict #{index + 1}" + (f" ({name})" if name else "") + f": {_why(e)}")
        return verdicts, problems

    def replace_stage_verdicts(self, stage: str, verdicts: Iterable[Verdict]) -> None:
        kept = [v for v in self.verdicts() if v.stage != stage]
        self.write_verdicts_all(kept + list(verdicts))

    def write_verdicts_all(self, verdicts: list[Verdict]) -> None:
        payload = {"schema_version": SCHEMA_VERSION, "verdicts": [v.to_dict() for v in verdicts]}
        atomic_write_text(self.path / self.VERDICTS, dumps(payload))


def rows_to_frame(rows: list[Row]):
    """Rows as a DataFrame with stable column types (so an empty stage still writes a valid parquet)."""
    return records_to_frame(rows, ROW_COLUMNS)


def records_to_frame(records, columns: tuple[str, ...]):
    """Rows or expectations as a DataFrame: value float64, integer parameters Int64, the rest strings."""
    import pandas as pd

    frame = pd.DataFrame([r.to_dict() for r in records], columns=list(columns))
    for column in columns:
        if column == "value" or column in FLOAT_PARAMS:
            frame[column] = frame[column].astype("float64")
        elif column in INT_PARAMS:
            frame[column] = frame[column].astype("Int64")
        else:
            frame[column] = frame[column].astype("string")
    return frame


def check_schema(version: Any, file: Path) -> None:
    """SchemaError, which every reader refuses whole (a report too), unless `version` is SCHEMA_VERSION: a
    version that is not a number ("2") says as little of how the records are laid out as another one does."""
    problem = run_schema.schema_version_problem(version)
    if problem:
        raise SchemaError(file, problem)
    if version != SCHEMA_VERSION:
        raise SchemaError(
            file,
            f"written with schema_version {version!r}; this cardtime reads version {SCHEMA_VERSION}",
            fix="check out the cardtime commit recorded in the run's manifest.json to read it, "
            "or rerun the stages with `python -m suite run --out NEW_DIR`",
        )


def _records(file: Path, records: Iterable[dict[str, Any]], build) -> list:
    """Each record through `build`; RunDirError naming the record when one does not fit the schema."""
    out = []
    for index, record in enumerate(records):
        try:
            out.append(build(record))
        except (TypeError, KeyError, ValueError) as e:
            raise RunDirError(file, f"record #{index + 1}: {_why(e)}") from None
    return out


def _why(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"no {error.args[0]!r} field"
    return str(error)


def status_counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    counts = {s: 0 for s in VERDICT_STATUSES}
    for v in verdicts:
        counts[v.status] += 1
    return counts


def write_rows_jsonl(path: Path, rows: Iterable[Row]) -> None:
    """How workers hand rows to their stage: one JSON object per line, written atomically."""
    atomic_write_text(Path(path), "".join(json.dumps(_nan_to_none(r.to_dict())) + "\n" for r in rows))


def read_rows_jsonl(path: Path) -> list[Row]:
    text = Path(path).read_text(encoding="utf-8")
    return [row_from_dict(json.loads(line)) for line in text.splitlines() if line.strip()]
