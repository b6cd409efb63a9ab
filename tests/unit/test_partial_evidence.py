"""Evidence can reject even when partial: only ACCEPT needs whole captures, a fault shown in an excerpt
counts.

Each case is a real capture (tests/data/health/, sources in its folder's README) in the dress it reaches
cardtime: quoted as an email or an issue quotes it, cut to the block that matters, or judged on one node
without the topology that would explain it."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from suite.__main__ import main as suite_main
from suite.parsers import ibstat, nvlink, smi_health
from suite.parsers.pasted import clean
from suite.stages.health import rules
from suite.stages.health.nvlink_rules import nvlink_verdict

HEALTH = Path(__file__).resolve().parents[1] / "data" / "health"


def ingested(tmp_path: Path, name: str, text: str) -> tuple[int, dict[str, dict], str]:
    pile = tmp_path / "pile"
    pile.mkdir()
    (pile / name).write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = suite_main(
            [
                "ingest",
                str(pile),
                "--out",
                str(tmp_path / "runs"),
                "--record-last",
                str(tmp_path / "LAST"),
                "--allow-partial",
            ]
        )
    run = Path((tmp_path / "LAST").read_text().strip())
    verdicts = {v["id"]: v for v in json.loads((run / "verdicts.json").read_text())["verdicts"]}
    return code, verdicts, err.getvalue()


def test_a_kernel_log_pasted_as_a_quote_still_shows_the_gpu_that_fell_off_the_bus(tmp_path):
    log = (HEALTH / "xid-06-dmesg-fallen-off-bus-multiline-570.txt").read_text()
    quoted = "".join(f"> {line}" if line.strip() else line for line in log.splitlines(keepends=True))
    nested = "".join(f"> {line}" for line in quoted.splitlines(keepends=True))
    assert clean(nested).text == log and "quoted" in clean(nested).notes[0]
    code, v, err = ingested(tmp_path, "from-the-provider.txt", quoted)
    assert (
        v["health.kernel_log"]["status"] == "fail"
        and "fallen off the bus" in v["health.kernel_log"]["observed"]
    )
    assert "box verdict: REJECT: health.kernel_log" in err and code == 1
    # one unquoted line: as is
    assert clean("> not a quote\nplain line\n").text == "> not a quote\nplain line\n"


def test_a_q_excerpt_with_a_remap_pending_rejects_though_its_block_is_cut(tmp_path):
    whole = (HEALTH / "nvsmi-q-02-a10-remapped-rows-pending-535.txt").read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(whole) if line.strip() == "Remapped Rows")
    # the header, the GPU line, the block
    excerpt = "".join(whole[:9] + ["    ....\n"] + whole[start : start + 11])
    parsed = smi_health.parse(excerpt, partial_ok=True)
    assert not parsed["complete"] and parsed["gpus"][0]["cut"] and "no PCI section" in parsed["reason"]
    code, v, err = ingested(tmp_path, "q-excerpt.txt", excerpt)
    assert (
        v["health.remapped_rows"]["status"] == "fail"
        and "row remap pending" in v["health.remapped_rows"]["observed"]
    )
    assert v["health.pcie_link"]["status"] == "skip"  # no PCI section: a pass on absence is no pass
    assert v["health.nvidia_smi"]["status"] == "skip" and "box verdict: REJECT: health.remapped_rows" in err


def test_a_port_whose_link_trained_but_stays_down_warns_on_one_node():
    """ibstat-03's three MT4125 ports captured Active, then with their logical state Down over trained links
    (as with no subnet manager): no port of their kind up to fail against, but the renter paid for them — a
    warning; one of them down beside its Active twins stays a failure."""
    text = (HEALTH / "ibstat-03-h100-node-all-active.txt").read_text()
    blocks = text.split("CA '")
    kind_down = "CA '".join(b.replace("State: Active", "State: Down") if "MT4125" in b else b for b in blocks)
    assert rules.network_verdict(ibstat.parse(text)).status == "pass"
    v = rules.network_verdict(ibstat.parse(kind_down))
    assert v.status == "warn" and "mlx5_1 port 1 Down/LinkUp" in v.observed and "subnet manager" in v.reason
    one_down = "CA '".join(
        b.replace("State: Active", "State: Down") if b.startswith("mlx5_1'") else b for b in blocks
    )
    assert rules.network_verdict(ibstat.parse(one_down)).status == "fail"


def test_every_nvlink_down_without_a_topology_warns_and_fails_where_topo_shows_the_bridge():
    down = nvlink.parse_file(HEALTH / "dcgmi-nvlink-02-h100nvl-x2-all-down.txt")
    alone = nvlink_verdict(down, model="NVIDIA H100 NVL")
    assert alone.status == "warn" and "every NVLink of GPU 0, 1 down" in alone.observed
    assert nvlink_verdict(down, links={"GPU0-GPU1": "NV12"}, model="NVIDIA H100 NVL").status == "fail"
    assert nvlink_verdict(down, links={"GPU0-GPU1": "SYS"}, model="NVIDIA H100 NVL").status == "pass"
    up = nvlink.parse_file(HEALTH / "dcgmi-nvlink-01-h100x8-all-up.txt")
    assert nvlink_verdict(up, model="NVIDIA H100 80GB HBM3").status == "pass"
