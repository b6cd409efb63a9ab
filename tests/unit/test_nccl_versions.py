"""torch's NCCL and nccl-tests' NCCL are both recorded (suite/hardware/hostprobe.py) and the report says when
they differ."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports.identity import banners
from reports.runview import RunView
from suite.hardware.hostprobe import nccl_tests_versions, nccl_versions_differ

DATA = Path(__file__).resolve().parents[1] / "data"


def image_layout(tmp_path: Path) -> Path:
    """/opt/nccl-tests as the Dockerfile leaves it: bin/*_perf, VERSION, NCCL_VERSION."""
    root = tmp_path / "nccl-tests"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "all_reduce_perf").write_text("#!/bin/sh\n")
    (root / "bin" / "all_reduce_perf").chmod(0o755)
    (root / "VERSION").write_text("v2.19.6\n")
    (root / "NCCL_VERSION").write_text("2.29.7\n")
    return root


def test_versions_come_from_the_folder_the_image_names_or_from_path(tmp_path):
    root = image_layout(tmp_path)
    expected = {"nccl_tests": "v2.19.6", "nccl_tests_nccl": "2.29.7"}
    assert nccl_tests_versions({"CARDTIME_NCCL_TESTS_DIR": str(root / "bin"), "PATH": "/usr/bin"}) == expected
    assert nccl_tests_versions({"PATH": f"/usr/bin:{root / 'bin'}"}) == expected
    (root / "NCCL_VERSION").unlink()
    (root / "VERSION").unlink()  # built by hand: present, but its release and the NCCL it links are unknown
    assert nccl_tests_versions({"PATH": str(root / "bin")}) == {
        "nccl_tests": "unknown",
        "nccl_tests_nccl": None,
    }
    assert nccl_tests_versions({"PATH": str(tmp_path / "empty")}) == {
        "nccl_tests": None,
        "nccl_tests_nccl": None,
    }
    assert (
        nccl_tests_versions({"CARDTIME_NCCL_TESTS_DIR": str(tmp_path / "empty"), "PATH": ""})["nccl_tests"]
        is None
    )


def test_nccl_version_line_of_a_real_nccl_tests_capture_compares_with_torchs():
    text = (DATA / "nccl-tests" / "10-h100-all_reduce-2node-16rank-mpi-warnings-interleaved.txt").read_text()
    (line,) = {ln.strip() for ln in text.splitlines() if ln.strip().startswith("NCCL version ")}
    seen = line.split()[2]
    assert seen == "2.26.2+cuda12.8"
    assert nccl_versions_differ("2.29.7", seen) and not nccl_versions_differ("2.26.2", seen)
    assert not nccl_versions_differ(None, seen) and not nccl_versions_differ("2.29.7", None)


def view(versions: dict) -> RunView:
    manifest = {
        "run_id": "r",
        "finished": "2026-12-01T10:00:00Z",
        "versions": versions,
        "profile": {"device": "cuda", "judge_performance": True},
    }
    return RunView(
        path=Path("r"), manifest=manifest, rows=pd.DataFrame(), expectations=pd.DataFrame(), verdicts=[]
    )


def test_report_says_when_the_two_nccls_differ():
    (banner,) = banners(view({"nccl": "2.29.7", "nccl_tests_nccl": "2.26.2"}))
    assert banner.startswith(
        "torch's NCCL (2.29.7) and the NCCL nccl-tests was built against (2.26.2) differ"
    )
    assert banners(view({"nccl": "2.29.7", "nccl_tests_nccl": "2.29.7"})) == []
    assert banners(view({"nccl": "2.29.7"})) == []


def test_report_first_screen_says_when_the_host_had_no_nccl_tests():
    (banner,) = banners(view({"nccl": "2.29.7", "nccl_tests": None, "nccl_tests_nccl": None}))
    assert banner.startswith("No nccl-tests on this host") and "RUNTIME=docker" in banner
    assert banners(view({"nccl": "2.29.7", "nccl_tests": "unknown", "nccl_tests_nccl": None})) == []
    assert banners(view({"nccl": "2.29.7"})) == []  # a manifest from before the record: nothing claimed
