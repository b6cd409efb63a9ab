"""Every open check carries the step that would decide it: a capture for an ingested run, what the box lacked
for a live one; shared steps listed once; commands shown as code on the page, escaped."""

from __future__ import annotations

from reports.render import code_spans
from suite import next_steps
from suite.box_verdict import Open


def test_an_ingested_run_is_decided_by_capturing_more_and_a_live_one_by_what_the_box_lacked():
    ingested = next_steps.step("health.kernel_log", "they hold no kernel log output", ingested=True)
    assert "sudo dmesg -T > dmesg.txt" in ingested and "python -m suite ingest" in ingested
    live = next_steps.step("health.kernel_log", "dmesg: read kernel buffer failed", ingested=False)
    assert "sudo -n dmesg" in live and "adm group" in live
    assert "datacenter-gpu-manager" in next_steps.step("health.dcgm", "dcgmi: not found", ingested=False)
    assert "topo -m" in next_steps.step("topology", "not captured", ingested=True)
    assert "gpus.py" in next_steps.step("burnin.links.hbm.sku", "no memory bandwidth figure", ingested=False)
    assert (
        next_steps.step("tp", "stage did not run to the end (resume: …)", ingested=False)
        == next_steps.STOPPED
    )


def test_checks_sharing_a_step_are_listed_under_it_once():
    opened = [
        Open("health.ecc", "x"),
        Open("topology.tools", "y"),
        Open("health.pcie_link", "z"),
        Open("health.kernel_log", "w"),
    ]
    steps = next_steps.grouped(opened, {"ingested": {"files": []}})
    assert [ids for _, ids in steps] == [
        ["health.ecc", "health.pcie_link"],
        ["topology.tools"],
        ["health.kernel_log"],
    ]


def test_commands_are_code_and_the_rest_is_escaped():
    assert str(code_spans("run `dmesg > a.txt` <b>")) == "run <code>dmesg &gt; a.txt</code> &lt;b&gt;"
    assert str(code_spans("a `b")) == "a `b"  # unbalanced: left as written
    assert "<script>" not in str(code_spans("`<script>alert(1)</script>`"))


def test_a_clean_rehearsal_offers_the_next_step_and_a_failed_one_does_not(tmp_path):
    import contextlib
    import io

    from suite.__main__ import main as suite_main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = suite_main(
            [
                "run",
                "--profile",
                "gloo-cpu",
                "--stages",
                "topology",
                "--out",
                str(tmp_path),
                "--record-last",
                str(tmp_path / "LAST"),
            ]
        )
    assert code == 0 and f"next: {next_steps.AFTER_REHEARSAL}" in err.getvalue()
    from reports.report import render_path

    page = render_path((tmp_path / "LAST").read_text().strip())[0].read_text()
    assert "<b>Next:</b>" in page and "<code>make plan TIER=quick RATE=&lt;$/hour&gt;</code>" in page


def test_ingest_says_what_to_capture_next_for_what_it_left_open(tmp_path):
    import contextlib
    import io
    from pathlib import Path

    from suite.__main__ import main as suite_main

    smi = Path(__file__).resolve().parents[1] / "data" / "health" / "nvsmi-q-08-h200-550-healthy.txt"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert suite_main(["ingest", str(smi), "--out", str(tmp_path)]) == 3
    lines = [line for line in err.getvalue().splitlines() if line.startswith("  next: ")]
    assert any("sudo dmesg -T > dmesg.txt" in line and line.endswith("(health.kernel_log)") for line in lines)
    assert any("nvidia-smi topo -m > topo.txt" in line for line in lines)
