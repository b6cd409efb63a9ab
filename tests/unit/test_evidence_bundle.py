"""The evidence bundle (`python -m suite bundle RUN`): every item accounted for in its manifest, real
captures in it, credentials planted in the environment and in the run's files never in it, host names and
addresses kept or scrubbed by the flag."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from suite.forensics.bundle import make_bundle
from suite.results import RunDir
from tests.factories import verdict

DATA = Path(__file__).resolve().parents[1] / "data"
HF_TOKEN = "hf_PlantedTokenForTheBundleTest0123456789"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTEDKEY"
NODE_ADDR = "10.23.4.56"
NODE_NAME = "gpu-node-17"
ITEMS = {
    "nvidia-bug-report",
    "nvidia-smi-q",
    "nvidia-smi-topo-m",
    "nvidia-smi-nvlink-s",
    "nvidia-smi-nvlink-e",
    "kernel-xid",
    "ib-ports",
    "stage-logs",
    "versions",
    "failed-verdicts",
    "forensics",
}


@pytest.fixture
def failed_run(tmp_path, monkeypatch):
    """A run whose health failed on a real XID capture and whose bandwidth launch hung, with a token in the
    environment, one printed in a rank's log and one in an env file beside it."""
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi, no nvidia-bug-report.sh here
    run = RunDir.create(
        tmp_path / "run",
        {
            "run_id": "r1",
            "stages_selected": ["health", "bandwidth"],
            "stages": {},
            "facts": {},
            "profile": {"name": "nccl-gpu"},
            "host": {"hostname": NODE_NAME},
            "versions": {"driver": "550.54.15", "torch": "2.13.0"},
        },
    )
    run.replace_stage_verdicts("health", [verdict("health.xid", "fail", reason="XID 43 on GPU 0")])
    run.replace_stage_verdicts("bandwidth", [verdict("bandwidth.sweep", "fail", reason="timed out")])
    run.stage_state("health").update(status="complete")
    run.stage_state("bandwidth").update(status="error")
    run.save_manifest()
    health, bandwidth = run.path / "raw" / "health", run.path / "raw" / "bandwidth"
    health.mkdir(parents=True)
    bandwidth.mkdir(parents=True)
    shutil.copy(DATA / "health" / "nvsmi-q-08-h200-550-healthy.txt", health / "nvidia-smi-q.out")
    shutil.copy(DATA / "health" / "xid-03-h100-akash-dmesg-T-xid43-31-94.txt", health / "dmesg.out")
    shutil.copy(DATA / "health" / "ibstat-03-h100-node-all-active.txt", health / "ibstat.out")
    (bandwidth / "rank0.log").write_text(
        f"NCCL INFO Bootstrap : Using eth0:{NODE_ADDR}<0>\nenv: HF_TOKEN={HF_TOKEN}\n"
        f"rank 0 up on {NODE_NAME}\n"
    )
    (bandwidth / "all_reduce_perf.nccl-debug.node.123").write_text(f"{NODE_NAME}:123:123 NCCL INFO ok\n")
    (bandwidth / "job.env").write_text(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\nNCCL_IB_HCA=mlx5_0\n")
    (bandwidth / "forensics.json").write_text(json.dumps({"line": "rank 2 on x never entered all_reduce #6"}))
    return run.path


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        out = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    return {k: gzip.decompress(v) if k.endswith(".gz") else v for k, v in out.items()}


def test_every_item_is_in_the_bundle_or_named_missing_with_its_reason(failed_run):
    path = make_bundle(failed_run)
    inside = members(path)
    book = json.loads(inside["bundle/MANIFEST.json"])
    assert {i["item"] for i in book["items"]} == ITEMS
    for item in book["items"]:
        if item["included"]:
            assert item["files"] and item["source"], item
            assert all(f"bundle/{f}" in inside for f in item["files"]), item
        else:
            assert item["why_missing"], item
    by = {i["item"]: i for i in book["items"]}
    assert "nvidia-bug-report.sh is not on this machine's PATH" in by["nvidia-bug-report"]["why_missing"]
    assert "nvidia-smi is not on this machine's PATH" in by["nvidia-smi-topo-m"]["why_missing"]
    xids = inside["bundle/kernel-xid.txt"].decode().splitlines()
    assert xids and all("Xid" in line for line in xids)
    assert "43" in xids[0]
    assert b"Remapped Rows" in inside["bundle/health.nvidia-smi-q.out.txt"]
    assert "bundle/logs/bandwidth/rank0.log" in inside
    assert "bundle/logs/bandwidth/all_reduce_perf.nccl-debug.node.123" in inside
    assert json.loads(inside["bundle/failed-verdicts.json"])[0]["id"] in ("health.xid", "bandwidth.sweep")
    assert "bundle/forensics/bandwidth.forensics.json" in inside


def test_no_planted_credential_leaves_and_hosts_stay_unless_scrubbed(failed_run):
    kept = members(make_bundle(failed_run))
    everything = b"".join(kept.values())
    assert HF_TOKEN.encode() not in everything
    assert AWS_SECRET.encode() not in everything  # an env file is not a stage log: it is not even packed
    assert json.loads(kept["bundle/MANIFEST.json"])["credentials_removed"] >= 1
    assert NODE_NAME.encode() in everything and NODE_ADDR.encode() in everything
    scrubbed = b"".join(members(make_bundle(failed_run, scrub_hosts=True)).values())
    assert HF_TOKEN.encode() not in scrubbed
    assert NODE_NAME.encode() not in scrubbed and NODE_ADDR.encode() not in scrubbed
    assert b"host-1" in scrubbed and b"addr-1" in scrubbed


def test_a_secret_written_into_a_packed_log_is_redacted_by_its_shape(failed_run):
    log = failed_run / "raw" / "bandwidth" / "rank1.log"
    log.write_text(f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}\nkey id AKIAABCDEFGHIJKLMNOP\n")
    inside = members(make_bundle(failed_run))
    text = inside["bundle/logs/bandwidth/rank1.log"].decode()
    assert AWS_SECRET not in text and "AKIAABCDEFGHIJKLMNOP" not in text
    assert text.count("[redacted]") == 2


def test_the_command_prints_the_manifest_and_refuses_a_folder_that_is_no_run(failed_run, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "suite", "bundle", str(failed_run)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"evidence bundle: {failed_run}/bundle-")
    assert "  - nvidia-bug-report: missing: nvidia-bug-report.sh is not on this machine's PATH" in done.stdout
    assert "  + kernel-xid:" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "suite", "bundle", str(tmp_path)], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "is not a run directory" in bad.stderr


def test_the_reports_first_screen_shows_where_it_stopped_and_the_bundle(tmp_path):
    from reports.report import render_path
    from tests.report_synthetic import build_run

    run = build_run(tmp_path / "run")
    hang = DATA / "forensics" / "stop-rank2-fork.forensics.json"  # a real drill's: rank 2 stopped (SIGSTOP)
    (run / "raw" / "bandwidth").mkdir(parents=True, exist_ok=True)
    shutil.copy(hang, run / "raw" / "bandwidth" / "sweep.forensics.json")
    (run / "raw" / "topology").mkdir(parents=True, exist_ok=True)  # a reading in a stage that did not fail
    shutil.copy(hang, run / "raw" / "topology" / "probe.forensics.json")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["stages"]["bandwidth"]["status"] = "error"  # the stage whose launch hung
    (run / "manifest.json").write_text(json.dumps(manifest))
    made = make_bundle(run, reason="stage failed: bandwidth")
    html = render_path(run)[0].read_text()
    header = html[html.index('<header id="top">') : html.index("</header>")]
    line = json.loads(hang.read_text())["line"]
    assert "rank 2 on" in line and "was stopped" in line
    assert "<b>Where bandwidth stopped</b> (sweep, timed out): " + line.replace("'", "&#39;") in header
    assert f'<a href="{made.name}">{made.name}</a>' in header
    assert header.count("<tr><td>") == 4  # one row a rank in the forensics table
    assert "Where topology stopped" not in header  # a stage that did not fail is not where the run stopped


def test_a_huge_log_keeps_its_head_and_tail_and_says_what_was_left_out(failed_run):
    big = failed_run / "raw" / "bandwidth" / "node-b" / "rank3.log"  # a multi-node run's: raw/<stage>/<node>/
    big.parent.mkdir()
    big.write_bytes(b"first line\n" + b"x" * (20 << 20) + b"\nlast line\n")
    text = members(make_bundle(failed_run))["bundle/logs/bandwidth/node-b/rank3.log"]
    assert text.startswith(b"first line\n") and text.endswith(b"\nlast line\n")
    assert b"bytes left out of the bundle" in text and len(text) < (16 << 20) + 200
