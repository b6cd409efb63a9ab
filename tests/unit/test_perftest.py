"""`ib_write_bw --report_gbits` output parsed from real captures (tests/data/perftest/README.md gives each
source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.parsers import ParseError, perftest

DATA = Path(__file__).resolve().parents[1] / "data" / "perftest"


@pytest.mark.parametrize(
    "name, device, qps, size, iterations, avg, rate",
    [
        ("01-cx6dx-roce-100g-D600.txt", "mlx5_0", 1, 65536, 55881440, 97.66, 0.186272),
        ("02-bnxt-roce-q3-D10.txt", "bnxt_re0", 3, 65536, 4159603, 363.47, 0.693268),
        ("03-postlist-8B-D60.txt", "ib0", 1, 8, 224958464, 0.48, 7.498617),
    ],
)
def test_real_captures(name, device, qps, size, iterations, avg, rate):
    parsed = perftest.parse((DATA / name).read_text())
    assert parsed["device"] == device and parsed["qps"] == qps and parsed["link_type"] == "Ethernet"
    (line,) = parsed["results"]
    assert (line["bytes"], line["iterations"], line["avg_gbps"], line["msg_rate_mpps"]) == (
        size,
        iterations,
        avg,
        rate,
    )
    assert line["peak_gbps"] == 0.0  # duration runs (-D) measure no peak: the average is the figure
    assert perftest.average_gbps(parsed) == avg


def test_titles_kept():
    assert (
        perftest.parse((DATA / "03-postlist-8B-D60.txt").read_text())["test"]
        == "RDMA_Write Post List BW Test"
    )
    assert perftest.parse((DATA / "01-cx6dx-roce-100g-D600.txt").read_text())["test"] == "RDMA_Write BW Test"


def test_mb_per_second_table_and_no_table_are_refused():
    text = (DATA / "01-cx6dx-roce-100g-D600.txt").read_text().replace("[Gb/sec]", "[MB/sec]")
    with pytest.raises(ParseError, match="--report_gbits"):
        perftest.parse(text)
    head = (DATA / "01-cx6dx-roce-100g-D600.txt").read_text().split(" #bytes")[0]
    with pytest.raises(ParseError, match="not ib_write_bw output"):
        perftest.parse(head)
