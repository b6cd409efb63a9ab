"""The torch sweep's time box on 4 gloo ranks: given 20 s for a sweep that takes a minute, every collective
stops growing at the size whose successor its own time cannot hold, says so in `dropped` rows, and the ranks
agree (the launch ends cleanly: no collective left waiting on a rank that went on)."""

from __future__ import annotations

import pytest

from suite.config import GLOO_CPU
from suite.launch import forklaunch
from suite.workloads.collective_sweep import COLLECTIVES

pytestmark = pytest.mark.dist

SIZES = [8 * 8**i for i in range(9)]  # 8 B → 128 MiB
BUDGET_S = 20.0


def test_every_collective_stops_growing_inside_its_time(tmp_path):
    result = forklaunch.launch(
        GLOO_CPU,
        "suite.workloads.collective_sweep",
        [
            "--sizes",
            ",".join(map(str, SIZES)),
            "--warmup",
            "1",
            "--iters",
            "20",
            "--time-budget-s",
            str(BUDGET_S),
        ],
        raw_dir=tmp_path,
        nproc=4,
        tag="boxed",
        timeout_s=300,
    )
    rows = result.rows()
    dropped = [r for r in rows if r.metric == "dropped"]
    assert dropped and all(r.text.startswith("not run for time") and r.unit == "s" for r in dropped)
    for name in COLLECTIVES:
        ran = sorted({r.size_bytes for r in rows if r.case == name and r.metric == "time_us"})
        cut = sorted({r.size_bytes for r in dropped if r.case == name})
        assert ran, name  # the first two sizes always run (8 B all_gather: fewer elements than ranks, none)
        if cut:  # the sweep stopped growing: nothing measured past the first size dropped
            assert max(ran) < min(cut) and cut == [s for s in SIZES if s >= min(cut)], (name, ran, cut)
    # 128 MiB × 21 calls of six collectives: minutes on gloo
    assert any(r.size_bytes == SIZES[-1] for r in dropped)
