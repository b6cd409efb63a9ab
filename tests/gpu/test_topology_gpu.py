"""The topology stage's GPU face on a real GPU box (skipped without CUDA).

.venv/bin/python -m pytest -q -m gpu tests/gpu/test_topology_gpu.py
"""

from __future__ import annotations

import io
import shutil

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs nvidia-smi"),
]


def test_topology_stage_on_this_gpu_box(tmp_path):
    from suite.config import NCCL_GPU
    from suite.context import StageContext
    from suite.progress import Progress
    from suite.stages import topology

    n = torch.cuda.device_count()
    profile = NCCL_GPU.with_overrides(nproc=n, degrees=tuple(d for d in (1, 2, 4, 8) if d <= n))
    raw = tmp_path / "raw" / "topology"
    raw.mkdir(parents=True)
    ctx = StageContext(
        stage="topology",
        profile=profile,
        run_path=tmp_path,
        raw_dir=raw,
        facts={},
        progress=Progress(tmp_path, 1, stream=io.StringIO()),
    )
    rows = topology.run(profile, ctx)
    by = {(r.case, r.metric): r for r in rows}
    assert by[("gpus", "gpu_count")].value == n
    assert by[("gpus", "torch_cuda_devices")].value == n
    assert len([r for r in rows if r.metric == "link"]) == n * (n - 1) // 2
    assert by[("GPU0", "gpu_name")].text == torch.cuda.get_device_name(0)
    versions = ctx.published["versions"]
    assert versions["driver"] and versions["cuda"] == torch.version.cuda and versions["nccl"]
    assert (raw / "nvidia-smi-topo-m.txt").stat().st_size > 0 and (
        raw / "nvidia-smi-q.txt"
    ).stat().st_size > 0
    # the card every stage sizes to: -q's FB total, within what torch sees plus the driver's reserve
    card = ctx.published["topology"]["gpu_memory_bytes"]
    smallest = min(torch.cuda.get_device_properties(i).total_memory for i in range(n))
    assert 0.9 * card <= smallest <= 1.05 * card, (card, smallest)
    # P2P read and write, kept and merged into pairs (a driver without `-p2p` says why instead)
    topo = ctx.published["topology"]
    if "p2p" in topo:
        assert len(topo["p2p"]) == n * (n - 1) // 2 and (raw / "nvidia-smi-topo-p2p-w.txt").stat().st_size > 0
    else:
        assert topo["p2p_why"]
    verdicts = {
        v.id: v
        for v in topology.judge(
            rows, topology.expect(profile, {}), {"profile": profile.to_dict(), **ctx.published}
        )
    }
    for check in ("tools", "gpu_count", "torch_cuda_devices"):
        assert verdicts[f"topology.{check}"].status == "pass", verdicts[f"topology.{check}"]
    print({k: (v.status, v.observed) for k, v in verdicts.items()})
