"""The primitive probe's rows summed over ranks and judged (suite/stages/_probe.py), and `python -m suite
probe`'s refusals of unusable input (no launch). The probe run for real on gloo:
tests/dist/test_collective_sweep.py."""

from __future__ import annotations

import math

import pytest

from suite.__main__ import main
from suite.results import Row
from suite.stages._probe import PRIMITIVES, probe_verdicts, summarize

N = 3


def probe_rows(
    texts: dict[tuple[str, int], str] | None = None,
    wrong: dict[tuple[str, int], float] | None = None,
    drop: set[tuple[str, int]] = frozenset(),
    world: int = N,
) -> list[Row]:
    """Rows as every rank of suite/workloads/probe.py writes them; all right unless told otherwise."""
    texts, wrong = texts or {}, wrong or {}
    rows = []
    for name in PRIMITIVES:
        for rank in range(world):
            if (name, rank) in drop:
                continue
            text = texts.get((name, rank), "ok: 16 elements checked, 0 wrong")
            value = math.nan if text.startswith(("error", "not run")) else wrong.get((name, rank), 0.0)
            rows.append(
                Row(
                    stage="bandwidth",
                    case=f"probe.{name}",
                    metric="wrong",
                    value=value,
                    unit="count",
                    rank=rank,
                    world=world,
                    source="torch",
                    text=text,
                )
            )
    return rows


def statuses(rows):
    return {v.id.removeprefix("bandwidth.probe."): v for v in probe_verdicts("bandwidth", rows)}


def test_every_primitive_right_on_every_rank_passes():
    v = statuses(probe_rows())
    assert len(v) == len(PRIMITIVES) == 10
    assert {x.status for x in v.values()} == {"pass"}


def test_a_wrong_value_on_one_rank_fails_that_primitive_only():
    v = statuses(probe_rows(wrong={("broadcast", 2): 3.0}))
    assert v["broadcast"].status == "fail" and "3 wrong elements (rank 2)" in v["broadcast"].observed
    assert [k for k, x in v.items() if x.status != "pass"] == ["broadcast"]


def test_an_unsupported_primitive_warns_with_its_error_line():
    line = "error: RuntimeError: ProcessGroupGloo does not support all_to_all_single"
    v = statuses(probe_rows(texts={("all_to_all_single", r): line for r in range(N)}))
    assert v["all_to_all_single"].status == "warn"
    assert "ProcessGroupGloo does not support all_to_all_single" in v["all_to_all_single"].observed
    assert "rank 0, 1, 2" in v["all_to_all_single"].observed


def test_point_to_point_on_one_rank_is_skipped():
    rows = probe_rows(
        texts={
            (p, 0): "not run: point-to-point needs 2 ranks"
            for p in ("send_recv", "isend_irecv", "batch_isend_irecv")
        },
        world=1,
    )
    v = statuses(rows)
    assert {k for k, x in v.items() if x.status == "skip"} == {
        "send_recv",
        "isend_irecv",
        "batch_isend_irecv",
    }
    assert {x.status for k, x in v.items() if x.status != "skip"} == {"pass"}


def test_a_rank_without_a_row_fails():
    v = statuses(probe_rows(drop={("barrier", 1)}))
    assert v["barrier"].status == "fail" and "no row from rank 1" in v["barrier"].observed


def test_no_probe_rows_no_verdicts():
    assert (
        probe_verdicts(
            "bandwidth", [Row(stage="bandwidth", case="all_reduce", metric="wrong", value=0.0, unit="count")]
        )
        == []
    )
    assert [r.status for r in summarize([])] == ["missing"] * len(PRIMITIVES)  # nothing reported is not "ok"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["probe", "--mistakes", "wrong.gossip"], "unknown mistake(s) ['wrong.gossip']"),
        (["probe", "--nproc", "0"], "--nproc must be at least 1"),
    ],
)
def test_the_command_refuses_unusable_input_in_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
