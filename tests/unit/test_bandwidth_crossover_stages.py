"""The bandwidth and crossover stages' pure parts: expectations, fits, verdicts, and the nccl-tests adapter
driven by stand-in binaries that print real captured outputs (the GPU face's plumbing, on a CPU)."""

from __future__ import annotations

import dataclasses
import math
import os
import stat
from pathlib import Path

import pytest

from suite.config import GLOO_CPU, NCCL_GPU, ProfileError
from suite.costmodel.alphabeta import crossover_bytes, ring_allreduce_s, tree_allreduce_s
from suite.facts import link_peak_or_why
from suite.results import Row
from suite.stages import _alphabeta_fit as alphabeta_fit
from suite.stages import _nccl_tests, bandwidth, crossover
from tests.factories import by_id

from .topo_boxes import box_facts

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
GPU_FACTS = box_facts("30-h100-8gpu-nv18-8nic-env-dump", "NVIDIA H100 80GB HBM3")  # NV18 on all 28 pairs
CPU_FACTS = {"profile": GLOO_CPU.to_dict()}


def row(**kw) -> Row:
    base = dict(
        stage="bandwidth",
        case="all_reduce",
        metric="busbw",
        value=1.0,
        unit="GB/s",
        source="torch",
        placement="ip",
        world=8,
    )
    return Row(**{**base, **kw})


# ---------------------------------------------------------------- bandwidth


def test_link_peak_from_the_topology_facts():
    peak, _ = link_peak_or_why(GPU_FACTS)
    assert peak.per_gpu_GBps == 450.0 and "H100" in peak.basis and peak.kind == "nvlink"
    pcie = box_facts("14-rtx4090-8gpu-sys-2nic", "NVIDIA GeForce RTX 4090")
    assert link_peak_or_why(pcie)[0].per_gpu_GBps == 31.5
    assert link_peak_or_why({})[0] is None


def test_expectations_use_the_model_and_the_link_peak():
    ex = bandwidth.expect(NCCL_GPU, GPU_FACTS)
    floor = [e for e in ex if e.metric == "busbw_min" and e.case == "all_reduce"][0]
    assert floor.value == pytest.approx(0.7 * 450.0)
    t = [e for e in ex if e.metric == "time_us" and e.case == "all_reduce" and e.size_bytes == 1 << 30][0]
    assert t.value == pytest.approx(ring_allreduce_s(1 << 30, 8, 5e-6, 450e9) * 1e6)
    # a fit published earlier wins over the defaults
    ex2 = bandwidth.expect(GLOO_CPU, {"alpha_beta": {"alpha_s": 1e-4, "beta_Bps": 1e8, "source": "torch"}})
    t2 = [e for e in ex2 if e.metric == "time_us" and e.case == "broadcast" and e.size_bytes == 8][0]
    assert t2.value == pytest.approx((1e-4 + 8 / 1e8) * 1e6)


def test_fit_recovers_alpha_and_beta_from_exact_times():
    alpha, beta, n = 7e-6, 150e9, 8
    rows = [
        row(metric="time_us", size_bytes=s, value=ring_allreduce_s(s, n, alpha, beta) * 1e6)
        for s in (2**k for k in range(3, 31, 3))
    ]
    fits = alphabeta_fit.fit_rows(rows, n)
    got = {r.metric: r.value for r in fits}
    assert got["alpha"] == pytest.approx(7.0) and got["beta"] == pytest.approx(150.0)
    assert got["rms_rel_residual"] < 1e-9
    published = alphabeta_fit.pick_fit(fits)
    assert published.alpha_s == pytest.approx(alpha) and published.beta_Bps == pytest.approx(beta)
    assert published.source == "torch" and published.world == n


def sweep_rows(busbw_by_size, source="torch", wrong=0):
    p = "oop" if source == "nccl-tests" else "ip"
    rows = []
    for coll in bandwidth.COLLECTIVES:
        for size, value in busbw_by_size.items():
            rows += [
                row(case=coll, size_bytes=size, value=value, source=source, placement=p),
                row(
                    case=coll,
                    metric="wrong",
                    unit="count",
                    size_bytes=size,
                    value=wrong,
                    source=source,
                    placement=p,
                ),
                row(
                    case=coll,
                    metric="time_us",
                    unit="us",
                    size_bytes=size,
                    value=size / value / 1e3,
                    source=source,
                    placement=p,
                ),
            ]
    return rows


GOOD = {1 << 20: 100.0, 1 << 24: 300.0, 1 << 28: 380.0, 1 << 30: 400.0}


def test_gpu_verdicts_on_a_healthy_sweep():
    rows = sweep_rows(GOOD) + sweep_rows(GOOD, source="nccl-tests")
    rows += alphabeta_fit.fit_rows(rows, 8)
    v = by_id(bandwidth.judge(rows, bandwidth.expect(NCCL_GPU, GPU_FACTS), GPU_FACTS))
    assert v["bandwidth.peak.all_reduce"].status == "pass"
    assert v["bandwidth.dip.torch.all_gather"].status == "pass"
    assert v["bandwidth.torch_vs_nccl.sendrecv"].status == "pass"
    assert v["bandwidth.wrong.nccl-tests.broadcast"].status == "pass"
    assert v["bandwidth.fit"].status == "pass" and "nccl-tests" in v["bandwidth.fit"].observed


def test_gpu_verdicts_catch_low_peak_dips_wrong_and_a_slow_harness():
    # 200 → 140 is a 30% dip; 250 < 315
    slow = {
        1 << 20: 100.0,
        1 << 24: 200.0,
        1 << 28: 140.0,
        1 << 30: 250.0,
    }
    rows = sweep_rows(slow, wrong=0) + sweep_rows(GOOD, source="nccl-tests", wrong=3)
    v = by_id(bandwidth.judge(rows, [], GPU_FACTS))
    assert v["bandwidth.peak.all_reduce"].status == "pass"  # judged on nccl-tests, which reaches the link
    assert (
        v["bandwidth.dip.torch.all_reduce"].status == "warn"
        and "→" in v["bandwidth.dip.torch.all_reduce"].observed
    )
    assert v["bandwidth.torch_vs_nccl.all_reduce"].status == "warn"
    assert v["bandwidth.wrong.nccl-tests.all_reduce"].status == "fail"
    only_torch = by_id(bandwidth.judge(sweep_rows(slow), [], GPU_FACTS))
    assert only_torch["bandwidth.peak.all_reduce"].status == "fail"
    assert only_torch["bandwidth.torch_vs_nccl"].status == "skip"


def test_cpu_judges_correctness_and_skips_performance():
    rows = sweep_rows({8: 0.001, 1 << 20: 0.5}, wrong=0)
    rows[1] = row(case="all_reduce", metric="wrong", unit="count", size_bytes=8, value=2)
    v = by_id(bandwidth.judge(rows, [], CPU_FACTS))
    assert v["bandwidth.wrong.torch.all_reduce"].status == "fail"
    assert v["bandwidth.wrong.torch.all_gather"].status == "pass"
    assert v["bandwidth.performance"].status == "skip"
    assert v["bandwidth.performance"].reason == "CPU numbers say nothing about GPUs"
    assert v["bandwidth.nccl_tests"].status == "skip"
    assert not any(k.startswith("bandwidth.peak") for k in v)


def test_a_collective_missing_from_the_sweep_fails():
    rows = [r for r in sweep_rows(GOOD) if r.case != "all_to_all"]
    v = by_id(bandwidth.judge(rows, [], CPU_FACTS))
    assert v["bandwidth.torch_sweep"].status == "fail" and "all_to_all" in v["bandwidth.torch_sweep"].observed


# ---------------------------------------------------------------- the nccl-tests adapter with stand-in
# binaries


class FakeContext:
    stage = "bandwidth"

    def __init__(self, raw_dir: Path) -> None:
        self.raw_dir = raw_dir
        self.said = []

    def say(self, message, done=None, of=None):
        self.said.append(message)

    def time_left(self):
        return 60.0


def stand_in(directory: Path, program: str, capture: str, code: int = 0) -> Path:
    """An executable `program` that prints a real capture and records its arguments."""
    path = directory / program
    path.write_text(
        f'#!/bin/sh\necho "$@" > {directory}/{program}.args\necho "NCCL_ALGO=$NCCL_ALGO" >> '
        f"{directory}/{program}.args\ncat {DATA / capture}\necho oops >&2\nexit {code}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def stand_in_mpirun(directory: Path) -> Path:
    """An `mpirun` that records its arguments and runs the program after its options once (the capture
    the program prints already holds every rank's lines)."""
    path = directory / "mpirun"
    path.write_text(
        f'#!/bin/sh\necho "$@" > {directory}/mpirun.args\n'
        'while [ $# -gt 0 ]; do case "$1" in -np|--bind-to|-x) shift 2;; --allow-run-as-root) shift;; *) '
        "break;; esac; done\n"
        'exec "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


FOUR = NCCL_GPU.with_overrides(nproc=4, degrees=(1, 2, 4))  # the 4-GPU box the all_reduce capture comes from


def test_nccl_tests_sweep_runs_finds_parses_and_reports(tmp_path, monkeypatch):
    bins, raw, tools = tmp_path / "build", tmp_path / "raw", tmp_path / "tools"
    bins.mkdir(), raw.mkdir(), tools.mkdir()
    stand_in(bins, "all_reduce_perf", "15-rtx4090-all_reduce-4gpu-pcie-docker.txt")
    stand_in(bins, "reduce_scatter_perf", "05-a100-reduce_scatter-2021fmt-validation0-zero-size-rows.txt")
    # a real, cut broadcast
    stand_in(bins, "broadcast_perf", "27-v100-broadcast-2node-tcp-validation0-cut.txt", code=1)
    stand_in_mpirun(tools)
    monkeypatch.setenv(_nccl_tests.DIR_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    ctx = FakeContext(raw)
    rows = _nccl_tests.sweep(
        FOUR,
        ctx,
        ["all_reduce", "reduce_scatter", "broadcast", "all_to_all"],
        algo="Ring",
        env={"NCCL_ALGO": "Ring"},
    )
    # NVIDIA's multi-process form by default: mpirun -np 4, one GPU per process, NCCL_ALGO exported to every
    # rank
    as_root = ["--allow-run-as-root"] if os.geteuid() == 0 else []  # root: Open MPI's consent (see below)
    assert (tools / "mpirun.args").read_text().split()[: 6 + len(as_root)] == [
        "-np",
        "4",
        "--bind-to",
        "none",
        *as_root,
        "-x",
        "NCCL_ALGO",
    ]
    args = (bins / "all_reduce_perf.args").read_text().split("\n")
    assert args[0].split() == [
        "-b",
        "8",
        "-e",
        str(8 * 1024**3),
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
    assert args[1] == "NCCL_ALGO=Ring"
    assert (raw / "all_reduce_perf.NCCL_ALGO-Ring.out").read_text() == (
        DATA / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt"
    ).read_text()
    assert (raw / "all_reduce_perf.NCCL_ALGO-Ring.err").read_text() == "oops\n"
    ar = [r for r in rows if r.case == "all_reduce" and r.metric == "busbw" and r.placement == "oop"]
    assert len(ar) == 29 and ar[-1].value == 2.59 and ar[-1].source == "nccl-tests" and ar[-1].world == 4
    assert all(r.algo == "Ring" for r in rows)
    rs_wrong = [r for r in rows if r.case == "reduce_scatter" and r.metric == "wrong"]
    assert rs_wrong == []  # N/A: not checked (-c 0), so no wrong rows
    status = {r.case: r.text for r in rows if r.metric == "status"}
    assert status["nccl-tests.all_reduce"].startswith("complete")
    assert (
        status["nccl-tests.broadcast"].startswith("incomplete")
        and "no footer" in status["nccl-tests.broadcast"]
    )
    bc = [r for r in rows if r.case == "broadcast" and r.metric == "time_us"]
    assert [(r.size_bytes, r.root, r.placement, r.value) for r in bc] == [
        (8, 0, "oop", 45.82),
        (8, 0, "ip", 38.17),
    ]
    assert not [r for r in rows if r.case == "broadcast" and r.metric == "wrong"]  # -c 0: N/A, not checked
    assert (
        status["nccl-tests.all_to_all"].startswith("missing")
        and "alltoall_perf not found" in status["nccl-tests.all_to_all"]
    )
    # the verdicts built from those rows (bandwidth's judge reads status rows without an algo)
    plain = [Row(**{**r.to_dict(), "algo": None}) for r in rows]
    v = by_id(bandwidth.judge_nccl_tests(plain, GPU_FACTS))
    assert v["bandwidth.nccl_tests.all_reduce"].status == "pass"
    assert v["bandwidth.nccl_tests.broadcast"].status == "fail"
    assert (
        v["bandwidth.nccl_tests.all_to_all"].status == "skip"
        and _nccl_tests.DIR_ENV in v["bandwidth.nccl_tests.all_to_all"].reason
    )


def test_nccl_tests_single_process_form_and_what_goes_wrong_with_mpi(tmp_path, monkeypatch):
    bins, raw, tools = tmp_path / "build", tmp_path / "raw", tmp_path / "tools"
    bins.mkdir(), raw.mkdir(), tools.mkdir()
    stand_in(bins, "all_reduce_perf", "15-rtx4090-all_reduce-4gpu-pcie-docker.txt")
    monkeypatch.setenv(_nccl_tests.DIR_ENV, str(tmp_path))
    # a PATH with the stand-ins' one tool and no mpirun, whatever this machine has
    plain = tmp_path / "plain-bin"
    plain.mkdir()
    (plain / "cat").symlink_to(__import__("shutil").which("cat"))
    monkeypatch.setenv("PATH", str(plain))
    # no mpirun: a status row that names the way out, and nothing run
    rows = _nccl_tests.sweep(FOUR, FakeContext(raw), ["all_reduce"])
    status = [r.text for r in rows if r.metric == "status"]
    assert status[0].startswith("missing: mpirun not found") and 'nccl_tests_form = "single"' in status[0]
    assert not (bins / "all_reduce_perf.args").exists()
    # the single-process form: the binary itself, -g 4, and the status says which form ran
    single = FOUR.with_overrides(sweep=dataclasses.replace(FOUR.sweep, nccl_tests_form="single"))
    rows = _nccl_tests.sweep(single, FakeContext(raw), ["all_reduce"])
    assert (bins / "all_reduce_perf.args").read_text().split("\n")[0].split()[6:8] == ["-g", "4"]
    status = [r.text for r in rows if r.metric == "status"]
    assert status[0].startswith("complete") and "[one process, -g 4]" in status[0]
    # mpirun starting copies of a binary built without MPI: each is its own one-rank job
    stand_in(bins, "all_reduce_perf", "20-rtx5090-all_reduce-1gpu-overflowing-column.txt")
    stand_in_mpirun(tools)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    rows = _nccl_tests.sweep(FOUR, FakeContext(raw), ["all_reduce"])
    status = [r.text for r in rows if r.metric == "status"]
    assert (
        status[0].startswith("incomplete")
        and "make MPI=1" in status[0]
        and "[mpirun -np 4, -g 1" in status[0]
    )
    with pytest.raises(ProfileError, match="nccl_tests_form"):
        dataclasses.replace(FOUR.sweep, nccl_tests_form="threads")


def test_profile_arguments_replace_the_defaults():
    prof = NCCL_GPU.with_overrides(
        sweep=NCCL_GPU.sweep.__class__(nccl_tests_args=("-b", "1M", "-e", "1G", "-g", "4"))
    )
    assert _nccl_tests.perf_args(prof) == ["-b", "1M", "-e", "1G", "-g", "4"]


# ---------------------------------------------------------------- crossover


def test_crossover_expectations_carry_the_model_prediction():
    facts = {"alpha_beta": {"alpha_s": 5e-6, "beta_Bps": 200e9, "source": "nccl-tests"}}
    ex = crossover.expect(NCCL_GPU, facts)
    cross = [e for e in ex if e.metric == "crossover_bytes"][0]
    assert cross.value == pytest.approx(crossover_bytes(8, 5e-6, 200e9))
    tree = [e for e in ex if e.algo == "tree" and e.size_bytes == 4096][0]
    assert tree.value == pytest.approx(tree_allreduce_s(4096, 8, 5e-6, 200e9) * 1e6)
    two = crossover.expect(NCCL_GPU.with_overrides(nproc=2, degrees=(1, 2)), facts)
    assert math.isnan([e for e in two if e.metric == "crossover_bytes"][0].value)


def test_measured_crossover():
    tree = {8: 1.0, 64: 2.0, 512: 10.0, 4096: 80.0}
    ring = {8: 3.0, 64: 4.0, 512: 6.0, 4096: 20.0}
    size, what = crossover.measured_crossover(tree, ring)
    assert size == pytest.approx(math.sqrt(64 * 512)) and "ring from 512 B" in what
    assert crossover.measured_crossover(ring, tree)[0] is None  # "tree" slower first: no tree→ring crossing
    assert crossover.measured_crossover({8: 1.0}, {8: 2.0}) == (None, "tree faster at every size")


def hand_rows(n, alpha, beta, sizes):
    rows = []
    for s in sizes:
        for algo, model in (("ring", ring_allreduce_s), ("tree", tree_allreduce_s)):
            rows.append(
                Row(
                    stage="crossover",
                    case=algo,
                    metric="time_us",
                    value=model(s, n, alpha, beta) * 1e6,
                    unit="us",
                    size_bytes=s,
                    source="hand",
                    algo=algo,
                    world=n,
                    placement="ip",
                )
            )
    return rows


def test_analysis_finds_the_model_crossover_from_model_times():
    n, alpha, beta = 8, 5e-6, 200e9
    predicted = crossover_bytes(n, alpha, beta)
    rows = hand_rows(n, alpha, beta, [2**k for k in range(3, 31)])
    out = crossover.analysis_rows(rows, n)
    measured = [r for r in out if r.metric == "crossover_bytes" and r.source == "hand"][0]
    fitted = [r for r in out if r.metric == "crossover_bytes_fit" and r.source == "hand"][0]
    assert predicted / 2 <= measured.value <= predicted * 2  # between the two sizes around it
    assert fitted.value == pytest.approx(predicted, rel=1e-6)


def test_crossover_verdicts():
    ex = crossover.expect(NCCL_GPU, {"alpha_beta": {"alpha_s": 5e-6, "beta_Bps": 200e9, "source": "x"}})
    predicted = [e for e in ex if e.metric == "crossover_bytes"][0].value
    near = Row(
        stage="crossover",
        case="crossover",
        metric="crossover_bytes",
        value=predicted * 3,
        unit="bytes",
        source="hand",
        text="",
    )
    far = Row(**{**near.to_dict(), "value": predicted * 20})
    ok = by_id(crossover.judge([near], ex, GPU_FACTS))["crossover.crossover"]
    bad = by_id(crossover.judge([far], ex, GPU_FACTS))["crossover.crossover"]
    assert ok.status == "pass" and bad.status == "warn" and "20.0×" in bad.observed
    # NCCL's Ring/Tree crossover 20× away is a measured fact beside the model, never held to it
    nccl = Row(
        **{**far.to_dict(), "source": "nccl-tests", "text": "tree faster up to 65536 B, ring from 131072 B"}
    )
    v = by_id(crossover.judge([near, nccl], ex, GPU_FACTS))
    assert v["crossover.crossover"].status == "pass"  # judged from the hand ring/tree only
    assert (
        v["crossover.nccl"].status == "pass"
        and f"{predicted * 20:.3g} B (nccl-tests" in v["crossover.nccl"].observed
    )
    assert "chain" in v["crossover.nccl"].reason and "NVIDIA/nccl#919" in v["crossover.nccl"].reason
    assert by_id(crossover.judge([near], ex, GPU_FACTS))["crossover.nccl"].status == "skip"
    cpu = by_id(crossover.judge([far], ex, CPU_FACTS))
    assert cpu["crossover.crossover"].status == "skip"
    assert cpu["crossover.correct.ring"].status == "fail"  # no hand rows at all: nothing was checked


def test_correctness_and_byte_verdicts():
    base = dict(
        stage="crossover", source="hand", world=3, size_bytes=20, count=5, unit="count", placement="ip"
    )
    rows = [
        Row(case="ring", metric="wrong", value=0, algo="ring", **base),
        Row(case="tree", metric="wrong", value=1, algo="tree", **base),
    ]
    from suite.costmodel.alphabeta import ring_allreduce_bytes, tree_allreduce_bytes

    for rank in range(3):
        s, r = ring_allreduce_bytes(5, 3, 4, rank)
        rows += [
            Row(case="ring.bytes", metric="bytes_sent", value=s, rank=rank, algo="ring", **base),
            Row(case="ring.bytes", metric="bytes_received", value=r, rank=rank, algo="ring", **base),
        ]
        s, r = tree_allreduce_bytes(5, 3, 4, rank)
        rows += [
            Row(
                case="tree.bytes",
                metric="bytes_sent",
                value=s + (4 if rank == 2 else 0),
                rank=rank,
                algo="tree",
                **base,
            )
        ]
    v = by_id(crossover.judge(rows, [], CPU_FACTS))
    assert v["crossover.correct.ring"].status == "pass"
    assert v["crossover.correct.tree"].status == "fail"
    assert v["crossover.bytes.ring"].status == "pass"
    assert v["crossover.bytes.tree"].status == "fail" and "rank 2" in v["crossover.bytes.tree"].observed


def test_find_binary_prefers_the_env_dir_then_path(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for d in (a, b):
        p = d / "sendrecv_perf_mpi"
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    env = {_nccl_tests.DIR_ENV: str(a), "PATH": str(b)}
    assert _nccl_tests.find_binary("sendrecv_perf", env) == a / "sendrecv_perf_mpi"
    assert _nccl_tests.find_binary("sendrecv_perf", {"PATH": str(b)}) == b / "sendrecv_perf_mpi"
    assert _nccl_tests.find_binary("alltoall_perf", {"PATH": str(b)}) is None


def test_crossover_reports_each_nccl_algo_run():
    rows = [
        _nccl_tests.status_row("crossover", "all_reduce", "complete", "ran to its footer", "Ring"),
        _nccl_tests.status_row("crossover", "all_reduce", "missing", "all_reduce_perf not found", "Tree"),
    ]
    v = by_id(crossover.judge(rows, [], GPU_FACTS))
    assert v["crossover.nccl_tests.Ring"].status == "pass"
    assert (
        v["crossover.nccl_tests.Tree"].status == "skip"
        and "not found" in v["crossover.nccl_tests.Tree"].reason
    )


def test_a_fit_with_infinite_beta_is_not_published():
    flat = [row(metric="time_us", size_bytes=s, value=100.0 - s * 1e-9) for s in (8, 1024, 1 << 20)]
    fits = alphabeta_fit.fit_rows(flat, 4)
    assert [r.value for r in fits if r.metric == "beta"] == [math.inf]
    assert alphabeta_fit.pick_fit(fits) is None


def test_one_gpu_skips_the_link_verdicts():
    rows = [Row(**{**r.to_dict(), "world": 1}) for r in sweep_rows(GOOD)]
    v = by_id(bandwidth.judge(rows, [], GPU_FACTS))
    assert v["bandwidth.performance"].status == "skip" and "one GPU" in v["bandwidth.performance"].reason
    assert not any(k.startswith("bandwidth.peak") for k in v)


def test_one_rank_gives_no_fit_and_a_skip_not_a_crash():
    # found by tests/gpu/device_check.sh --cpu: with one rank 2(n−1) = 0 and the fit divided by it
    rows = [row(metric="time_us", size_bytes=s, value=3.0 + s / 1e9, world=1) for s in (8, 64, 512)]
    assert alphabeta_fit.fit_rows(rows, 1) == []
    v = bandwidth.judge_fit(rows)
    assert v.status == "skip" and "one rank" in v.observed
    assert bandwidth.judge_fit([]).status == "fail"  # no timings at all is still a failure


def test_one_rank_sweep_is_complete_without_sendrecv():
    rows = [row(case=c, world=1) for c in bandwidth.COLLECTIVES if c != "sendrecv"]
    assert bandwidth.judge_coverage(rows).status == "pass"  # one rank has no peer to send to
    rows = [row(case=c, world=4) for c in bandwidth.COLLECTIVES if c != "sendrecv"]
    assert bandwidth.judge_coverage(rows).status == "fail"


def test_mpirun_on_one_box_as_root_asks_for_open_mpis_consent(tmp_path, monkeypatch):
    """Open MPI refuses root ("mpirun has detected an attempt to run as root") unless told; a root login on a
    host run (RUNTIME=host: a container pod, a VM) has no OMPI_ALLOW_RUN_AS_ROOT as the CUDA image has."""
    tools = tmp_path / "tools"
    tools.mkdir()
    stand_in_mpirun(tools)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    for uid, want in ((0, ["--allow-run-as-root"]), (1000, [])):
        monkeypatch.setattr(_nccl_tests.os, "geteuid", lambda uid=uid: uid)
        words, why = _nccl_tests.launcher(FOUR)
        assert why == "" and words[1:] == ["-np", "4", "--bind-to", "none", *want]
