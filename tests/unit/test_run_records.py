"""The run directory read through one typed layer (suite/run_schema.py, suite/run_consistency.py): each class
of record that parses but holds what no run writes — wrong types in manifest.json, verdicts.json and
results.parquet, extreme numbers, an unknown stage status, rows emptied or doubled — answered in one line by
`suite check`, `run --resume`, `python -m reports` and `reports compare`, never a traceback; and Ctrl-C on
reports and check answered in one line with 130.

One fixture makes every spoiled run (from tests/report_synthetic.py's run); one child process per CLI runs all
their cases (tests/unit/test_exit_codes.py's run_cases).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from suite import run_schema
from tests.damaged_runs import damaged_run
from tests.proc_files import holds_open
from tests.unit.test_bad_input import recorded_counts
from tests.unit.test_exit_codes import run_cases

REPO = Path(__file__).resolve().parents[2]
S, R = "suite.__main__", "reports.__main__"


def edit_json(file: Path, change) -> None:
    data = json.loads(file.read_text())
    change(data)
    file.write_text(json.dumps(data))


def first_stage(data: dict) -> dict:
    return next(iter(data["stages"].values()))


def first_verdict(data: dict) -> dict:
    return data["verdicts"][0]


def edit_rows(run: Path, change) -> None:
    import pandas as pd

    frame = pd.read_parquet(run / "results.parquet")
    frame = change(frame) if change else frame
    frame.to_parquet(run / "results.parquet", index=False)


def first_cell(column: str, value, as_float: bool = False):
    def change(frame):
        if as_float:
            frame[column] = frame[column].astype("float64")
        frame[column] = frame[column].astype(object) if not as_float else frame[column]
        frame.loc[frame.index[0], column] = value
        return frame

    return change


def first_expectation(run: Path, **cells) -> None:
    import csv
    import io

    file = run / "expectations.csv"
    records = list(csv.DictReader(io.StringIO(file.read_text())))
    records[0].update(cells)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(records[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    file.write_text(out.getvalue())


def doubled(frame):
    import pandas as pd

    return pd.concat([frame, frame], ignore_index=True)


# name → (the class of damage, what it does to the run, what the one line must name)
M, V = "manifest.json", "verdicts.json"
SPOIL = {
    "manifest run_id int": (
        "types",
        lambda r: edit_json(r / M, lambda d: d.update(run_id=5)),
        "'run_id' holds 5",
    ),
    "manifest host list": (
        "types",
        lambda r: edit_json(r / M, lambda d: d.update(host=[1])),
        "'host' holds a JSON list",
    ),
    "manifest hostname list": (
        "types",
        lambda r: edit_json(r / M, lambda d: d["host"].update(hostname=["x"])),
        "host.'hostname'",
    ),
    "manifest versions int": (
        "types",
        lambda r: edit_json(r / M, lambda d: d.update(versions={"torch": 2})),
        "versions.torch",
    ),
    "manifest stages_selected int": (
        "types",
        lambda r: edit_json(r / M, lambda d: d.update(stages_selected=[1])),
        "stages_selected holds 1",
    ),
    "manifest stage_texts int": (
        "types",
        lambda r: edit_json(r / M, lambda d: d.update(stage_texts={"bandwidth": {"measures": 5}})),
        "stage_texts.bandwidth",
    ),
    "manifest schema_version true": (
        "types",
        lambda r: edit_json(r / M, lambda d: d.update(schema_version=True)),
        "schema_version is True",
    ),
    "stage status int": (
        "status",
        lambda r: edit_json(r / M, lambda d: first_stage(d).update(status=3)),
        "status 3",
    ),
    "stage status list": (
        "status",
        lambda r: edit_json(r / M, lambda d: first_stage(d).update(status=["complete"])),
        "status a JSON list",
    ),
    "stage status unknown": (
        "status",
        lambda r: edit_json(r / M, lambda d: first_stage(d).update(status="done")),
        "status 'done'",
    ),
    "stage rows text": (
        "types",
        lambda r: edit_json(r / M, lambda d: first_stage(d).update(rows="abc")),
        "'rows' holds 'abc'",
    ),
    "stage attempt list": (
        "types",
        lambda r: edit_json(r / M, lambda d: first_stage(d).update(attempt=[1])),
        "'attempt' holds a JSON list",
    ),
    "verdict id int": (
        "types",
        lambda r: edit_json(r / V, lambda d: first_verdict(d).update(id=5)),
        "'id' holds 5",
    ),
    "verdict status list": (
        "types",
        lambda r: edit_json(r / V, lambda d: first_verdict(d).update(status=["pass"])),
        "'status' holds a JSON list",
    ),
    "verdict reason int": (
        "types",
        lambda r: edit_json(r / V, lambda d: first_verdict(d).update(reason=5)),
        "'reason' holds 5",
    ),
    "verdict observed null": (
        "types",
        lambda r: edit_json(r / V, lambda d: first_verdict(d).update(observed=None)),
        "'observed' holds None",
    ),
    "verdict a string": (
        "types",
        lambda r: edit_json(r / V, lambda d: d["verdicts"].__setitem__(0, "x")),
        "a JSON str",
    ),
    "verdicts NaN": (
        "numbers",
        lambda r: (r / V).write_text('{"schema_version": NaN, "verdicts": []}'),
        "NaN",
    ),
    "verdicts 1e400": (
        "numbers",
        lambda r: (r / V).write_text('{"schema_version": 1e400, "verdicts": []}'),
        "too large",
    ),
    "verdicts 5000 digits": (
        "numbers",
        lambda r: (r / V).write_text('{"schema_version": %s, "verdicts": []}' % ("9" * 5000)),
        "digits",
    ),
    "verdicts deep": (
        "numbers",
        lambda r: (r / V).write_text(
            '{"schema_version": 1, "verdicts": %s}' % ("[" * 100_000 + "]" * 100_000)
        ),
        "nested",
    ),
    "verdicts doubled": (
        "consistency",
        lambda r: edit_json(r / V, lambda d: d["verdicts"].extend(d["verdicts"])),
        "appears more than once",
    ),
    "rows value text": (
        "types",
        lambda r: edit_rows(r, lambda f: f.assign(value=f["value"].astype(str))),
        "'value' holds",
    ),
    "rows stage int": ("types", lambda r: edit_rows(r, lambda f: f.assign(stage=5)), "'stage' holds 5"),
    "rows size inf": (
        "numbers",
        lambda r: edit_rows(r, first_cell("size_bytes", float("inf"), as_float=True)),
        "'size_bytes' holds inf",
    ),
    "rows rank 1.5": (
        "numbers",
        lambda r: edit_rows(r, first_cell("rank", 1.5, as_float=True)),
        "'rank' holds 1.5",
    ),
    "rows world text": ("types", lambda r: edit_rows(r, lambda f: f.assign(world="four")), "'world' holds"),
    "rows value list": (
        "types",
        lambda r: edit_rows(r, lambda f: f.assign(value=[[1.0]] * len(f))),
        "'value' holds",
    ),
    "rows empty": ("consistency", lambda r: edit_rows(r, lambda f: f.iloc[0:0]), "holds 0 rows"),
    "rows doubled": ("consistency", lambda r: edit_rows(r, doubled), "the manifest recorded"),
    "expectation size inf": (
        "numbers",
        lambda r: first_expectation(r, size_bytes="inf"),
        "not a whole number",
    ),
    "expectation size digits": (
        "numbers",
        lambda r: first_expectation(r, size_bytes="9" * 5000),
        "not a whole number",
    ),
}
RENDERED = ("stage status int", "verdict id int", "rows value text", "rows doubled", "verdicts deep")
"""The cases also rendered by reports and compare (a render is seconds each); check and resume take them
all."""


@dataclass(frozen=True)
class Case:
    name: str
    module: str
    argv: tuple[str, ...]


def cases(d: Path) -> list[Case]:
    c = []
    for name in SPOIL:
        run = str(d / name.replace(" ", "-"))
        c += [Case(f"check {name}", S, ("check", run)), Case(f"resume {name}", S, ("run", "--resume", run))]
        if name in RENDERED:
            c += [
                Case(f"report {name}", R, (run, "-o", f"{run}.html")),
                Case(f"compare {name}", R, ("compare", str(d / "intact"), run, "-o", f"{run}.compare.html")),
            ]
    return c


@pytest.fixture(scope="module")
def spoiled(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("spoiled-runs")
    damaged_run(d / "intact", "intact")
    for name, (_, spoil, _) in SPOIL.items():
        run = d / name.replace(" ", "-")
        damaged_run(run, "intact")
        recorded_counts(run)  # as finish_stage records them: rows and verdicts per stage
        spoil(run)
    return d


@pytest.fixture(scope="module")
def outcomes(spoiled) -> dict[str, dict]:
    return run_cases(cases(spoiled), cwd=spoiled)


def test_every_class_is_spoiled():
    assert {kind for kind, _, _ in SPOIL.values()} == {"types", "numbers", "status", "consistency"}


@pytest.mark.parametrize("name", list(SPOIL))
def test_check_and_resume_refuse_in_one_line_naming_the_field(spoiled, outcomes, name):
    says = SPOIL[name][2]
    for command in ("check", "resume"):
        got = outcomes[f"{command} {name}"]
        assert got["code"] == 2, f"{command} {name}: exit {got['code']}\n{got['err'][-3000:]}"
        lines = got["err"].strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], got["err"]
    # resume ran nothing
    assert not (spoiled / name.replace(" ", "-") / "raw" / "topology" / "rows.jsonl").exists()


@pytest.mark.parametrize("name", RENDERED)
def test_reports_and_compare_render_and_say_what_is_incomplete(spoiled, outcomes, name):
    """A record refused by the typed layer is shown as missing: the page renders (0), stderr names it."""
    for command in ("report", "compare"):
        got = outcomes[f"{command} {name}"]
        assert got["code"] == 0 and "Traceback" not in got["err"], f"{command} {name}: {got['err'][-3000:]}"
        incomplete = [line for line in got["err"].splitlines() if line.startswith("incomplete: ")]
        assert incomplete and any(SPOIL[name][2] in line for line in incomplete), got["err"]
    html = (spoiled / f"{name.replace(' ', '-')}.html").read_text()
    assert "Incomplete run directory" in html


def test_the_intact_run_passes_the_typed_layer(spoiled):
    from suite.run_consistency import load_checked

    run, verdicts = load_checked(spoiled / "intact")
    frame = run.rows_frame()
    assert len(verdicts) > 5 and len(frame) > 50
    assert str(frame["size_bytes"].dtype) == "Int64" and str(frame["stage"].dtype).startswith("string")


def test_the_schema_names_each_field_it_refuses():
    manifest = {
        "run_id": "r",
        "host": {"hostname": "h", "cpus": 2},
        "git": {"commit": "c", "dirty": False},
        "stages": {"topology": {"status": "complete", "attempt": 1, "rows": 3, "verdicts": 1}},
    }
    assert run_schema.manifest_problems(manifest) == []
    assert run_schema.manifest_problems({**manifest, "git": {"dirty": "no"}}) == [
        "git.'dirty' holds 'no', not true, false or null"
    ]
    assert run_schema.manifest_problems({"stages": {"x": {"status": "complete", "rows": -1}}}) == [
        "stage 'x': 'rows' holds -1, not a whole number ≥ 0"
    ]
    assert run_schema.verdict_problem({k: "x" for k in run_schema.VERDICT_FIELDS}) is None
    assert run_schema.schema_version_problem(True) and run_schema.schema_version_problem(1) is None


def test_the_rows_table_refuses_what_its_types_do_not_hold():
    import pandas as pd

    ok = pd.DataFrame({"stage": ["bandwidth"], "value": [1.5], "root": [-1], "size_bytes": [8]})
    assert run_schema.column_problems(ok) == []
    assert run_schema.column_problems(ok.assign(root=-2)) == [
        "column 'root' holds -2.0, not a whole number ≥ -1"
    ]
    assert run_schema.column_problems(ok.assign(size_bytes=8.5))[0].startswith(
        "column 'size_bytes' holds 8.5"
    )
    assert run_schema.column_problems(ok.assign(value=True)) == [
        "column 'value' holds bool values, not numbers"
    ]


# ---------------------------------------------------------------- Ctrl-C


@pytest.fixture(scope="module")
def big_run(tmp_path_factory) -> Path:
    """A run whose results.parquet holds ~1.5 M rows: reading and drawing it takes the CLIs seconds."""
    import pandas as pd

    run = damaged_run(tmp_path_factory.mktemp("big") / "run", "intact")
    import numpy as np

    frame = pd.read_parquet(run / "results.parquet")
    bandwidth = frame[frame["stage"] == "bandwidth"]
    copies = 8000
    big = pd.concat([bandwidth] * copies, ignore_index=True)
    big["repeat"] = pd.array(np.repeat(np.arange(copies), len(bandwidth)), dtype="Int64")
    pd.concat([frame, big], ignore_index=True).to_parquet(run / "results.parquet", index=False)
    return run


def working(pid: int, run: Path) -> bool:
    """The process has a record of `run` open, or has started workers: it is reading or drawing, past its
    imports."""
    try:
        if any(
            Path(f"/proc/{pid}/task/{t}/children").read_text().split()
            for t in os.listdir(f"/proc/{pid}/task")
        ):
            return True
    except OSError:  # gone, or a thread ended between the listing and the reading
        return False
    return holds_open(pid, run)


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc to see the child at work")
@pytest.mark.parametrize(
    "argv", [("reports", "RUN", "-o", "OUT"), ("suite", "check", "RUN")], ids=["reports", "check"]
)
def test_ctrl_c_while_working_is_one_line_and_130(big_run, tmp_path, argv):
    """Ctrl-C as a terminal sends it: SIGINT to the whole process group (the reports' drawing workers too)."""
    argv = [str(big_run) if a == "RUN" else str(tmp_path / "report.html") if a == "OUT" else a for a in argv]
    child = subprocess.Popen(
        [sys.executable, "-m", *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "CARDTIME_FIGURE_CACHE": "off", "MPLBACKEND": "Agg"},
    )
    try:
        deadline = time.monotonic() + 300
        while not working(child.pid, big_run) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert child.poll() is None, f"it ended before it was interrupted: {child.stderr.read()[-2000:]}"
        os.killpg(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert child.returncode == 130, err[-3000:]
    assert (
        "Traceback" not in err and len(err.strip().splitlines()) == 1 and err.startswith("interrupted: ")
    ), err
    assert not (tmp_path / "report.html").exists()
