"""`nvidia-smi topo -m` parser on real captures (tests/data/topo/, sources in its README.md), edge cases, bad
input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from suite.parsers import ParseError
from suite.parsers.topo import nvlink_count, parse, parse_file
from suite.stages.topology.rules import verdicts_for_parse

DATA = Path(__file__).resolve().parent.parent / "data" / "topo"
# `topo -p2p` ones: tests of suite/parsers/p2p.py
CAPTURES = sorted(p for p in DATA.glob("*.txt") if "-p2p-" not in p.name)
PARSE_KEYS = (
    "gpus",
    "num_gpus",
    "links",
    "nics",
    "nic_legend",
    "gpu_nic_links",
    "cpu_affinity",
    "numa_affinity",
    "gpu_numa_id",
    "trailing_columns",
)


def capture(stem: str) -> str:
    return (DATA / f"{stem}.txt").read_text(encoding="utf-8")


def test_the_captures_are_all_there_with_their_sources():
    assert len(CAPTURES) >= 16
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for txt in CAPTURES:
        assert txt.with_suffix(".json").exists(), f"{txt.name} has no expected parse"
        assert txt.name in readme, f"{txt.name} is not listed with its source in tests/data/topo/README.md"
        meta = json.loads(txt.with_suffix(".json").read_text())
        assert meta["source"], txt.name


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_capture_parses_to_its_expected_json(path: Path):
    expected = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    got = parse_file(path)
    for key in PARSE_KEYS:
        assert got[key] == expected[key], f"{path.name}: {key}"
    assert [k for k in got if k not in PARSE_KEYS] == []  # the parse only: `parse topo` adds the verdicts
    got["verdicts"] = [v.to_dict() for v in verdicts_for_parse(got)]
    assert len(got["verdicts"]) == 2
    for verdict in got["verdicts"]:
        assert set(verdict) == {"id", "stage", "status", "expected", "observed", "reason"}
        assert verdict["status"] in ("pass", "warn", "fail", "skip")
    if "expected_verdicts" in expected:
        assert {v["id"]: v["status"] for v in got["verdicts"]} == expected["expected_verdicts"]


# ---------------------------------------------------------------- read by hand from the source tables


def test_mangled_header_keeps_the_nic_order_of_the_capture():
    # Header "\t    GPU0GPU1…GPU7mlx5_0\tmlx5_2\tmlx5_1\tmlx5_3": names ran together in the copy.
    t = parse(capture("27-dgx1-p100-8gpu-soc-nv1-mangled-header"))
    assert t.gpus == [f"GPU{i}" for i in range(8)]
    assert t.nics == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]
    # Row "GPU0 X NV1 NV1 NV1 NV1 SOC SOC SOC PIX SOC PHB SOC 1-1"
    assert [t.gpu_nic_links[f"GPU0-{n}"] for n in t.nics] == ["PIX", "SOC", "PHB", "SOC"]
    assert t.link("GPU4", "GPU0") == "NV1" and t.links["GPU0-GPU5"] == "SOC"
    assert t.cpu_affinity["GPU7"] == "1-1" and t.numa_affinity is None
    assert "SOC" in t.legend and "NODE" not in t.legend  # the old legend


def test_power9_pairs_and_numa_node_8():
    t = parse(capture("21-traverse-v100-4gpu-nv3-pairs-power9"))
    assert {p: l for p, l in t.links.items() if nvlink_count(l)} == {"GPU0-GPU1": "NV3", "GPU2-GPU3": "NV3"}
    assert t.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "8", "GPU3": "8"}
    assert t.gpu_nic_links["GPU2-mlx5_2"] == "NODE" and t.gpu_nic_links["GPU0-mlx5_3"] == "SYS"


def test_markdown_indented_capture():
    t = parse(capture("24-markdown-indented-2gpu-node"))
    assert t.links == {"GPU0-GPU1": "NODE"}
    assert (t.cpu_affinity, t.numa_affinity, t.gpu_numa_id) == (
        {"GPU0": "0-15", "GPU1": "0-15"},
        {"GPU0": "0", "GPU1": "0"},
        {"GPU0": "N/A", "GPU1": "N/A"},
    )


def test_nic_legend_maps_nic_columns_to_devices():
    t = parse(capture("29-a100-8gpu-nv12-10nic-4numa"))
    assert t.nic_legend["NIC9"] == "mlx5_9" and len(t.nic_legend) == 10
    assert t.gpu_nic_links["GPU6-NIC7"] == "PXB" and t.gpu_nic_links["GPU6-NIC0"] == "SYS"
    assert t.numa_affinity["GPU4"] == "7"


def test_nvlink_count():
    assert [nvlink_count(x) for x in ("NV18", "NV1", "SYS", "X", "NV#")] == [18, 1, 0, 0, 0]


# ---------------------------------------------------------------- the real variety, derived from real
# captures


def _same_parse(a: str, b: str) -> None:
    assert parse(a).to_dict() == parse(b).to_dict()


def test_ansi_underline_codes_in_the_header():
    text = capture("23-rtx5090-2gpu-phb-gpu-numa-id")
    header, rest = text.split("\n", 1)
    _same_parse(text, f"\t\x1b[4m{header.lstrip()}\x1b[0m\n{rest}")
    _same_parse(text, f"\t[4m{header.lstrip()}[0m\n{rest}")  # the escape byte lost in a paste


def test_header_missing_its_leading_tab_and_a_prompt_before_it():
    text = capture("20-della-a100-2gpu-sys-cross-numa-2nic")
    lines = text.splitlines(keepends=True)
    header = next(i for i, l in enumerate(lines) if "CPU Affinity" in l)
    stripped = "".join(lines[:header] + [lines[header].lstrip("\t")] + lines[header + 1 :])
    _same_parse(text, stripped)
    _same_parse(text, "user@box:~$ nvidia-smi topo -m\n" + stripped)


def test_space_aligned_and_crlf_copies_of_a_tab_capture():
    text = capture("14-rtx4090-8gpu-sys-2nic")
    _same_parse(text, "\n".join(line.expandtabs(8) for line in text.splitlines()))
    _same_parse(text, text.replace("\n", "\r\n"))


def test_p2p_matrix_after_the_topology_is_not_read_as_topology():
    # The club-3090 capture continues with `topo -p2p rw`; the table ends at the blank line.
    text = (
        capture("23-rtx5090-2gpu-phb-gpu-numa-id") + "\n \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n"
    )
    assert parse(text).links == {"GPU0-GPU1": "PHB"}


def test_single_gpu_has_no_pairs():
    t = parse(capture("16-tesla-p4-1gpu"))
    assert t.gpus == ["GPU0"] and t.links == {} and t.nics == []


# ---------------------------------------------------------------- bad input


def _error(text: str) -> str:
    with pytest.raises(ParseError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_not_a_matrix():
    nccl = (DATA.parent / "nccl-tests" / "07-a100-all_reduce-4gpu-nvswitch-table-only.txt").read_text()
    assert "no topology header" in _error(nccl)
    assert "input is empty" in _error("")


def test_cut_short_names_the_missing_row():
    text = capture("01-dgx1-v100-8gpu-mlx5")
    cut = "\n".join(l for l in text.splitlines() if not l.startswith("GPU6"))
    message = _error(cut)
    assert "GPU6" in message and "no row" in message


def test_short_row_names_its_line():
    text = capture("05-a100-pcie-2gpu-node-1nic").replace(
        "GPU1    NODE     X      NODE    32-63   1", "GPU1    NODE     X"
    )
    message = _error(text)
    assert re.search(r"line 4: row GPU1 has 2 link cells but the header names 3 devices", message), message


def test_misaligned_diagonal_and_foreign_words():
    text = capture("23-rtx5090-2gpu-phb-gpu-numa-id")
    assert "own column" in _error(text.replace("GPU1\tPHB\t X ", "GPU1\t X \tPHB"))
    assert "not a link type" in _error(text.replace("GPU0\t X \tPHB", "GPU0\t X \tfast"))
    p2p = " \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n"
    assert "peer-to-peer" in _error(p2p)
