"""nccl-tests stopped size by size before its time runs out (suite/launch/nccl_tests_watch.py), on a stand-in
binary that prints a real capture (tests/data/nccl-tests/15: 4 × RTX 4090 all_reduce, 8 B → 2 GiB) line by
line, each line after 1/50 of the time that size took on the real box (25 iterations × both placements)."""

import stat
import sys
from pathlib import Path

from suite.parsers.nccl_tests import parse_file
from suite.results import Row
from suite.stages import _nccl_tests, bandwidth

from .test_bandwidth_crossover_stages import DATA, GPU_FACTS, by_id

CAPTURE = DATA / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt"
SCALE = 1 / 50


def paced_stand_in(directory: Path) -> Path:
    """all_reduce_perf that prints CAPTURE as the real run did, each table line after its size's time ×
    SCALE."""
    path = directory / "all_reduce_perf"
    path.write_text(f"""#!{sys.executable}
import sys, time
for line in open({str(CAPTURE)!r}):
    cells = line.split()
    if cells and cells[0].isdigit():
        time.sleep(25 * (float(cells[5]) + float(cells[9])) * 1e-6 * {SCALE})
    sys.stdout.write(line)
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_binary_is_stopped_before_the_size_that_would_pass_its_time(tmp_path):
    binary = paced_stand_in(tmp_path)
    planned = [r["size"] for r in parse_file(CAPTURE)["rows"]]  # what -b 8 -e 2G -f 2 plans
    # Unboxed the replay takes ≈2.5 s (its 2 GiB line alone 1.25 s); the box has 1 s.
    code, out, dropped = _nccl_tests.run_binary(
        binary, [], tmp_path, "all_reduce_perf", planned=planned, budget_s=1.0, timeout_s=60
    )
    printed = [r["size"] for r in parse_file(out)["rows"]]
    assert code is None and dropped, (code, printed)
    dropped_sizes = [s for s, _ in dropped]
    # The sweep stopped growing: what it printed, then what it dropped, is the plan, each size once.
    assert printed + dropped_sizes == planned
    assert 2147483648 in dropped_sizes
    why = dropped[0][1]
    assert why.startswith("not run for time") and "stopped growing at" in why
    # The lines printed are untouched in the .out file.
    assert CAPTURE.read_text().startswith(out.read_text().rstrip("\n").rsplit("\n", 1)[0])

    rows = _nccl_tests.rows_from_output(
        parse_file(out),
        "all_reduce",
        "bandwidth",
        exit_code=code,
        what="all_reduce_perf -b 8 -e 2G",
        stopped=why,
    )
    rows += _nccl_tests.dropped_rows("bandwidth", "all_reduce", dropped)
    status = [r for r in rows if r.metric == "status"]
    assert len(status) == 1 and status[0].text.startswith("stopped: ") and why in status[0].text
    v = by_id(bandwidth.judge_nccl_tests(rows, GPU_FACTS) + bandwidth.judge_dropped(rows))
    assert v["bandwidth.nccl_tests.all_reduce"].status == "warn"
    drop = v["bandwidth.dropped.nccl-tests"]
    assert drop.status == "warn" and "2 GiB" in drop.observed and "not run for time" in drop.reason


def test_without_a_budget_every_size_runs(tmp_path):
    binary = paced_stand_in(tmp_path)
    code, out, dropped = _nccl_tests.run_binary(
        binary, [], tmp_path, "all_reduce_perf", planned=[8, 16], budget_s=None, timeout_s=60
    )
    assert code == 0 and dropped == [] and out.read_text() == CAPTURE.read_text()


def test_no_drop_no_verdict():
    rows = [Row(stage="bandwidth", case="all_reduce", metric="busbw", value=1.0, unit="GB/s", source="torch")]
    assert bandwidth.judge_dropped(rows) == []
