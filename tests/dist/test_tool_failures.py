"""One tool's failure never hides the other's data: the bandwidth stage on the nccl-gpu profile, on a
machine with no CUDA device, where the torch sweep's launch really fails (the NCCL workers find no GPU),
while a stand-in all_reduce_perf (printing a real 4-GPU capture, under a stand-in mpirun) still runs and
its rows are kept, fitted and judged."""

from __future__ import annotations

import io
import time

import pytest

from suite.config import NCCL_GPU
from suite.context import StageContext
from suite.progress import Progress
from suite.stages import _nccl_tests, bandwidth
from tests.unit.test_bandwidth_crossover_stages import stand_in, stand_in_mpirun

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where NCCL workers find no GPU"),
]

FOUR = NCCL_GPU.with_overrides(nproc=4, degrees=(1, 2, 4), omp_threads=1)


def test_a_failed_torch_sweep_keeps_the_nccl_tests_rows(tmp_path, monkeypatch):
    bins, raw, tools = tmp_path / "build", tmp_path / "raw" / "bandwidth", tmp_path / "tools"
    bins.mkdir(), raw.mkdir(parents=True), tools.mkdir()
    stand_in(bins, "all_reduce_perf", "15-rtx4090-all_reduce-4gpu-pcie-docker.txt")
    stand_in_mpirun(tools)
    monkeypatch.setenv(_nccl_tests.DIR_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    ctx = StageContext(
        stage="bandwidth",
        profile=FOUR,
        run_path=tmp_path,
        raw_dir=raw,
        facts={},
        progress=Progress(tmp_path, 1, stream=io.StringIO()),
        deadline=time.monotonic() + 240,
    )
    rows = bandwidth.run(FOUR, ctx)  # before the fix: the torch launch's LaunchError, and no nccl-tests rows
    failed = [r for r in rows if r.case == "launch.torch"]
    assert len(failed) == 1 and "exit code" in failed[0].text and (raw / "torch.launch-error.txt").exists()
    ar = [r for r in rows if r.source == "nccl-tests" and r.case == "all_reduce" and r.metric == "busbw"]
    assert len(ar) == 2 * 29  # out-of-place and in-place rows of the capture
    assert ctx.published["alpha_beta"]["source"] == "nccl-tests"
    assert ctx.published["alpha_beta"]["nccl_tests_form"] == "mpirun -np 4, -g 1 (one process per GPU)"
    verdicts = {v.id: v for v in bandwidth.judge(rows, [], {"profile": FOUR.to_dict()})}
    assert verdicts["bandwidth.launch.torch"].status == "fail"
    assert verdicts["bandwidth.nccl_tests.all_reduce"].status == "pass"
    assert verdicts["bandwidth.torch_sweep"].status == "fail"
