"""The topology stage's run/judge: the CPU face on this machine, the GPU face against nvidia-smi outputs
replayed from real captures (no GPU here), a box without nvidia-smi, the runner, the parse CLI, the figure."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite.config import GLOO_CPU, NCCL_GPU
from suite.context import StageContext
from suite.progress import Progress
from suite.results import rows_to_frame
from suite.stages import topology

REPO = Path(__file__).resolve().parent.parent.parent
DATA = REPO / "tests" / "data"
TWO_GPU = NCCL_GPU.with_overrides(nproc=2, degrees=(1, 2))


def run_stage(profile, tmp_path: Path):
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
    expectations = topology.expect(profile, {})
    verdicts = {
        v.id: v for v in topology.judge(rows, expectations, {"profile": profile.to_dict(), **ctx.published})
    }
    return rows, ctx, verdicts, raw


def by(rows):
    return {(r.case, r.metric): r for r in rows}


# ---------------------------------------------------------------- CPU face


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    return run_stage(GLOO_CPU, tmp_path_factory.mktemp("cpu"))


def test_cpu_rows_match_this_machine(cpu_run):
    rows, ctx, _, raw = cpu_run
    r = by(rows)
    assert r[("cpu", "usable_cpus")].value == len(os.sched_getaffinity(0))
    assert r[("cpu", "logical_cpus")].value == os.cpu_count()
    sysfs = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    if sysfs:
        assert r[("cpu", "numa_nodes")].value == len(sysfs)
        first = (sysfs[0] / "cpulist").read_text().strip()
        assert r[(sysfs[0].name, "numa_cpus")].text == first
    assert ("GPU0-GPU1", "link") not in r  # no GPU face on CPU
    from importlib import metadata

    assert r[("torch", "version")].text == metadata.version("torch")
    assert r[("nccl", "version")].text == "unavailable (not asked on a CPU profile)"
    if shutil.which("lscpu"):
        assert "CPU(s):" in (raw / "lscpu.txt").read_text()
        assert r[("cpu", "cpu_model")].text
    assert json.loads((raw / "commands.json").read_text())["lscpu"]["status"] in ("ok", "missing")


def test_cpu_facts_are_published_small_and_json(cpu_run):
    _, ctx, _, _ = cpu_run
    text = json.dumps(ctx.published)
    assert len(text) < 4000
    assert ctx.published["topology"]["usable_cpus"] == len(os.sched_getaffinity(0))
    assert ctx.published["versions"]["torch"]


def test_cpu_judge_skips_gpu_checks_with_the_reason(cpu_run):
    _, _, v, _ = cpu_run
    assert v["topology.cpu"].status == "pass"
    for check in ("tools", "links", "numa", "gpu_count", "torch_cuda_devices", "fabric"):
        assert v[f"topology.{check}"].status == "skip"
        assert "runs on CPU" in v[f"topology.{check}"].reason
    assert v["topology.cpu_threads"].status == "skip"


# ---------------------------------------------------------------- GPU face, replayed


def fake_smi(bin_dir: Path, topo: str, query: str, listing: str, p2p: dict[str, Path] | None = None) -> None:
    """An `nvidia-smi` on PATH that prints real captured outputs for topo -m, -q and -L, and for `topo -p2p
    r|w` the files given (any other command, `-p2p` without a file included, exits 9 as an unknown option
    does)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    p2p_lines = "".join(f'  "topo -p2p {mode}") cat "{path}";;\n' for mode, path in (p2p or {}).items())
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in\n'
        f'  "topo -m") cat "{topo}";;\n'
        f'  "-q") cat "{query}";;\n'
        f'  "-L") cat "{listing}";;\n'
        f"{p2p_lines}"
        '  *) echo "unexpected: $*" >&2; exit 9;;\n'
        "esac\n"
    )
    script.chmod(0o755)


def test_gpu_face_on_replayed_nvidia_smi(tmp_path, monkeypatch):
    topo_file = DATA / "topo" / "23-rtx5090-2gpu-phb-gpu-numa-id.txt"
    query_file = DATA / "smi" / "rtx4070-laptop-q.txt"
    list_file = DATA / "smi" / "quadro-rtx4000-2gpu-L.txt"
    fake_smi(tmp_path / "bin", topo_file, query_file, list_file)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    rows, ctx, v, raw = run_stage(TWO_GPU, tmp_path / "run")
    r = by(rows)
    # raw outputs kept untouched
    assert (raw / "nvidia-smi-topo-m.txt").read_bytes() == topo_file.read_bytes()
    assert (raw / "nvidia-smi-q.txt").read_bytes() == query_file.read_bytes()
    # one row per GPU pair, names, affinity, PCIe from -q, versions from -q
    assert (r[("GPU0-GPU1", "link")].text, r[("GPU0-GPU1", "link")].value) == ("PHB", 0)
    assert r[("GPU1", "gpu_name")].text == "Quadro RTX 4000"
    assert r[("GPU1", "cpu_affinity")].text == "0-63" and r[("GPU1", "cpu_affinity")].value == 64
    assert r[("GPU0", "numa_node")].value == 0
    assert r[("GPU0", "pcie_gen_max")].value == 4 and r[("GPU0", "link_width_max")].value == 8
    assert r[("driver", "version")].text == "566.36" and r[("cuda_driver", "version")].text == "12.7"
    assert r[("gpus", "gpu_count")].value == 2
    published = ctx.published["topology"]
    assert published["gpu_model"] == "Quadro RTX 4000" and published["link_class"] == "PCIe"
    # per GPU for the ring's hops
    assert published["links"] == {"GPU0-GPU1": "PHB"} and published["pcie"] == {
        "gen_max": 4,
        "width_max": 8,
        "per_gpu": {"GPU0": {"gen": 4, "width": 8}},
    }
    assert ctx.published["versions"]["driver"] == "566.36"
    json.dumps(ctx.published)
    # verdicts
    assert v["topology.tools"].status == "pass"
    assert v["topology.links"].status == "pass"
    assert v["topology.gpu_count"].status == "pass"
    assert v["topology.fabric"].status == "skip"  # the 4070 reports Fabric N/A
    # this nvidia-smi answers no `topo -p2p`: the P2P check is open and says why; `tools` still passes
    assert r[("nvidia-smi-topo-p2p-r", "tool_status")].text.startswith("failed: exit 9")
    assert "p2p" not in published and "exit 9: unexpected: topo -p2p r" in published["p2p_why"]
    assert v["topology.p2p"].status == "skip" and "exit 9" in v["topology.p2p"].reason
    assert "bandwidth holds every pair to its direct link" in v["topology.p2p"].reason
    # this torch is a CPU build: it sees no CUDA device, and the stage says so before any measurement
    assert v["topology.torch_cuda_devices"].status == "fail"
    assert "CPU build" in v["topology.torch_cuda_devices"].reason
    # nccl-gpu runs 2 processes × 8 threads: judged against the CPUs this machine gives us
    assert v["topology.cpu_threads"].status == ("pass" if len(os.sched_getaffinity(0)) >= 16 else "warn")


def test_gpu_face_without_nvidia_smi_is_recorded_not_a_crash(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if shutil.which("lscpu"):
        (bin_dir / "lscpu").symlink_to(shutil.which("lscpu"))
    monkeypatch.setenv("PATH", str(bin_dir))
    rows, ctx, v, raw = run_stage(TWO_GPU, tmp_path / "run")
    r = by(rows)
    assert r[("nvidia-smi-topo-m", "tool_status")].text == "missing: nvidia-smi: not on PATH"
    assert math.isnan(r[("nvidia-smi-topo-m", "tool_status")].value)
    assert v["topology.tools"].status == "fail" and "--gpus all" in v["topology.tools"].reason
    assert v["topology.links"].status == "skip"
    assert v["topology.gpu_count"].status == "fail"
    assert "nvidia-smi reports 0" in v["topology.gpu_count"].reason


P2P_GNS = DATA / "topo" / "40-rtx5090-2gpu-p2p-rw-gns.txt"  # 2× RTX 5090, GNS both ways (its topo -m: 23)
TOPO_5090 = DATA / "topo" / "23-rtx5090-2gpu-phb-gpu-numa-id.txt"


def replay(tmp_path, monkeypatch, p2p: dict[str, Path]):
    fake_smi(
        tmp_path / "bin",
        TOPO_5090,
        DATA / "smi" / "rtx4070-laptop-q.txt",
        DATA / "smi" / "quadro-rtx4000-2gpu-L.txt",
        p2p,
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return run_stage(TWO_GPU, tmp_path / "run")


def test_live_p2p_is_read_kept_and_judged_as_ingest_judges_it(tmp_path, monkeypatch):
    """`topo -p2p r` and `-p2p w` answered with the real GNS capture: both kept untouched, the pair published
    without P2P, topology.p2p warns; the facts bandwidth's floor reads are those `suite ingest` builds from
    the same captures, so the ring over that pair is held to the host-staged floor live exactly as
    ingested."""
    from suite.facts import link_peak_or_why
    from suite.ingest.feed import topology_rows
    from suite.ingest.inputs import Capture

    rows, ctx, v, raw = replay(tmp_path, monkeypatch, {"r": P2P_GNS, "w": P2P_GNS})
    for mode in "rw":
        assert (raw / f"nvidia-smi-topo-p2p-{mode}.txt").read_bytes() == P2P_GNS.read_bytes()
    live = ctx.published["topology"]
    assert live["p2p"] == {"GPU0-GPU1": "GNS"} and "p2p_why" not in live
    assert v["topology.p2p"].status == "warn" and "GPU0-GPU1 GNS" in v["topology.p2p"].observed
    assert "host memory" in v["topology.p2p"].reason and v["topology.tools"].status == "pass"
    caps = [
        Capture(path, kind, "topology", path.read_text())
        for kind, path in [
            ("nvidia-smi-topo-p2p", P2P_GNS),
            ("nvidia-smi-topo-m", TOPO_5090),
            ("nvidia-smi-q", DATA / "smi" / "rtx4070-laptop-q.txt"),
            ("nvidia-smi-L", DATA / "smi" / "quadro-rtx4000-2gpu-L.txt"),
        ]
    ]
    ingested = topology_rows(caps)[1]["topology"]
    # the GPU facts, all alike
    assert ingested == {
        k: val
        for k, val in live.items()
        if k not in ("cpu_model", "logical_cpus", "usable_cpus", "numa_nodes")
    }
    # the p2p capture's box (this -L names another card: the model is set alike)
    model = "NVIDIA GeForce RTX 5090"
    peaks = [link_peak_or_why({"topology": {**facts, "gpu_model": model}}) for facts in (live, ingested)]
    assert peaks[0] == peaks[1] and peaks[0][0].staged and "no P2P (GPU0-GPU1 GNS)" in peaks[0][0].basis


def test_p2p_merges_read_and_write_and_says_what_it_could_not_read(tmp_path, monkeypatch):
    """Read P2P OK but write GNS: the pair is without P2P (its writes are staged). Only `-p2p r` answering:
    its pairs judged, the `w` failure said beside them. A `-p2p` printing something else: open,
    `unreadable`."""
    ok = tmp_path / "ok.txt"
    ok.write_text(P2P_GNS.read_text().replace("GNS\t", "OK\t"))
    rows, ctx, v, _ = replay(tmp_path / "a", monkeypatch, {"r": ok, "w": P2P_GNS})
    assert ctx.published["topology"]["p2p"] == {"GPU0-GPU1": "GNS"} and v["topology.p2p"].status == "warn"
    rows, ctx, v, _ = replay(tmp_path / "b", monkeypatch, {"r": ok})
    assert ctx.published["topology"]["p2p"] == {"GPU0-GPU1": "OK"} and v["topology.p2p"].status == "pass"
    assert "topo -p2p w` failed: exit 9" in ctx.published["topology"]["p2p_why"]
    rows, ctx, v, _ = replay(tmp_path / "c", monkeypatch, {"r": TOPO_5090, "w": TOPO_5090})
    assert "p2p" not in ctx.published["topology"] and v["topology.p2p"].status == "skip"
    assert "nvidia-smi-topo-p2p-r: unreadable" in v["topology.p2p"].reason


def test_fabric_not_up_fails(tmp_path, monkeypatch):
    query = (
        (DATA / "smi" / "rtx4070-laptop-q.txt")
        .read_text()
        .replace(
            "        State                             : N/A\n        Status                            : "
            "N/A",
            "        State                             : In Progress\n        Status                         "
            "   : N/A",
        )
    )
    assert "In Progress" in query
    (tmp_path / "q.txt").write_text(query)
    fake_smi(
        tmp_path / "bin",
        DATA / "topo" / "23-rtx5090-2gpu-phb-gpu-numa-id.txt",
        tmp_path / "q.txt",
        DATA / "smi" / "quadro-rtx4000-2gpu-L.txt",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    _, _, v, _ = run_stage(TWO_GPU, tmp_path / "run")
    assert v["topology.fabric"].status == "fail" and "nvidia-fabricmanager" in v["topology.fabric"].reason


# ---------------------------------------------------------------- through the runner and the CLI


def test_runner_records_the_topology_stage(tmp_path):
    last = tmp_path / "LAST"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite",
            "run",
            "--profile",
            "gloo-cpu",
            "--stages",
            "topology",
            "--out",
            str(tmp_path),
            "--record-last",
            str(last),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = Path(last.read_text().strip())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stages"]["topology"]["status"] == "complete"
    assert manifest["facts"]["topology"]["usable_cpus"] >= 1
    assert manifest["versions"]["torch"]
    statuses = {v["id"]: v["status"] for v in json.loads((run_dir / "verdicts.json").read_text())["verdicts"]}
    assert statuses["topology.cpu"] == "pass" and statuses["topology.links"] == "skip"
    frame = pd.read_parquet(run_dir / "results.parquet")
    assert set(frame[frame["stage"] == "topology"]["metric"]) >= {"logical_cpus", "usable_cpus", "numa_nodes"}
    assert (run_dir / "raw" / "topology" / "commands.json").exists()


def test_parse_cli_prints_json_and_rejects_bad_input(tmp_path):
    good = DATA / "topo" / "01-dgx1-v100-8gpu-mlx5.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "suite", "parse", "topo", str(good), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["links"]["GPU0-GPU3"] == "NV2" and data["cpu_affinity"]["GPU4"] == "12-23,36-47"
    # DGX-1: the pairs without NVLink cross the CPUs (SYS): a warning to place groups by, never a fail
    assert {v["id"]: v["status"] for v in data["verdicts"]} == {
        "topology.links": "pass",
        "topology.numa": "warn",
    }

    bad = tmp_path / "bad.txt"
    bad.write_text(
        (DATA / "topo" / "05-a100-pcie-2gpu-node-1nic.txt")
        .read_text()
        .replace("GPU1    NODE     X      NODE    32-63   1", "GPU1    NODE     X")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "suite", "parse", "topo", str(bad), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "line 4" in lines[0] and "GPU1" in lines[0]


def test_figure_is_the_link_matrix_and_empty_on_cpu(cpu_run):
    from suite.parsers.topo import nvlink_count, parse
    from suite.results import Row
    from suite.stages.topology.figure import figures

    rows, _, _, _ = cpu_run
    assert figures(rows_to_frame(rows), pd.DataFrame(), {}) == []

    t = parse((DATA / "topo" / "01-dgx1-v100-8gpu-mlx5.txt").read_text())
    link_rows = [
        Row(stage="topology", case=p, metric="link", value=nvlink_count(l), unit="count", text=l)
        for p, l in t.links.items()
    ]
    figs = figures(
        rows_to_frame(link_rows), pd.DataFrame(), {"topology": {"gpu_model": "Tesla V100-SXM2-16GB"}}
    )
    assert len(figs) == 1
    ax = figs[0].axes[0]
    cells = {(round(txt.get_position()[1]), round(txt.get_position()[0])): txt.get_text() for txt in ax.texts}
    assert (
        cells[(0, 3)] == "NV2" and cells[(3, 0)] == "NV2" and cells[(0, 5)] == "SYS" and cells[(7, 7)] == "X"
    )
    assert "Tesla V100-SXM2-16GB" in ax.get_title()
