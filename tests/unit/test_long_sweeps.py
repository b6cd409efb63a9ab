"""A very long nccl-tests table (suite/ingest/condense.py): judged by real rows it holds — each kept size's
best and most-wrong rows, the peak and every wrong size kept — with verdicts the whole table would give; and
the parse's fast row path reads every row as the general one does."""

from __future__ import annotations

import math
import re
from pathlib import Path

from suite.ingest import condense, inputs
from suite.parsers import nccl_tests, nccl_tests_rows

from .test_ingest import ingest

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests/data/nccl-tests/15-rtx4090-all_reduce-4gpu-pcie-docker.txt"  # 29 sizes, 8 B..2 GiB


def looped(path: Path, loops: int, wrong_at: tuple[int, int] | None = None) -> Path:
    """The real capture's table printed `loops` times in a row, as a sweep run in a loop prints it, each
    loop's times a little slower (busbw lower); `wrong_at` (loop, row) gets 3 wrong elements out of place."""
    text = REAL.read_text()
    lines = text.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.strip()[:1].isdigit())
    last = max(i for i, line in enumerate(lines) if line.strip()[:1].isdigit())
    table = lines[first : last + 1]
    body = []
    for loop in range(loops):
        for n, line in enumerate(table):
            toks = line.split()
            slower = 1 + loop / 100
            for time in (5, 9):  # each half: time up, algbw and busbw down
                toks[time] = f"{float(toks[time]) * slower:.2f}"
                for bw in (time + 1, time + 2):
                    toks[bw] = f"{float(toks[bw]) / slower:.2f}"
            if (loop, n) == wrong_at:
                toks[8] = "3"
            body.append("  ".join(toks) + "\n")
    path.write_text("".join(lines[:first] + body + lines[last + 1 :]))
    return path


def test_a_table_within_the_limit_is_judged_row_by_row():
    (c,) = inputs.read(REAL)
    ((data, condensed),) = condense.stage_tables([c.data])
    assert data is c.data and condensed is None


def test_a_looped_sweep_keeps_each_sizes_best_rows_and_its_wrong_one(tmp_path, monkeypatch):
    monkeypatch.setattr(condense, "LIMIT", 100)
    (c,) = inputs.read(looped(tmp_path / "all_reduce_perf-loop.out", 8, wrong_at=(5, 20)))
    rows = c.data["rows"]
    ((data, condensed),) = condense.stage_tables([c.data])
    kept = data["rows"]
    assert len(rows) == 8 * 29 and condensed.rows == 232 and condensed.sizes == 29
    assert all(any(k is r for r in rows) for k in kept)  # rows the tool printed, not made up
    for size in {r["size"] for r in rows}:
        at = [r for r in rows if r["size"] == size]
        mine = [r for r in kept if r["size"] == size]
        for p in ("oop", "ip"):
            assert max(r[p]["busbw"] for r in mine) == max(r[p]["busbw"] for r in at)
        assert 1 <= len(mine) <= 3
    wrong = [r for r in kept if r["oop"]["wrong"]]
    assert len(wrong) == 1 and wrong[0] is rows[5 * 29 + 20] and condensed.wrong_sizes == 1
    assert "its 232 rows at 29 sizes, 1 with wrong values" in condensed.note()


def test_a_sweep_of_many_sizes_keeps_spaced_peak_and_wrong_sizes_the_same_for_twins():
    def table(scale: float, peak_at: int, wrong_at: int) -> dict:
        rows = []
        for i in range(6000):
            size = 8 + 4 * i
            busbw = scale * (2.0 if i == peak_at else 1.0)
            half = {"time_us": 10.0, "algbw": busbw, "busbw": busbw, "wrong": 7 if i == wrong_at else 0}
            rows.append(
                {"size": size, "count": size // 4, "type": "float", "redop": "sum", "root": -1,
                 "oop": half, "ip": dict(half, wrong=0)}
            )  # fmt: skip
        return {"rows": rows, "nranks": 8, "complete": True}

    ring, tree = table(1.0, 4000, 10), table(0.5, 5000, 5999)
    (r, rc), (t, tc) = condense.stage_tables([ring, tree])
    sizes_r, sizes_t = [x["size"] for x in r["rows"]], [x["size"] for x in t["rows"]]
    assert sizes_r == sizes_t  # the crossover pairs them size by size
    assert len(sizes_r) <= condense.SIZES + 4
    assert {8, 8 + 4 * 5999, 8 + 4 * 4000, 8 + 4 * 5000, 8 + 4 * 10} <= set(sizes_r)
    assert (
        max(x["oop"]["busbw"] for x in r["rows"]) == 2.0 and max(x["oop"]["busbw"] for x in t["rows"]) == 1.0
    )
    assert [x["size"] for x in r["rows"] if x["oop"]["wrong"]] == [48]
    assert rc.kept_sizes == len(sizes_r) and rc.sizes == 6000
    # spaced evenly in log size: where a size was left out between two kept ones, they are within two steps
    step = (sizes_r[-1] / sizes_r[0]) ** (1 / (condense.SIZES - 1))
    assert all(b / a <= step**2 for a, b in zip(sizes_r, sizes_r[1:]) if b - a > 4)
    assert sum(b - a > 4 for a, b in zip(sizes_r, sizes_r[1:])) > 100  # the test is not empty


def test_the_condensed_table_gets_the_verdicts_of_the_whole_one(tmp_path, monkeypatch):
    capture = looped(tmp_path / "all_reduce_perf-loop.out", 8, wrong_at=(5, 20))
    _, _, whole = ingest(tmp_path / "whole", capture)
    monkeypatch.setattr(condense, "LIMIT", 100)
    monkeypatch.setattr(condense, "SIZES", 12)
    done, run, part = ingest(tmp_path / "part", capture)
    assert {k: v.status for k, v in part.items()} == {k: v.status for k, v in whole.items()}
    assert part["bandwidth.peak.all_reduce"].observed == whole["bandwidth.peak.all_reduce"].observed
    wrong = part["bandwidth.wrong.nccl-tests.all_reduce"]
    assert wrong.status == "fail" and re.search(r"\b\d+ B oop: 3\b", wrong.observed)
    assert "judged by" in done.stderr and "kept under raw/" in done.stderr
    status = next(r for r in run.rows() if r.metric == "status" and r.case == "nccl-tests.all_reduce")
    assert "its 232 rows at 29 sizes" in status.text
    assert (run.path / "raw/bandwidth" / capture.name).read_bytes() == capture.read_bytes()


def modern_lines() -> list[str]:
    """Every data row of the captures whose table is `size count type redop root` and two `time algbw busbw
    #wrong` halves in µs, and rows that leave the fast path (NaN, N/A, a cut row, a named root, a count of
    wrong ones, 1e+03)."""
    lines = []
    for path in sorted((REPO / "tests/data/nccl-tests").glob("*.txt")):
        text = path.read_text(errors="replace")
        if re.search(r"#\s+size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong\s+time", text):
            lines += [s.strip() for s in text.splitlines() if re.match(r"\s*\d+\s+\d+\s+\S+\s+\S+\s+-?\d", s)]
    base = "1048576 262144 float sum -1 642.4 1.63 2.45 0 641.2 1.64 2.45 0"
    lines += [
        base.replace(" 0 641.2", " 3 641.2"),
        base.replace(" 0 641.2", " 2.5 641.2"),
        base.replace("642.4", "nan"),
        base.replace("2.45 0 641.2", "2.45 N/A 641.2"),
        base.replace("-1 642.4", "none 642.4"),
        base.replace("642.4", "1e+03"),
        base.rsplit(" ", 3)[0],
        base.replace("1048576", "-8"),
    ]
    return lines


MODERN = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"


def test_the_fast_row_path_reads_every_row_as_the_general_one():
    table = nccl_tests_rows.Table(MODERN.split(), 1e-6)
    assert table.modern
    lines = modern_lines()
    assert len(lines) > 100
    for line in lines:
        fast, general = table.row(line), table._row(line)
        assert fast == general and repr(fast) == repr(general), line  # 0 and 0.0 told apart
    nan = "1048576 262144 float sum -1 nan 1.63 2.45 0 641.2 1.64 2.45 0"
    assert nccl_tests_rows.modern_row(nan.split()) is None  # the general path reads it and says which


def test_older_or_other_tables_take_the_general_path():
    assert not nccl_tests_rows.Table(MODERN.split(), 1e-3).modern  # ms: 2017 era
    assert not nccl_tests_rows.Table((MODERN + " timestamp").split(), 1e-6).modern
    assert not nccl_tests_rows.Table(MODERN.replace("root ", "").split(), 1e-6).modern
    parsed = nccl_tests.parse_text(REAL.read_text(), REAL.name)
    assert len(parsed["rows"]) == 29 and all(math.isfinite(r["oop"]["busbw"]) for r in parsed["rows"])
