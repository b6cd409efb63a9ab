"""The fault stage with one process per node (a Slurm job with GPUS_PER_NODE=1, `--nproc 1`): the single-node
drills have no survivor beside the faulted rank, so they are not launched and their checks skip saying why —
not nine failures of drills that could never run."""

from __future__ import annotations

import os
import time

from suite.config import GLOO_CPU, get_profile
from suite.context import StageContext
from suite.progress import Progress
from suite.stages import fault
from suite.stages.fault.judges import too_few_ranks
from suite.verdicts import NOT_APPLICABLE

CHECKS = {
    f"fault.{check}.{s}"
    for s in ("crash", "hang", "exception")
    for check in ("detect", "resume", "loss", "forensics")
}


def test_one_process_launches_no_drill_and_every_check_skips_naming_the_cause(tmp_path):
    profile = get_profile("gloo-cpu", 1)
    raw = tmp_path / "raw" / "fault"
    raw.mkdir(parents=True)
    ctx = StageContext(
        stage="fault",
        profile=profile,
        run_path=tmp_path,
        raw_dir=raw,
        facts={},
        progress=Progress(tmp_path, 1, stream=open(os.devnull, "w")),
        deadline=time.monotonic() + 60,
    )
    rows = fault.run(profile, ctx)
    assert rows == [] and list(raw.iterdir()) == []  # nothing launched, not even the reference
    facts = {"profile": profile.to_dict(), **ctx.published}
    verdicts = fault.judge(rows, fault.expect(profile, facts), facts)
    assert {v.id for v in verdicts} == CHECKS
    for v in verdicts:
        assert v.status == "skip" and v.reason.startswith(NOT_APPLICABLE), v
        assert "1 process per node (--nproc 1)" in v.reason and "2 processes per node" in v.reason, v.reason


def test_too_few_ranks_reads_the_profile_as_drill_ranks_counts():
    assert too_few_ranks(GLOO_CPU) is None  # 4 processes, the drill takes 2
    assert too_few_ranks(get_profile("gloo-cpu", 2)) is None
    two_nodes = get_profile("gloo-cpu", 1).with_overrides(nodes=("node-a", "node-b"))
    assert "1 process per node (GPUS_PER_NODE=1)" in too_few_ranks(two_nodes)


def test_two_processes_per_node_are_still_judged_and_a_missing_drill_fails():
    profile = get_profile("gloo-cpu", 2)
    facts = {"profile": profile.to_dict()}
    verdicts = fault.judge([], fault.expect(profile, facts), facts)
    assert {v.id: v.status for v in verdicts} == {
        f"fault.drill.{s}": "fail" for s in ("crash", "hang", "exception")
    }
