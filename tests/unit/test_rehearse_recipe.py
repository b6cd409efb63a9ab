"""`make rehearse` as a user types it, into a runs folder of the test's own (RUNS=): two at once each report
their own run; a refused one (a bad PROFILE) prints one error line and no report, and leaves the run before it
as it was. And the run folder itself: two runs started in the same minute never share one."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from suite.run_id import unique_run_path

ROOT = Path(__file__).resolve().parents[2]


def _make_rehearse(runs: Path, *variables: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["make", "-s", "-C", str(ROOT), "rehearse", f"RUNS={runs}", *variables],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_rehearsals_at_once_each_report_their_own_run(tmp_path):
    runs = tmp_path / "runs"
    both = [_make_rehearse(runs, "ARGS=--stages topology") for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in both]
    assert [p.returncode for p in both] == [0, 0], [err[-500:] for _, err in outs]
    reports = [next(line for line in out.splitlines() if line.startswith("report: ")) for out, _ in outs]
    folders = {Path(r.removeprefix("report: ")).parent for r in reports}
    assert len(folders) == 2 and all(f.parent == runs and (f / "report.html").is_file() for f in folders)
    assert Path((runs / "LAST").read_text().strip()) in folders
    assert not list(runs.glob(".last.*"))  # each invocation's own record, removed


def test_a_refused_rehearsal_prints_one_error_and_no_older_report(tmp_path):
    runs = tmp_path / "runs"
    older = runs / "20261201T0000Z-box-gloo-cpu"
    older.mkdir(parents=True)
    (older / "report.html").write_text("the older run's page")
    (runs / "LAST").write_text(f"{older}\n")
    done = _make_rehearse(runs, "PROFILE=bogus")
    out, err = done.communicate(timeout=120)
    assert done.returncode != 0
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == ["error: PROFILE='bogus' is no profile: choose from gloo-cpu, nccl-1gpu, nccl-gpu"]
    assert "report:" not in out + err and "usage:" not in err
    assert (runs / "LAST").read_text() == f"{older}\n" and (
        older / "report.html"
    ).read_text() == "the older run's page"
    assert sorted(p.name for p in runs.iterdir()) == ["20261201T0000Z-box-gloo-cpu", "LAST"]


def test_runs_started_in_the_same_minute_each_claim_a_folder_of_their_own(tmp_path):
    claimed: list[Path] = []
    start = threading.Barrier(16)

    def claim() -> None:
        start.wait()
        claimed.append(unique_run_path(tmp_path, "20261207T0500Z-box-gloo-cpu"))

    threads = [threading.Thread(target=claim) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(claimed)) == 16 and all(p.is_dir() for p in claimed)
    assert sorted(p.name for p in claimed)[:2] == [
        "20261207T0500Z-box-gloo-cpu",
        "20261207T0500Z-box-gloo-cpu-10",
    ]
