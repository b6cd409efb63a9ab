"""The c10 / torchrun log reader on real captured lines (tests/data/fault/README.md names their sources)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from suite.parsers.c10_log import first_nccl_failure, is_nccl_failure, parse_line

DATA = Path(__file__).resolve().parent.parent / "data" / "fault"


def lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def test_watchdog_timeout_lines_give_rank_severity_time_and_message():
    first = parse_line(lines("nccl-watchdog-timeout-basicsr-737.log")[0])
    assert (first.severity, first.rank, first.month, first.day) == ("E", 1, 6, 26)
    assert first.seconds_of_day == pytest.approx(6 * 3600 + 24 * 60 + 44.903881913)
    assert first.source == "ProcessGroupNCCL.cpp:616"
    assert first.message.startswith(
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808"
    )
    pg = parse_line(lines("nccl-watchdog-timeout-basicsr-737.log")[1])
    assert pg.message.startswith(
        "[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout)"
    )


def test_a_month_without_zero_padding_and_a_line_number_in_front():
    record = parse_line(lines("nccl-watchdog-timeout-llamafactory-7396.log")[1])
    assert (record.rank, record.month, record.day) == (4, 3, 21)  # E321 = March 21
    assert record.seconds_of_day == pytest.approx(2 * 3600 + 7 * 60 + 8.414640780)


def test_the_old_format_has_no_time():
    record = parse_line(lines("nccl-watchdog-old-format-ofa-271.log")[0])
    assert record.severity == "E" and record.source == "ProcessGroupNCCL.cpp:737"
    assert not record.has_time and record.epoch(near=time.time()) is None
    assert record.message.startswith("[Rank 1] Watchdog caught")


def test_torchrun_lines_name_the_sigterm_and_the_30_second_wait():
    sigterm, forced, failed = (parse_line(line) for line in lines("torchrun-hang-gloo-2.13.log"))
    assert sigterm.severity == "W" and sigterm.message == "Sending process 26741 closing signal SIGTERM"
    assert (sigterm.month, sigterm.day) == (11, 29)
    # torchrun's PContext.close waits 30 s for the stopped rank before SIGKILL:
    assert forced.seconds_of_day - sigterm.seconds_of_day == pytest.approx(30.001)
    assert "forcefully exiting via 9" in forced.message
    assert failed.severity == "E" and failed.message.startswith("failed (exitcode: 1)")


def test_epoch_picks_the_year_nearest_the_fault():
    record = parse_line(lines("nccl-watchdog-timeout-basicsr-737.log")[0])
    near = time.mktime((2026, 6, 26, 6, 0, 0, 0, 0, -1))
    assert record.epoch(near) - near == pytest.approx(24 * 60 + 44.903881913)
    # A record from 31 December seen just after New Year belongs to the year before.
    december = parse_line("[rank0]:[E1231 23:59:59.500000000 ProcessGroupNCCL.cpp:1] x")
    new_year = time.mktime((2027, 1, 1, 0, 0, 1, 0, 0, -1))
    assert new_year - december.epoch(new_year) == pytest.approx(1.5)


def test_the_first_failure_line_of_a_log_is_found_and_ordinary_lines_are_not():
    text = (
        "rank 0/8 up: backend=nccl\nNCCL INFO Bootstrap : Using eth0\n"
        + (DATA / "nccl-blocking-wait-diffusers-12422.log").read_text()
    )
    record, line = first_nccl_failure(text)
    assert record.rank == 1 and "Watchdog caught collective operation timeout" in line
    assert first_nccl_failure("rank 0/2 up\nTraceback (most recent call last):\n") is None
    assert parse_line("Traceback (most recent call last):") is None
    assert parse_line("rank 0/2 up: backend=gloo device=cpu attempt=1") is None


@pytest.mark.parametrize(
    "name",
    [
        "nccl-watchdog-terminate-instructlab-520.log",
        "nccl-blocking-wait-diffusers-12422.log",
        "nccl-watchdog-old-format-ofa-271.log",
    ],
)
def test_every_captured_failure_is_recognised(name):
    assert any(is_nccl_failure(line) for line in lines(name))
    assert first_nccl_failure((DATA / name).read_text()) is not None
