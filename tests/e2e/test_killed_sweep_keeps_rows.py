"""A bandwidth stage killed by its timeout mid-sweep keeps every row it measured: a real run of the stage on
4 gloo ranks, its sweep made longer than its timeout (the time box off, so that the kill is the runner's),
then results.parquet holds exactly what the workers had written when the kill came, each row once."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from suite import kept_rows, runner
from suite.config import GLOO_CPU
from suite.launch.torchrun import launch_out_dir
from suite.results import RunDir, _nan_to_none

pytestmark = pytest.mark.dist

# 8 B → 128 MiB by 8, 20 timed iterations: seconds per size at the top on gloo, a minute or more in all;
# the stage is killed at 30 s, after the small sizes (milliseconds each) and before the end.
SLOW = dataclasses.replace(GLOO_CPU.sweep, max_bytes=128 << 20, factor=8, iters=20, time_box=False)
TIMEOUT_S = 30.0


def key(row) -> str:
    return json.dumps(_nan_to_none(row.to_dict()), sort_keys=True)


def test_a_stage_killed_mid_sweep_keeps_its_rows_once(tmp_path):
    profile = GLOO_CPU.with_overrides(sweep=SLOW, stage_timeout_s=TIMEOUT_S, stage_timeouts_s=())
    run = runner.start_run(profile, ["bandwidth"], tmp_path)
    runner.execute(run, profile, stream=io.StringIO())
    run = RunDir.load(run.path)
    assert run.manifest["stages"]["bandwidth"]["status"] == "error"
    verdict = {v.id: v for v in run.verdicts()}["bandwidth.run"]
    assert verdict.status == "fail" and "timed out after 30 s" in verdict.reason
    # the launch in flight was asked before the kill: every rank answered where it was
    found = json.loads((run.path / "raw" / "bandwidth" / "torch.forensics.json").read_text())
    assert found["reason"] == "timeout" and f"Forensics: {found['line']}" in verdict.reason
    assert {r["rank"]: r["heard"] for r in found["rows"] if r["pg"] == "default_pg"} == dict.fromkeys(
        range(GLOO_CPU.nproc), "answered"
    )
    stored = [r for r in run.rows() if r.stage == "bandwidth"]
    assert f"the {len(stored)} rows measured before it are kept" in verdict.reason
    # What the workers had written when the kill came (rank 0's sweep rows, every rank's probe rows), and no
    # more.
    out = launch_out_dir(run.path / "raw" / "bandwidth", "torch")
    written = [
        r
        for path in sorted(out.glob("rows.rank*.jsonl"), key=lambda p: int(p.stem.split("rank")[1]))
        for r in kept_rows.read_lines(path)
    ]
    assert sorted(map(key, stored)) == sorted(map(key, written))
    assert len(set(map(key, stored))) == len(stored)  # no row twice
    busbw = [r for r in stored if r.metric == "busbw" and r.source == "torch"]
    sizes = SLOW.sizes()
    measured = {(r.case, r.size_bytes) for r in busbw}
    assert busbw and ("all_reduce", sizes[0]) in measured  # the sweep had begun …
    # … and not ended (sendrecv: every size; 8 B all_gather etc. skip)
    assert len(measured) < 6 * len(sizes) - 1
    assert run.manifest["stages"]["bandwidth"]["rows"] == len(stored)
