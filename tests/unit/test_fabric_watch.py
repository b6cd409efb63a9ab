"""Fabric error counters across every load stage (suite/fabric_watch.py): IB ports read from a sysfs tree laid
out as the kernel lays it out, around two load stages of a real run directory; growth named per port and
attributed to the stage it grew in, or to the gap between two load stages; the rehearsal and ingest read
nothing."""

from __future__ import annotations

from suite import runner
from suite.box_verdict import REJECT, box_verdict
from suite.config import GLOO_CPU, NCCL_GPU
from suite.fabric_watch import FabricWatch
from suite.results import Row
from suite.verdicts import verdicts_for

STAGES = ["health", "bandwidth", "burnin"]


def counters(root, device: str, **values: int) -> None:
    folder = root / device / "ports" / "1" / "counters"
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in values.items():
        (folder / name).write_text(f"{value}\n")


def staged(run, name: str) -> None:
    """What the runner leaves for a finished stage: its rows and verdicts in the run directory."""
    run.replace_stage_rows(name, [Row(stage=name, case="x", metric="m", value=1.0, unit="count")])
    run.replace_stage_verdicts(
        name, [verdicts_for(name).passed("own", expected="e", observed="o", reason="r")]
    )


def test_growth_is_named_per_port_and_attributed_to_its_window(tmp_path):
    ib = tmp_path / "ib"
    counters(ib, "mlx5_0", symbol_error=0, link_downed=0)
    counters(ib, "mlx5_1", symbol_error=5)
    run = runner.start_run(NCCL_GPU, STAGES, tmp_path / "runs")
    watch = FabricWatch(run, frozenset({"bandwidth", "burnin"}), ib_root=ib)
    for name in STAGES:
        watch.before(name)
        staged(run, name)
        if name == "bandwidth":
            counters(ib, "mlx5_0", symbol_error=3)  # during bandwidth
        watch.after(name)
        if name == "bandwidth":
            counters(ib, "mlx5_1", symbol_error=6)  # after bandwidth, before burnin
    verdicts = {v.id: v for v in run.verdicts()}
    assert "health.fabric_window" not in verdicts  # not a load stage: no reading, no verdict
    assert verdicts["bandwidth.own"].status == "pass"  # the stage's own verdicts are kept
    bw, burn = verdicts["bandwidth.fabric_window"], verdicts["burnin.fabric_window"]
    assert bw.status == "fail" and bw.observed == "mlx5_0 port 1 symbol_error +3"
    assert (
        burn.status == "fail"
        and burn.observed == "mlx5_1 port 1 symbol_error between bandwidth and burnin +1"
    )
    rows = [r for r in run.rows() if r.stage == "burnin"]
    assert {r.case for r in rows} == {"x", "fabric_window", "fabric_between"}
    assert (run.path / "raw" / "bandwidth").is_dir()
    assert box_verdict(run.manifest, run.verdicts()).word == REJECT


def test_quiet_counters_pass_and_a_host_without_any_gets_no_verdict(tmp_path):
    ib = tmp_path / "ib"
    counters(ib, "mlx5_0", symbol_error=2)
    run = runner.start_run(NCCL_GPU, STAGES, tmp_path / "runs")
    for root in (ib, tmp_path / "none"):
        watch = FabricWatch(run, frozenset({"bandwidth"}), ib_root=root)
        watch.before("bandwidth")
        staged(run, "bandwidth")
        watch.after("bandwidth")
        got = [v for v in run.verdicts() if v.id == "bandwidth.fabric_window"]
        assert [(v.status, v.observed) for v in got] == (
            [("pass", "1 counters, none grew")] if root == ib else []
        )


def test_the_rehearsal_and_ingest_read_nothing(tmp_path):
    run = runner.start_run(GLOO_CPU, STAGES, tmp_path / "runs")
    assert FabricWatch.for_run(run, GLOO_CPU, None, ["bandwidth"]).load_stages == frozenset()
    assert (
        FabricWatch.for_run(run, NCCL_GPU, {"bandwidth": object()}, ["bandwidth"]).load_stages == frozenset()
    )
    assert FabricWatch.for_run(run, NCCL_GPU, None, ["bandwidth"]).load_stages == {"bandwidth"}
