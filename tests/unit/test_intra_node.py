"""The bandwidth stage's intra- vs inter-node split on a multi-node run (suite/stages/bandwidth/intra_node.py,
the floors and verdicts in suite/stages/bandwidth/intra_judges.py): the rows' names, the per-node command,
nccl-tests' single-node form driven by stand-in binaries printing real captures (tests/data/nccl-tests/21: one
8-GPU H100 node; 10: two such nodes with 8 HCAs; 22: two 8-GPU EFA nodes), the floors (the link peak within a
node, min(link peak, NICs × line rate) across), the verdicts naming the node, facts['alpha_beta_intra'], the
headline, the figure and make plan."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

from suite.cluster.node_nics import nic_totals, rows_for
from suite.config import GLOO_CPU, NCCL_GPU, get_profile, profile_from_dict
from suite.costmodel.alphabeta import collective_time_s, ring_allreduce_s
from suite.facts import FittedAlphaBeta
from suite.launch.rows import launch_verdicts
from suite.parsers.nccl_tests import parse_file
from suite.results import Row
from suite.stages import _nccl_tests, bandwidth
from suite.stages.bandwidth import intra_judges as _intra_judges
from suite.stages.bandwidth import intra_node as _intra_node
from tests.factories import by_id

from .test_bandwidth_crossover_stages import DATA, GPU_FACTS, FakeContext, stand_in, stand_in_mpirun
from .test_node_nics import A100, HEALTHY

NODES = ("gpu-a", "gpu-b")
TWO = NCCL_GPU.with_overrides(nodes=NODES)  # 2 nodes × 8 H100
H100_NICS = nic_totals(rows_for("gpu-a", HEALTHY, []) + rows_for("gpu-b", HEALTHY, []))
GPU2 = {**GPU_FACTS, "profile": {**TWO.to_dict(), "judge_performance": True}, "node_nics": H100_NICS}
CPU_TWO = get_profile("gloo-cpu", 2).with_overrides(nodes=NODES)  # 2 nodes × 2 ranks
CPU2 = {"profile": CPU_TWO.to_dict()}


def sweep_rows(
    node: str | None, busbw: float, world: int = 8, wrong: float = 0.0, source: str = "torch"
) -> list[Row]:
    """One collective sweep's rows at two sizes (every collective), renamed for `node` (None: the cross-node
    sweep)."""
    rows = []
    for coll in _intra_node.COLLECTIVES:
        for size in (1 << 20, 1 << 30):
            common = dict(
                stage="bandwidth", case=coll, size_bytes=size, placement="ip", source=source, world=world
            )
            rows += [
                Row(metric="busbw", value=busbw * (0.5 if size == 1 << 20 else 1.0), unit="GB/s", **common),
                Row(metric="wrong", value=wrong if coll == "all_gather" else 0.0, unit="count", **common),
            ]
    return _intra_node.relabel(rows, node) if node else rows


def test_names_of_a_nodes_rows_and_who_runs_the_sweep():
    assert _intra_node.intra_case("all_reduce", "gpu-a.cluster") == "intra.all_reduce@gpu-a.cluster"
    assert _intra_node.split_case("intra.nccl-tests.all_reduce@10.0.0.2") == (
        "nccl-tests.all_reduce",
        "10.0.0.2",
    )
    # bandwidth's launch verdicts
    assert _intra_node.intra_case("launch.intra", "gpu-b") == "launch.intra@gpu-b"
    assert (
        _intra_node.split_case("all_reduce") is None and _intra_node.split_case("launch.intra@gpu-b") is None
    )
    failed = _intra_node.relabel(
        [
            Row(
                stage="bandwidth",
                case="launch.intra",
                metric="status",
                value=0.0,
                unit="count",
                source="torchrun",
                text="see raw/bandwidth/intra.rank0.log",
            )
        ],
        "gpu-b",
    )
    assert (
        failed[0].case == "launch.intra@gpu-b" and failed[0].text == "see raw/bandwidth/gpu-b/intra.rank0.log"
    )
    (verdict,) = launch_verdicts("bandwidth", failed)
    assert verdict.id == "bandwidth.launch.intra@gpu-b" and verdict.status == "fail"
    assert _intra_node.node_names(TWO) == list(NODES)
    assert (
        _intra_node.node_names(NCCL_GPU) == []
        and _intra_node.node_names(get_profile("nccl-gpu", 1).with_overrides(nodes=NODES)) == []
    )


def test_every_node_runs_the_sweep_as_one_node_with_its_own_ranks():
    argv = _intra_node.node_argv(TWO, bandwidth.sweep_args(TWO), timeout_s=300, python="py")
    assert argv[:3] == ["py", "-m", "suite.stages.bandwidth.nodesweep"] and argv[5:8] == [
        "--timeout-s",
        "300",
        "--",
    ]
    assert argv[8:] == bandwidth.sweep_args(TWO) and "--probe" not in argv
    seen = profile_from_dict(json.loads(argv[4]))
    assert seen.nodes == () and seen.nproc == 8 and seen.world == 8 and seen.sweep == TWO.sweep


def test_a_node_given_a_broken_profile_says_so_in_one_line(capsys):
    from suite.stages.bandwidth.nodesweep import main

    assert main(["--profile-json", '{"name": "gloo-cpu"', "--", "--sizes", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "suite.stages.bandwidth.nodesweep: --profile-json is not a profile ("
    )


def node_profile(profile):
    """The profile a node's sweep runs with, read back from the command the first node sends it."""
    return profile_from_dict(json.loads(_intra_node.node_argv(profile, [])[4]))


def test_nccl_tests_within_a_node_is_the_single_node_form(tmp_path, monkeypatch):
    """On each node: `mpirun -np 8 --bind-to none` on that node alone (no hostfile, no other node), -g 1; or
    one process -g 8; the rows of both nodes (a real 8-GPU capture) judged complete and at the link."""
    bins, tools = tmp_path / "build", tmp_path / "tools"
    bins.mkdir(), tools.mkdir()
    stand_in(bins, "all_reduce_perf", "21-h100-all_reduce-8gpu-mpirun-tag-output.txt")
    stand_in_mpirun(tools)
    monkeypatch.setenv(_nccl_tests.DIR_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    rows = []
    for node in NODES:
        (tmp_path / node).mkdir()
        rows += _intra_node.relabel(
            _nccl_tests.sweep(node_profile(TWO), FakeContext(tmp_path / node), ["all_reduce"]), node
        )
        words = (tools / "mpirun.args").read_text().split()
        as_root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        # stdbuf -oL before the binary: its lines come as printed, for the time box
        # (suite/launch/nccl_tests_watch.py)
        line_buffered = [shutil.which("stdbuf"), "-oL"] if shutil.which("stdbuf") else []
        assert words == [
            "-np",
            "8",
            "--bind-to",
            "none",
            *as_root,
            *line_buffered,
            str(bins / "all_reduce_perf"),
            "-b",
            "8",
            "-e",
            str(8 << 30),
            "-f",
            "2",
            "-g",
            "1",
            "-w",
            "5",
            "-n",
            "20",
            "-c",
            "1",
        ]
        assert not (tmp_path / node / "hostfile").exists()
        assert (tmp_path / node / "all_reduce_perf.out").read_text() == (
            DATA / "21-h100-all_reduce-8gpu-mpirun-tag-output.txt"
        ).read_text()
    status = {r.case: r.text for r in rows if r.metric == "status"}
    assert sorted(status) == ["intra.nccl-tests.all_reduce@gpu-a", "intra.nccl-tests.all_reduce@gpu-b"]
    assert all(
        t.startswith("complete") and "[mpirun -np 8, -g 1 (one process per GPU)]" in t
        for t in status.values()
    )
    busbw = [r for r in rows if r.metric == "busbw" and r.case == "intra.all_reduce@gpu-b"]
    assert [(r.size_bytes, r.placement, r.value, r.world) for r in busbw] == [
        (1 << 31, "oop", 468.6, 8),
        (1 << 31, "ip", 468.62, 8),
    ]
    v = by_id(
        _intra_judges.judge_nccl_tests(rows, GPU2)
        + _intra_judges.judge_intra_peak(_intra_judges.curves(rows, "nccl-tests"), "nccl-tests", NODES, GPU2)
    )
    assert v["bandwidth.intra_nccl_tests.all_reduce"].status == "pass"
    assert v["bandwidth.intra_peak.all_reduce"].status == "pass"  # 468.6 ≥ 70% × 450 GB/s
    # the nodes' rows are not its own
    assert bandwidth.judge_nccl_tests(rows, GPU2)[0].id == "bandwidth.nccl_tests"
    # the single-process form: no mpirun on the node, the binary drives all 8 GPUs
    single = TWO.with_overrides(sweep=dataclasses.replace(TWO.sweep, nccl_tests_form="single"))
    (tools / "mpirun.args").unlink()
    _nccl_tests.sweep(node_profile(single), FakeContext(tmp_path / "gpu-a"), ["all_reduce"])
    assert not (tools / "mpirun.args").exists()
    assert (bins / "all_reduce_perf.args").read_text().split("\n")[0].split()[6:8] == ["-g", "8"]


def test_nic_totals_count_the_ports_at_the_line_rate():
    """The H100 RoCE node's 8 × 400 Gb/s GPU ports, not its 4 × 100 Gb/s front-end ones; the A100 node's 8 ×
    200."""
    totals = nic_totals(rows_for("h100", HEALTHY, []) + rows_for("a100", A100, []))
    assert totals == {
        "h100": {"nics": 8, "line_gbps": 400.0, "total_gbps": 3200.0},
        "a100": {"nics": 8, "line_gbps": 200.0, "total_gbps": 1600.0},
    }


def test_the_floors_within_and_across_nodes():
    ceiling, basis = _intra_judges.inter_ceiling(GPU2)
    assert ceiling == 400.0 and basis.startswith(
        "the NICs: 8 × 400 Gb/s on node gpu-a = 400 GB/s (below the link peak"
    )
    slow = {**GPU2, "node_nics": {**H100_NICS, "gpu-b": {"nics": 4, "line_gbps": 200.0, "total_gbps": 800.0}}}
    assert _intra_judges.inter_ceiling(slow) == (
        100.0,
        "the NICs: 4 × 200 Gb/s on node gpu-b = 100 GB/s (below the "
        "link peak: " + _intra_judges.link_peak_or_why(GPU2)[0].basis + ")",
    )
    assert (
        _intra_judges.inter_ceiling({"node_nics": {"x": {"nics": 1, "line_gbps": 10.0, "total_gbps": 10.0}}})[
            0
        ]
        == 1.25
    )
    assert _intra_judges.inter_ceiling({})[0] is None
    ex = bandwidth.expect(TWO, GPU2)
    floors = {e.case: e for e in ex if e.metric == "busbw_min"}
    assert len(floors) == 6 * 3  # across nodes, and on each of the two nodes, for every collective
    assert floors["all_reduce"].value == pytest.approx(280.0) and floors["all_reduce"].world == 16
    assert floors["all_reduce"].basis.startswith("inter-node: 70% × the NICs: 8 × 400 Gb/s")
    assert (
        floors["intra.all_reduce@gpu-b"].value == pytest.approx(0.7 * 450)
        and floors["intra.all_reduce@gpu-b"].world == 8
    )
    assert {e.case for e in ex if e.metric == "wrong" and e.case.startswith("intra.")} == {
        f"intra.{c}@{n}" for c in _intra_node.COLLECTIVES for n in NODES
    }
    # one node: exactly the link-peak floors of before, nothing per node
    one = bandwidth.expect(NCCL_GPU, GPU_FACTS)
    assert sorted(e.case for e in one if e.metric == "busbw_min") == sorted(_intra_node.COLLECTIVES)
    assert not [e for e in one if e.case.startswith("intra.")]
    # the CPU rehearsal across nodes: the NICs' floor is still computed (no GPU, so no link peak)
    cpu = bandwidth.expect(
        CPU_TWO, {**CPU2, "node_nics": {n: {"nics": 1, "line_gbps": 10.0, "total_gbps": 10.0} for n in NODES}}
    )
    assert {e.case: e.value for e in cpu if e.metric == "busbw_min"} == {
        c: 0.875 for c in _intra_node.COLLECTIVES
    }


def test_inter_node_sweeps_of_real_clusters_against_their_nics():
    """Two 8-GPU H100 nodes with 8 × 400 Gb/s HCAs (capture 10) reach the NICs' ceiling; two EFA nodes
    (capture 22, 4 × 100 Gb/s each: 50 GB/s, floor 35 GB/s) at 32.8 GB/s (in place) do not, and the verdict
    says which ceiling."""
    h100 = _nccl_tests.rows_from_output(
        parse_file(DATA / "10-h100-all_reduce-2node-16rank-mpi-warnings-interleaved.txt"),
        "all_reduce",
        "bandwidth",
    )
    (v,) = _intra_judges.judge_inter_peak(bandwidth.curves(h100, "nccl-tests"), "nccl-tests", GPU2)
    assert v.id == "bandwidth.inter_peak.all_reduce" and v.status == "pass"
    assert (
        "70% × the NICs: 8 × 400 Gb/s on node gpu-a = 400 GB/s" in v.expected and "469.2 GB/s" in v.observed
    )
    efa = _nccl_tests.rows_from_output(
        parse_file(DATA / "22-efa-all_reduce-16rank-tag-output-error-column.txt"), "all_reduce", "bandwidth"
    )
    p4d = {"node_nics": {n: {"nics": 4, "line_gbps": 100.0, "total_gbps": 400.0} for n in NODES}}
    (v,) = _intra_judges.judge_inter_peak(bandwidth.curves(efa, "nccl-tests"), "nccl-tests", p4d)
    # in place
    assert v.status == "fail" and v.observed == "32.8 GB/s at 1073741824 B across nodes (nccl-tests)"
    assert "busbw ≥ 35.0 GB/s (70% × the NICs: 4 × 100 Gb/s on node gpu-a = 50 GB/s)" == v.expected
    assert "66% of its ceiling" in v.reason and "NCCL_IB_HCA" in v.reason
    assert _intra_judges.judge_inter_peak({}, "torch", {})[0].status == "skip"


def test_gpu_verdicts_name_the_short_node_and_hold_the_cross_node_sweep_to_the_nics():
    rows = sweep_rows(None, 300.0, world=16) + sweep_rows("gpu-a", 400.0) + sweep_rows("gpu-b", 200.0)
    v = by_id(bandwidth.judge(rows, bandwidth.expect(TWO, GPU2), GPU2))
    short = v["bandwidth.intra_peak.all_reduce"]
    assert short.status == "fail" and short.observed == "node gpu-b: 200.0 GB/s at 1073741824 B"
    assert "node(s) gpu-b" in short.reason and "gpu-a" not in short.reason
    assert v["bandwidth.inter_peak.all_reduce"].status == "pass"  # 300 ≥ 70% × 400 GB/s of NICs
    assert "bandwidth.peak.all_reduce" not in v  # the link-peak floor is the single-node run's
    assert (
        v["bandwidth.intra_sweep"].status == "pass"
        and v["bandwidth.intra_wrong.torch.all_gather"].status == "pass"
    )
    rows = sweep_rows(None, 100.0, world=16) + sweep_rows("gpu-a", 400.0) + sweep_rows("gpu-b", 400.0)
    v = by_id(bandwidth.judge(rows, bandwidth.expect(TWO, GPU2), GPU2))
    assert v["bandwidth.intra_peak.all_reduce"].status == "pass"
    assert (
        v["bandwidth.inter_peak.all_reduce"].status == "fail"
        and "the NICs: 8 × 400" in v["bandwidth.inter_peak.all_reduce"].reason
    )


def test_cpu_judges_each_node_exact_and_skips_performance_showing_both_floors():
    cpu_nics = {**CPU2, "node_nics": {n: {"nics": 1, "line_gbps": 10.0, "total_gbps": 10.0} for n in NODES}}
    profile = CPU_TWO
    ex = bandwidth.expect(profile, cpu_nics)
    rows = (
        sweep_rows(None, 0.1, world=4)
        + sweep_rows("gpu-a", 0.2, world=2)
        + sweep_rows("gpu-b", 0.2, 2, wrong=3.0)
    )
    v = by_id(bandwidth.judge(rows, ex, cpu_nics))
    assert v["bandwidth.intra_wrong.torch.all_gather"].status == "fail"
    assert v["bandwidth.intra_wrong.torch.all_gather"].observed.startswith("node gpu-b ")
    assert "gpu-a" not in v["bandwidth.intra_wrong.torch.all_gather"].observed
    assert v["bandwidth.intra_wrong.torch.all_reduce"].status == "pass"
    assert v["bandwidth.performance"].status == "skip"
    assert (
        "inter-node busbw ≥ 0.875 GB/s (70% × the NICs: 1 × 10 Gb/s on node gpu-a = 1.25 GB/s)"
        in v["bandwidth.performance"].expected
    )
    assert not [k for k in v if "peak" in k]
    missing = [r for r in rows if not (r.case.endswith("@gpu-b") and r.case.startswith("intra.broadcast"))]
    v = by_id(bandwidth.judge(missing, ex, cpu_nics))
    assert (
        v["bandwidth.intra_sweep"].status == "fail"
        and v["bandwidth.intra_sweep"].observed == "node gpu-b: missing broadcast"
    )
    one_rank = {"profile": get_profile("gloo-cpu", 1).with_overrides(nodes=NODES).to_dict()}
    assert by_id(_intra_judges.judge([], [], one_rank))["bandwidth.intra_sweep"].status == "skip"
    assert _intra_judges.judge(rows, ex, {"profile": GLOO_CPU.to_dict()}) == []  # one node: nothing of this


def timed(node: str | None, alpha_s: float, beta_Bps: float, n: int) -> list[Row]:
    rows = [
        Row(
            stage="bandwidth",
            case="all_reduce",
            metric="time_us",
            value=ring_allreduce_s(s, n, alpha_s, beta_Bps) * 1e6,
            unit="us",
            size_bytes=s,
            placement="ip",
            source="torch",
            world=n,
        )
        for s in (1 << 16, 1 << 20, 1 << 24)
    ]
    return _intra_node.relabel(rows, node) if node else rows


def test_alpha_beta_intra_is_the_slowest_nodes_fit_shaped_as_alpha_beta():
    rows = timed(None, 20e-6, 10e9, 16) + timed("gpu-a", 5e-6, 400e9, 8) + timed("gpu-b", 6e-6, 300e9, 8)
    rows, across = bandwidth.with_fit(rows, 16)
    rows, intra = _intra_node.with_fit(rows, "mpirun -np 8, -g 1 (one process per GPU)")
    # the whole world
    assert across["alpha_beta"].beta_Bps == pytest.approx(10e9) and across["alpha_beta"].world == 16
    fit = intra["alpha_beta_intra"]
    assert (
        isinstance(fit, FittedAlphaBeta)
        and fit.world == 8
        and fit.source == "torch"
        and fit.nccl_tests_form is None
    )
    assert fit.beta_Bps == pytest.approx(300e9) and fit.alpha_s == pytest.approx(6e-6)
    assert dataclasses.asdict(fit).keys() == dataclasses.asdict(across["alpha_beta"]).keys()
    assert {r.case for r in rows if r.metric == "beta"} == {
        "fit.all_reduce",
        "intra.fit.all_reduce@gpu-a",
        "intra.fit.all_reduce@gpu-b",
    }
    # the stage's own fit verdict: the cross-node one
    assert bandwidth.judge_fit(rows).observed.count("β") == 1
    assert _intra_node.with_fit(timed(None, 5e-6, 1e9, 16))[1] == {}


def test_headline_says_both_and_one_node_as_before():
    rows = sweep_rows(None, 300.0, world=16) + sweep_rows("gpu-a", 400.0) + sweep_rows("gpu-b", 350.0)
    ex = bandwidth.expect(TWO, GPU2)
    assert bandwidth.headline(rows, [], ex) == (
        "all_reduce busbw intra 350 GB/s (slowest of 2 nodes: gpu-b) vs inter "
        "300 GB/s at 1 GiB (torch) · expected intra ≥ 315, inter ≥ 280"
    )
    one = sweep_rows(None, 300.0)
    assert (
        bandwidth.headline(one, [], bandwidth.expect(NCCL_GPU, GPU_FACTS))
        == "all_reduce busbw 300 GB/s at 1 GiB (torch) · expected ≥ 315"
    )


def test_the_split_figure_only_on_a_multi_node_run():
    from suite.stages.bandwidth import figure as bw_fig
    from tests.unit.test_collective_figures import frame_of, rows_to_frame

    rows = sweep_rows(None, 300.0, world=16) + sweep_rows("gpu-a", 400.0) + sweep_rows("gpu-b", 350.0)
    figs = bw_fig.figures(rows_to_frame(rows), frame_of(bandwidth.expect(TWO, GPU2)), GPU2)
    assert len(figs) == 2  # the sweep across nodes (as on one node), then the split
    split = figs[-1]
    axes = [ax for ax in split.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == list(_intra_node.COLLECTIVES)
    labels = [line.get_label() for line in axes[0].get_lines()]
    assert labels == [
        "inter-node (torch)",
        "intra gpu-a",
        "intra gpu-b",
        "inter-node floor",
        "intra-node floor",
    ]
    floors = {line.get_label(): (line.get_linestyle(), line.get_ydata()[0]) for line in axes[0].get_lines()}
    assert (
        floors["inter-node floor"] == ("--", pytest.approx(280.0)) and floors["intra-node floor"][0] == "--"
    )
    one = bw_fig.figures(
        rows_to_frame(sweep_rows(None, 300.0)), frame_of(bandwidth.expect(NCCL_GPU, GPU_FACTS)), GPU_FACTS
    )
    assert len(one) == 1  # no intra rows, no split figure (and no fit rows here)


def test_make_plan_nodes_2_estimates_each_nodes_sweep():
    from suite.plan.hours import PlanAssumptions, plan_inputs

    a = PlanAssumptions(nodes=2)
    p = plan_inputs(NCCL_GPU, a)
    seconds = _intra_node.estimate_s(p)
    launch = a.torchrun_launch_s  # one node's own launch pays no rendezvous
    # 8 GPUs of one node at H100's 450 GB/s NVLink, not the 16 at the NIC's 50 GB/s: torch (1 placement) +
    # nccl-tests (2)
    bus = sum(
        p.repeats * placements * collective_time_s(c, s, 8, a.alpha_s, 450e9)
        for c in _intra_node.COLLECTIVES
        for s in p.sizes
        for placements in (1, 2)
    )
    assert seconds == pytest.approx(launch + 6 * a.nccl_tests_launch_s + bus, rel=1e-9)
    assert _intra_node.estimate_s(plan_inputs(NCCL_GPU, PlanAssumptions())) == 0.0
