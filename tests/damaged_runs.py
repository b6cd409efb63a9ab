"""Run directories damaged the ways real ones get damaged: a copy cut short, a file overwritten, a killed
stage.

    path = damaged_run(tmp_path / "run", "truncated-manifest")

Each starts as the synthetic run of tests/report_synthetic.py (every record written through
suite.results.RunDir) and then has one file spoiled, as a full disk, an interrupted rsync or a
hand edit would leave it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.report_synthetic import build_run


def cut_in_half(file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def garbage_results(run: Path) -> None:
    (run / "results.parquet").write_bytes(b"this is not parquet\n" * 64)


def unknown_status(run: Path) -> None:
    file = run / "verdicts.json"
    data = json.loads(file.read_text())
    data["verdicts"][0]["status"] = "maybe"
    file.write_text(json.dumps(data))


def unfinished_stage(run: Path) -> None:
    """The bandwidth stage was killed mid-way: the manifest says running, its verdicts never landed."""
    manifest_file = run / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["stages"]["bandwidth"]["status"] = "running"
    manifest["finished"] = None
    manifest_file.write_text(json.dumps(manifest))
    verdicts_file = run / "verdicts.json"
    data = json.loads(verdicts_file.read_text())
    data["verdicts"] = [v for v in data["verdicts"] if v["stage"] != "bandwidth"]
    verdicts_file.write_text(json.dumps(data))


def bad_expectations(run: Path) -> None:
    (run / "expectations.csv").write_text("stage,case\nbandwidth,x\n")


def misshapen_manifest(run: Path) -> None:
    """Valid JSON, wrong shape: a hand edit turned the stages object into a list."""
    file = run / "manifest.json"
    manifest = json.loads(file.read_text())
    manifest["stages"] = list(manifest["stages"])
    file.write_text(json.dumps(manifest))


def nothing_readable(run: Path) -> None:
    cut_in_half(run / "manifest.json")
    cut_in_half(run / "verdicts.json")
    garbage_results(run)
    (run / "expectations.csv").write_bytes(b"\xff\xfe\x00garbage")


DAMAGE = {
    "truncated-manifest": lambda run: cut_in_half(run / "manifest.json"),
    "truncated-verdicts": lambda run: cut_in_half(run / "verdicts.json"),
    "garbage-results": garbage_results,
    "unknown-status": unknown_status,
    "unfinished-stage": unfinished_stage,
    "bad-expectations": bad_expectations,
    "misshapen-manifest": misshapen_manifest,
    "nothing-readable": nothing_readable,
}

# The file each damage spoils: what an error or the report must name.
SPOILED = {
    "truncated-manifest": "manifest.json",
    "truncated-verdicts": "verdicts.json",
    "garbage-results": "results.parquet",
    "unknown-status": "verdicts.json",
    "unfinished-stage": "bandwidth",
    "bad-expectations": "expectations.csv",
    "misshapen-manifest": "manifest.json",
    "nothing-readable": "manifest.json",
}


def damaged_run(path: Path, kind: str, **options) -> Path:
    """The synthetic run at `path` with `kind` (one of DAMAGE; "intact" for none) done to it."""
    build_run(path, **options)
    if kind != "intact":
        DAMAGE[kind](path)
    return path
