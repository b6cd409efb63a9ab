"""Rows kept as measured (suite/kept_rows.py): what a killed stage leaves is read back whole, each row
once."""

import json

from suite import kept_rows
from suite.launch.torchrun import launch_out_dir
from suite.results import Row, write_rows_jsonl
from suite.runner import ROWS_FILE


def row(i: int, case: str = "all_reduce") -> Row:
    return Row(
        stage="bandwidth",
        case=case,
        metric="busbw",
        value=float(i),
        unit="GB/s",
        size_bytes=8 << i,
        source="torch",
    )


def test_the_ledger_is_the_runners_rows_file():
    assert kept_rows.LEDGER == ROWS_FILE  # run()'s return replaces what was kept, in one file


def test_a_kept_launch_is_read_once_and_an_open_one_from_its_workers(tmp_path):
    raw = tmp_path / "bandwidth"
    raw.mkdir()
    torch_out, nccl_out = launch_out_dir(raw, "torch"), launch_out_dir(raw, "other")
    kept_rows.open_launch(torch_out)
    write_rows_jsonl(torch_out / "rows.rank0.jsonl", [row(0), row(1)])
    kept_rows.keep(raw, [row(0), row(1)], launch_dir=torch_out)  # the stage kept them: the launch is closed
    kept_rows.keep(raw, [row(5, "nccl")])  # a binary's rows
    kept_rows.open_launch(nccl_out)  # the launch running when the kill came
    write_rows_jsonl(nccl_out / "rows.rank1.jsonl", [row(7)])
    write_rows_jsonl(nccl_out / "rows.rank0.jsonl", [row(6)])
    got = kept_rows.salvage(raw)
    assert [r.value for r in got] == [0.0, 1.0, 5.0, 6.0, 7.0]  # each once, rank 0 first
    assert "5 rows measured before it are kept" in kept_rows.salvage_note(got, "bandwidth")


def test_a_line_the_kill_cut_is_left_out(tmp_path):
    kept_rows.keep(tmp_path, [row(0), row(1)])
    with open(tmp_path / kept_rows.LEDGER, "a") as f:
        f.write(json.dumps(row(2).to_dict())[:25])
    assert [r.value for r in kept_rows.salvage(tmp_path)] == [0.0, 1.0]


def test_reset_forgets_an_earlier_attempt(tmp_path):
    out = launch_out_dir(tmp_path, "torch")
    kept_rows.open_launch(out)
    write_rows_jsonl(out / "rows.rank0.jsonl", [row(0)])
    kept_rows.keep(tmp_path, [row(1)])
    kept_rows.reset(tmp_path)
    assert kept_rows.salvage(tmp_path) == []
    assert kept_rows.salvage_note([], "bandwidth") == "no rows had been measured"
