"""`python -m suite ingest` on real captures (tests/data/): verdicts from the stages' own code, exit codes as
run's."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from reports.identity import banners
from reports.runview import load_run
from suite.__main__ import main as suite_main
from suite.ingest import inputs
from suite.results import RunDir

from .test_traces import DEVICE0, DEVICE1, nsys_db

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "tests/data/topo"
NCCL = REPO / "tests/data/nccl-tests"
H100_NVSWITCH_TOPO = TOPO / "30-h100-8gpu-nv18-8nic-env-dump.txt"
H100_NVSWITCH_ALL_REDUCE = NCCL / "21-h100-all_reduce-8gpu-mpirun-tag-output.txt"  # p5.48xlarge: H100 SXM
RTX4090_PCIE = NCCL / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt"
WRONG = NCCL / "26-dgx-h100-all_reduce-wrong-counts-elided-cut.txt"
ABORTED = NCCL / "17-rtx5090-all_reduce-2gpu-aborted-ncclwarn-test-failure.txt"


@dataclass
class Done:
    returncode: int
    stderr: str


def ingest(tmp_path: Path, *files: Path, args: tuple[str, ...] = ()):
    """The command in this process (one import of torch and the report for every case)."""
    out = tmp_path / "runs"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = suite_main(["ingest", *map(str, files), "--out", str(out), *args])
    done = Done(code, err.getvalue())
    runs = sorted(p for p in out.glob("*") if p.is_dir()) if out.exists() else []  # beside: library.sqlite
    assert len(runs) <= 1, runs
    run = RunDir.load(runs[0]) if runs else None
    verdicts = {v.id: v for v in run.verdicts()} if run else {}
    return done, run, verdicts


def test_a_healthy_nvswitch_box_passes_its_nvlink_peak(tmp_path):
    done, run, v = ingest(
        tmp_path, H100_NVSWITCH_TOPO, H100_NVSWITCH_ALL_REDUCE, args=("--gpu-model", "NVIDIA H100 80GB HBM3")
    )
    assert done.returncode == 3, done.stderr
    peak = v["bandwidth.peak.all_reduce"]
    assert peak.status == "pass" and "NVLink 4" in peak.expected and "315.0 GB/s" in peak.expected
    assert peak.observed.startswith("468.6 GB/s")
    assert v["topology.links"].status == "pass" and v["topology.gpu_count"].status == "pass"
    assert (
        v["topology.tools"].status == "skip"
        and v["topology.tools"].observed == "read from captures: nvidia-smi-topo-m"
    )
    assert v["bandwidth.fit"].status == "skip"  # one size: no line to fit, not a failure
    assert run.manifest["stages_selected"] == ["topology", "bandwidth"]
    assert not [x for x in v.values() if x.status == "fail"]
    assert (run.path / "report.html").exists()


def test_a_pcie_box_is_held_to_pcie(tmp_path):
    done, run, v = ingest(tmp_path, RTX4090_PCIE)
    peak = v["bandwidth.peak.all_reduce"]
    assert "PCIe Gen4 x16" in peak.expected and "31.5 GB/s" in peak.expected and "NVLink" not in peak.expected
    # 8% of the link: the reason says so
    assert peak.status == "fail" and peak.observed.startswith("2.6 GB/s")
    assert "8% of the link" in peak.reason
    assert done.returncode == 1
    assert run.facts()["topology"]["gpus"] == ["NVIDIA GeForce RTX 4090"] * 4  # from nccl-tests' rank lines
    assert run.manifest["profile"]["nproc"] == 4


def test_wrong_elements_fail_with_the_counts(tmp_path):
    done, _, v = ingest(tmp_path, WRONG)
    wrong = v["bandwidth.wrong.nccl-tests.all_reduce"]
    assert wrong.status == "fail" and "524288 B oop: 237858" in wrong.observed
    # the capture stops without its footer and without an error line: the end of the run is open, not a fail
    assert (
        v["bandwidth.nccl_tests.all_reduce"].status == "skip"
        and "no footer" in v["bandwidth.nccl_tests.all_reduce"].reason
    )
    assert done.returncode == 1


def test_an_aborted_run_fails_with_its_reason(tmp_path):
    done, _, v = ingest(tmp_path, ABORTED)
    status = v["bandwidth.nccl_tests.all_reduce"]
    assert status.status == "fail" and "Test NCCL failure common.cu:392" in status.reason
    assert done.returncode == 1


def test_an_unrecognised_file_is_listed_and_skipped_and_inputs_kept_untouched(tmp_path):
    readme = NCCL / "README.md"
    done, run, v = ingest(tmp_path, RTX4090_PCIE, readme)
    lines = [line for line in done.stderr.splitlines() if line.startswith("not used:")]
    assert len(lines) == 1 and str(readme) in lines[0] and "not a tool output ingest reads" in lines[0]
    assert run.manifest["ingested"]["unused"][0]["path"] == str(readme)
    kept = run.manifest["ingested"]["files"]
    assert [k["stage"] for k in kept] == ["bandwidth"]
    assert (run.path / kept[0]["kept_as"]).read_bytes() == RTX4090_PCIE.read_bytes()
    # nothing written elsewhere (the library is the session's: CARDTIME_LIBRARY, tests/conftest.py)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [run.path.name]
    assert done.returncode == 1  # the verdicts decide, not the skipped file


def test_nothing_recognised_is_exit_2_and_no_run(tmp_path):
    done, run, _ = ingest(tmp_path, REPO / "tests/data/cpu", tmp_path / "missing.txt")
    assert done.returncode == 2 and run is None
    lines = [line for line in done.stderr.splitlines() if line.startswith("not used:")]
    # 3 files in tests/data/cpu + missing
    assert len(lines) == 4 and any("no such file" in line for line in lines)
    assert done.stderr.strip().splitlines()[-1].startswith("error: nothing usable among 3 file(s)")


def test_kind_comes_from_content_not_name(tmp_path):
    renamed = [tmp_path / "a.log", tmp_path / "b.dat", tmp_path / "c.bin"]
    for src, dst in zip((H100_NVSWITCH_TOPO, ABORTED, NCCL / "README.md"), renamed):
        shutil.copyfile(src, dst)
    kinds = [None if isinstance(got := inputs.read(p), inputs.Unused) else got[0].kind for p in renamed]
    assert kinds == ["nvidia-smi-topo-m", "nccl-tests", None]
    # the captures' metadata JSON beside them is not an nccl-tests -J report
    assert isinstance(inputs.read(RTX4090_PCIE.with_suffix(".json")), inputs.Unused)


def test_every_capture_in_tests_data_is_claimed_by_its_own_kind():
    topo = sorted(TOPO.glob("*.txt"))
    nccl = sorted(NCCL.glob("*.txt"))
    assert len(topo) >= 15 and len(nccl) >= 13
    for path, kind in [
        (p, "nvidia-smi-topo-p2p" if "-p2p-" in p.name else "nvidia-smi-topo-m") for p in topo
    ] + [(p, "nccl-tests") for p in nccl]:
        got = inputs.read(path)
        claimed = got.why if isinstance(got, inputs.Unused) else got[0].kind
        assert claimed == kind or "does not parse" in claimed, (path.name, claimed)


def test_nccl_algo_is_read_from_the_command_line():
    # the command line of NVIDIA/nccl#1530 (8× RTX 4090), as its author ran it
    assert inputs._algo("NCCL_ALGO=TREE ./all_reduce_perf -g 8 -b 8 -e 128M -f 2") == "TREE"
    assert inputs._algo("x NCCL INFO NCCL_ALGO set by environment to Ring") == "Ring"
    assert inputs._algo(ABORTED.read_text()) is None


def test_an_nsys_export_feeds_the_profile_stage(tmp_path):
    db = nsys_db(tmp_path / "export", DEVICE0 + DEVICE1)  # no suffix: sniffed from its content
    done, run, v = ingest(tmp_path, db)
    assert run.manifest["stages_selected"] == ["profile"]
    rows = [r for r in run.rows() if r.metric == "overlap_us"]
    assert sorted((r.rank, r.value) for r in rows) == [(0, 50.0), (1, 0.0)]
    assert v["profile.traces"].status == "pass", v["profile.traces"]
    assert run.manifest["profile"]["nproc"] == 2


def test_the_command_line_exit_code_and_lines(tmp_path):
    """Once through a real process: the exit code reaches the shell, and the unused file's line is on
    stderr."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite",
            "ingest",
            str(ABORTED),
            str(NCCL / "README.md"),
            "--out",
            str(tmp_path / "runs"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert "not used: " in done.stderr and "Traceback" not in done.stderr


def test_nvidia_smi_q_and_l_of_one_laptop_feed_topology(tmp_path):
    smi = REPO / "tests/data/smi"
    # every capture there is claimed
    kinds = {p.name: inputs.read(p)[0].kind for p in sorted(smi.glob("*.txt"))}
    expected = {
        "quadro-m1000m-q-2018-head.txt": "nvidia-smi-q",
        "quadro-rtx4000-2gpu-L.txt": "nvidia-smi-L",
        "rtx4070-laptop-L.txt": "nvidia-smi-L",
        "rtx4070-laptop-q.txt": "nvidia-smi-q",
        "v100-pcie-q-hami-interleaved-head.txt": "nvidia-smi-q",
    }
    assert {name: kinds[name] for name in expected} == expected
    assert set(kinds.values()) == {"nvidia-smi-q", "nvidia-smi-L"}
    done, run, v = ingest(tmp_path, smi / "rtx4070-laptop-q.txt", smi / "rtx4070-laptop-L.txt")
    assert run.manifest["stages_selected"] == ["health", "topology"]  # -q feeds both
    (banner,) = [b for b in banners(load_run(run.path)) if b.startswith("Judged from")]
    assert banner.startswith("Judged from 2 captured file(s)") and banner.count("rtx4070-laptop-q.txt") == 1
    names = [r.text for r in run.rows() if r.metric == "gpu_name"]
    assert len(names) == 1 and "4070" in names[0]
    assert v["topology.links"].status == "skip"  # no matrix among the files: not judged, not failed
    assert run.manifest["versions"].get("driver")  # the driver -q reports
    assert done.returncode == 3, done.stderr


def test_a_torch_profiler_trace_feeds_the_profile_stage_whatever_its_name(tmp_path):
    """The real Kineto trace of tests/data/traces (rank 0 of a 128-rank NCCL job), renamed: read by
    content."""
    trace = tmp_path / "capture.bin"
    shutil.copyfile(REPO / "tests/data/traces/hta-sampled_rank-0.json.gz", trace)
    done, run, v = ingest(tmp_path, trace, REPO / "tests/data/traces/hta-sampled_rank-0.hta.json")
    assert run.manifest["stages_selected"] == ["profile"]
    pct = [r.value for r in run.rows() if r.metric == "overlap_pct"]
    expected = json.loads((REPO / "tests/data/traces/hta-sampled_rank-0.hta.json").read_text())
    hta = expected["ranks"][0]["comp_comm_overlap_pctg"]  # Holistic Trace Analysis' figure (11.81 %)
    assert len(pct) == 1 and abs(pct[0] - hta) <= 0.5
    assert v["profile.traces"].status == "pass" and v["profile.capture"].observed.startswith("torch.profiler")
    assert "JSON that is none of the kinds" in done.stderr  # the HTA summary beside it: listed, not used


def test_nccl_tests_names_map_onto_the_stages_collectives():
    from suite.ingest.feed import OUR_NAME
    from suite.parsers.nccl_tests import PROGRAMS

    assert OUR_NAME == {
        "all_reduce": "all_reduce",
        "all_gather": "all_gather",
        "reduce_scatter": "reduce_scatter",
        "alltoall": "all_to_all",
        "broadcast": "broadcast",
        "sendrecv": "sendrecv",
    }
    assert set(OUR_NAME) <= set(PROGRAMS)  # every key is a name the parser gives


def test_ring_and_tree_runs_feed_crossover_a_lone_one_is_listed(tmp_path):
    """The routing and the crossover stage's judging of pinned runs. No real NCCL_ALGO-pinned pair is kept in
    tests/data yet (NVIDIA/nccl#1530 posts one, 8× RTX 4090): the rows here are a real capture's (15), which
    this test labels Ring and Tree itself — it checks the machinery, not a measured crossover."""
    from suite.ingest import feed

    def pinned(algo):
        (c,) = inputs.read(RTX4090_PCIE)
        c.stage, c.facts["algo"] = "crossover", algo
        return c

    lone = feed.assign([pinned("Ring")])
    assert not lone.feeds and "without its Tree twin" in lone.unused[0].why
    plan = feed.assign([pinned("Ring"), pinned("Tree")])
    assert [c.facts["algo"] for c in plan.feeds["crossover"]] == ["Ring", "Tree"]
    outcome = feed.build(plan, tmp_path / "runs", [RTX4090_PCIE], None, stream=io.StringIO())
    v = {x.id: x for x in outcome.run.verdicts()}
    assert v["crossover.nccl_tests.Ring"].status == v["crossover.nccl_tests.Tree"].status == "pass"
    assert v["crossover.correct.ring"].status == "skip"  # the hand algorithms are not among the captures
    measured = [r for r in outcome.run.rows() if r.metric == "crossover_bytes" and r.source == "nccl-tests"]
    assert len(measured) == 1 and measured[0].text  # identical curves: no crossover, and the row says so
    assert "crossover.crossover" in v


def test_a_cut_gzip_trace_and_an_unwritable_out_are_one_line_each(tmp_path):
    cut = tmp_path / "rank0.trace.json.gz"
    cut.write_bytes((REPO / "tests/data/traces/gloo-cpu-ddp_rank0.trace.json.gz").read_bytes()[:4000])
    got = inputs.read(cut)
    assert isinstance(got, inputs.Unused) and got.why.startswith(
        "looks like torch profiler trace but does not parse"
    )
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done, _, _ = ingest(tmp_path, RTX4090_PCIE, args=("--out", str(blocker / "runs")))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: cannot write the run directory")


def test_a_file_of_several_tests_gives_one_capture_each(tmp_path):
    """A script looping over binaries prints tests one after another: two real captures concatenated."""
    both = tmp_path / "all_reduce_perf-loop.log"  # the first capture names its program only in its file name
    both.write_text(RTX4090_PCIE.read_text() + "\n" + ABORTED.read_text())
    got = inputs.read(both)
    assert [len(c.data["rows"]) for c in got] == [29, 0]
    assert [c.facts["gpus"][0] for c in got] == ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 5090"]
    assert [c.data["complete"] for c in got] == [True, False]


# ---------------------------------------------------------------- the health stage's captures (issue 15)

HEALTH = REPO / "tests/data/health"
HEALTH_KIND = {
    "nvsmi-q": "nvidia-smi-q",
    "nvlink-s": "nvidia-smi nvlink",
    "dcgmi-nvlink": "nvidia-smi nvlink",
    "ibstat": "ibstat",
    "ibv-devinfo": "ibv_devinfo",
    "dcgmi-diag": "dcgmi diag",
    "xid": "kernel log",
}


def health_verdicts(v: dict) -> dict:
    return {k: x for k, x in v.items() if x.stage == "health"}


def test_every_health_capture_is_claimed_by_its_own_kind():
    files = sorted(HEALTH.glob("*.txt"))
    assert len(files) >= 20
    for path in files:
        kind = next(k for prefix, k in HEALTH_KIND.items() if path.name.startswith(prefix))
        got = inputs.read(path)
        assert not isinstance(got, inputs.Unused), (path.name, got.why)
        # a table cut mid-row: health reads it, marked partial
        if "-cut-" in path.name and kind == "dcgmi diag":
            assert got[0].kind == kind and "closing border" in got[0].facts["partial"], got
            continue
        # the truncated -q: topology reads it, health every block (a cut one marked) and the line
        if "-cut-" in path.name:
            assert got[1].data["complete"] is False and all(g["cut"] for g in got[1].data["gpus"]), got
            assert "line 91" in got[1].facts["why"] and got[1].facts["partial"], got
            continue
        assert {c.kind for c in got} == {kind}, path.name
        assert "health" in {c.stage for c in got}, path.name
    # -q feeds both stages from the one file
    assert [c.stage for c in inputs.read(HEALTH / "nvsmi-q-08-h200-550-healthy.txt")] == [
        "topology",
        "health",
    ]


def test_a_pending_row_remap_fails_naming_the_gpu(tmp_path):
    done, run, v = ingest(tmp_path, HEALTH / "nvsmi-q-02-a10-remapped-rows-pending-535.txt")
    assert done.returncode == 1, done.stderr
    assert run.manifest["stages_selected"] == ["health", "topology"]
    remap = v["health.remapped_rows"]
    assert remap.status == "fail"
    assert "GPU 0 (00000000:07:00.0) row remap pending (4 uncorrectable rows)" in remap.observed
    assert "reset the GPU" in remap.reason
    assert run.facts()["health"]["usable"] == []  # the one GPU is unfit; ingest still judges the rest
    assert "usable_gpus" not in run.facts()
    log = v["health.kernel_log"]
    assert log.status == "skip" and "no kernel log output among the ingested" in log.observed


def test_an_xid_capture_fails_and_what_it_lacks_skips(tmp_path):
    done, run, v = ingest(tmp_path, HEALTH / "xid-01-h100-xe9680-xid119-gsp-timeout.txt")
    assert done.returncode == 1, done.stderr
    assert run.manifest["stages_selected"] == ["health"]
    xid_v = v["health.kernel_log"]
    assert xid_v.status == "fail" and xid_v.observed == "XID 119 ×5 on 0000:9b:00" and "GSP" in xid_v.reason
    hv = health_verdicts(v)
    assert len(hv) == 16
    assert [k for k, x in hv.items() if x.status != "skip"] == ["health.kernel_log"]
    for check in ("pcie_link", "remapped_rows", "nvlink", "dcgm"):
        assert "ingested" in hv[f"health.{check}"].reason, check  # not_captured_skip, not a "not read" fail
    for check in ("measured", "network"):  # a live-only measurement; InfiniBand on a single node
        assert hv[f"health.{check}"].reason.startswith("does not apply to this box: "), check
    assert "health.nvidia_smi" not in hv
    assert (run.path / "raw/health/xid-01-h100-xe9680-xid119-gsp-timeout.txt").read_bytes() == (
        HEALTH / "xid-01-h100-xe9680-xid119-gsp-timeout.txt"
    ).read_bytes()


def test_a_healthy_h200_passes_and_a_port_down_fails_naming_it(tmp_path):
    done, run, v = ingest(
        tmp_path,
        HEALTH / "nvsmi-q-08-h200-550-healthy.txt",
        HEALTH / "nvlink-s-01-a100x8-sxm4-12links-25gbs.txt",
        HEALTH / "ibstat-02-h100-node-roce-port-down-polling.txt",
        HEALTH / "dcgmi-diag-03-a10g-4gpu-dcgm339-r3-targeted-power-fail.txt",
    )
    assert done.returncode == 1, done.stderr
    hv = health_verdicts(v)
    smi_checks = (
        "pcie_link",
        "ecc",
        "remapped_rows",
        "clock_brakes",
        "power_limit",
        "modes",
        "persistence",
        "temperature",
        "fabric",
        "processes",
    )
    assert {c: hv[f"health.{c}"].status for c in smi_checks} == dict.fromkeys(smi_checks, "pass")
    net = hv["health.network"]
    assert net.status == "fail"
    assert "mlx5_11 port 1 Down/Polling" in net.observed and "mlx5_5 port 1 Down/Disabled" in net.observed
    assert hv["health.nvlink"].status == "pass" and hv["health.nvlink"].observed == "96 links at 25 GB/s"
    dcgm_v = hv["health.dcgm"]
    assert dcgm_v.status == "fail" and "Fail - GPU: 1" in dcgm_v.observed
    assert sorted(x for x, y in hv.items() if y.status == "fail") == ["health.dcgm", "health.network"]
    assert set(run.facts()["ingest"]["sources"]) >= {
        "nvidia-smi -q",
        "nvidia-smi nvlink",
        "ibstat",
        "dcgmi diag",
    }


def test_ibv_devinfo_and_a_program_xid_are_read_and_a_second_log_is_listed(tmp_path):
    done, run, v = ingest(
        tmp_path,
        HEALTH / "ibv-devinfo-01-deepep-cx6dx-port-down.txt",
        HEALTH / "xid-02-dmesg-iso-xid13-xid43.txt",
        HEALTH / "xid-03-h100-akash-dmesg-T-xid43-31-94.txt",
    )
    # a program's XID
    assert v["health.kernel_log"].status == "warn" and "XID 13" in v["health.kernel_log"].observed
    lines = [line for line in done.stderr.splitlines() if line.startswith("not used:")]
    assert len(lines) == 1 and "xid-03" in lines[0] and "a second kernel log output for health" in lines[0]
    # its only adapter type has no port up: an unused one, as the live rule reads it
    net = v["health.network"]
    assert net.status == "pass" and "1 port(s) of unused adapter types down" in net.observed, net
    assert run.facts()["health"]["network"]["tool"] == "ibv_devinfo"
    assert done.returncode == 3  # a warning, a pass, checks open: INCONCLUSIVE


def test_a_cut_smi_q_is_judged_on_its_blocks_and_said_partial(tmp_path):
    """`nvidia-smi -q -i 0` of an 8-GPU node ('Attached GPUs : 8', one block): the block is judged, the
    capture is partial (exit 1 without --allow-partial), health.nvidia_smi names file and line, the box is not
    decided."""
    cut = REPO / "tests/data/smi/a100-sxm4-525-q-one-process.txt"
    done, run, v = ingest(tmp_path, cut)
    smi_v = v["health.nvidia_smi"]
    assert smi_v.status == "skip" and "a100-sxm4-525-q-one-process.txt: line 188" in smi_v.reason
    assert "ingest the whole `nvidia-smi -q` output" in smi_v.reason
    # the hung rank
    assert v["health.processes"].status == "fail" and "22374" in v["health.processes"].observed
    assert v["health.pcie_link"].status != "skip"  # judged on the block it holds
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "partial: " in done.stderr and "--allow-partial" in done.stderr
    assert "box verdict: REJECT: " in done.stderr and "health.processes" in done.stderr


def test_resuming_an_interrupted_ingest_judges_its_kept_captures_never_this_machine(tmp_path):
    """An ingest killed in its last stage, then `suite run --resume`d: its stages would run live here and
    judge this laptop as the box (seen: an H100 box REJECTED on topology.gpu_count, the laptop having no GPU).
    The resume judges the unfinished stage from the captures kept under raw/ (the same verdicts as the whole
    ingest gave), and a resume whose captures are gone is refused in one line naming the stage, changing
    nothing."""
    done, run, _ = ingest(
        tmp_path, TOPO / "11-h100-4gpu-nv18-8nic-phb.txt", HEALTH / "nvsmi-q-08-h200-550-healthy.txt"
    )
    assert done.returncode in (0, 3), done.stderr

    def verdicts():
        return {
            (v["id"], v["status"]) for v in json.loads((run.path / "verdicts.json").read_text())["verdicts"]
        }

    whole = verdicts()
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["stages"]["topology"]["status"] == "complete"
    manifest["stages"]["topology"]["status"] = "running"
    (run.path / "manifest.json").write_text(json.dumps(manifest))
    before = {p: p.read_bytes() for p in run.path.rglob("*") if p.is_file()}

    gone = tmp_path / "gone"
    shutil.copytree(run.path, gone)
    shutil.rmtree(gone / "raw" / "topology")
    for kept in (gone / "raw" / "health").iterdir():
        kept.unlink()  # the -q feeds topology too: no copy of it left anywhere
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = suite_main(["run", "--resume", str(gone)])
    assert code == 2 and err.getvalue().count("\n") == 1, err.getvalue()
    assert "no longer holds the captures of topology" in err.getvalue()

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = suite_main(["run", "--resume", str(run.path)])
    assert code in (0, 3), err.getvalue()
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["stages"]["topology"]["status"] == "complete"
    assert verdicts() == whole and len(whole) > 10
    assert "NVIDIA H200" in json.dumps(manifest["facts"]) and not any(
        p.name == "zygote.log" for p in run.path.rglob("*")
    )
    assert (run.path / "raw" / "topology" / "11-h100-4gpu-nv18-8nic-phb.txt").read_bytes() == before[
        run.path / "raw" / "topology" / "11-h100-4gpu-nv18-8nic-phb.txt"
    ]
