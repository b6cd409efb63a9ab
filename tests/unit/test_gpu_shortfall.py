"""Issue 12 item 13: too few usable GPUs after topology skips the GPU stages at once (runner on a fake
topology)."""

from __future__ import annotations

import io

from suite import runner
from suite.config import get_profile
from suite.results import Row
from suite.stages.topology import usable_gpus

STAGES = ["topology", "bandwidth", "crossover"]


def topology_found(count: int, need: int):
    """The topology stage as it ends on a box where nvidia-smi and torch see `count` GPUs (no GPU here:
    fed)."""
    rows = [
        Row(stage="topology", case="gpus", metric="gpu_count", value=count, unit="count", source="nvidia-smi")
    ]
    return runner.fed(
        rows, {"usable_gpus": usable_gpus(count, count, need, None if count else "no CUDA driver")}
    )


def run_with(tmp_path, count: int, *, keep_going: bool = False):
    profile = get_profile("nccl-gpu", 2)
    run = runner.start_run(profile, STAGES, tmp_path)
    produce = {"topology": topology_found(count, 2), "bandwidth": runner.fed([]), "crossover": runner.fed([])}
    return runner.execute(run, profile, stream=io.StringIO(), keep_going=keep_going, produce=produce)


def test_no_usable_gpu_skips_the_gpu_stages_with_the_reason(tmp_path):
    outcome = run_with(tmp_path, 0)
    after = [v for v in outcome.run.verdicts() if v.stage in ("bandwidth", "crossover")]
    assert [(v.stage, v.id, v.status) for v in after] == [
        ("bandwidth", "bandwidth.run", "skip"),
        ("crossover", "crossover.run", "skip"),
    ]
    assert all("topology found 0 usable GPU(s), the profile needs 2" in v.observed for v in after)
    assert "--keep-going" in after[0].reason
    first = outcome.summary().splitlines()[0]
    assert first.startswith("2 GPU stage(s) skipped: topology found 0 usable GPU(s)")
    assert outcome.run.manifest["gpu_stages_skipped"]["stages"] == ["bandwidth", "crossover"]


def test_keep_going_runs_them_anyway(tmp_path):
    outcome = run_with(tmp_path, 0, keep_going=True)
    ids = {v.id for v in outcome.run.verdicts() if v.stage == "bandwidth"}
    assert len(ids) > 1 and "bandwidth.run" not in ids  # judged on (empty) rows, not skipped
    assert "GPU stage(s) skipped" not in outcome.summary()


def test_enough_gpus_skip_nothing(tmp_path):
    outcome = run_with(tmp_path, 2)
    assert not [v for v in outcome.run.verdicts() if v.id.endswith(".run") and v.status == "skip"]
    assert "gpu_stages_skipped" not in outcome.run.manifest


def test_usable_gpus_is_what_both_nvidia_smi_and_torch_see():
    got = usable_gpus(8, 0, 8, "torch is a CPU build")
    assert got["count"] == 0 and got["need"] == 8
    assert got["why"] == "nvidia-smi shows 8, torch sees 0: torch is a CPU build"
    assert runner.gpu_shortfall({"usable_gpus": got}, get_profile("nccl-gpu", 8)).startswith(
        "topology found 0"
    )
    assert runner.gpu_shortfall({"usable_gpus": got}, get_profile("gloo-cpu")) is None
