"""A synthetic but realistic run directory for the report tests, written through suite.results.RunDir.

It does not depend on which stage modules exist: every record is written directly. It holds what a
report must survive: a hostname and a GPU name carrying markup, every verdict status, a stage that
crashed with a multi-line log tail, a stage that never ran, repeats (the comparison's noise), a raw
file whose name holds markup, and an unfinished-looking profile of 8 GPUs.

    run = build_run(tmp_path / "run-a", hostname="<script>alert(1)</script>")
"""

from __future__ import annotations

import math
from pathlib import Path

from suite.config import GLOO_CPU, NCCL_GPU
from suite.results import Expectation, Row, RunDir, Verdict

HOSTILE_HOST = "<script>alert(1)</script>"
HOSTILE_GPU = 'NVIDIA H100 <img src=x onerror="alert(2)"> 80GB'
SIZES = [2**k for k in range(2, 23, 2)]  # 4 B → 4 MiB, ×4
COLLECTIVES = ("all_reduce", "all_gather")


def busbw(size: int, collective: str, scale: float, repeat: int) -> float:
    """A plausible curve: α = 20 µs, β = 150 GB/s × scale; repeats wobble by ±1%."""
    alpha_s, beta = 20e-6, 150e9 * scale
    factor = 2 * 7 / 8 if collective == "all_reduce" else 7 / 8
    t = alpha_s + size / beta
    return size / t / 1e9 * factor * (1 + 0.01 * ((repeat % 3) - 1))


_BUILT: dict[tuple, Path] = {}


def build_run(path: Path, **options) -> Path:
    """The synthetic run at `path` (a copy of an identical one built earlier in this process, when there is
    one)."""
    import atexit
    import json
    import shutil
    import tempfile

    key = tuple(sorted(options.items()))
    if key not in _BUILT:
        cache = Path(tempfile.mkdtemp(prefix="cardtime-synthetic-"))
        atexit.register(shutil.rmtree, cache, True)
        _BUILT[key] = write_run(cache / "run", **options)
    shutil.copytree(_BUILT[key], path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["run_id"] = path.name
    (path / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return path


def write_run(
    path: Path,
    *,
    hostname: str = HOSTILE_HOST,
    gpu: bool = True,
    bandwidth_scale: float = 1.0,
    commit: str = "0123456789abcdef0123456789abcdef01234567",
    bandwidth_code: str = "bw-code-1",
    repeats: int = 3,
) -> Path:
    profile = NCCL_GPU if gpu else GLOO_CPU
    selected = ["topology", "bandwidth", "crossover", "dp", "fault"]
    manifest = {
        "run_id": path.name,
        "profile": profile.to_dict(),
        "profile_name": profile.name,
        "git": {"commit": commit, "dirty": False},
        "host": {
            "hostname": hostname,
            "platform": "Linux-6.8.0-x86_64-with-glibc2.36",
            "python": "3.11.2",
            "cpus": 224,
        },
        "versions": {"torch": "2.13.0", "cardtime": "0.1.0"},
        "stages_selected": selected,
        "stages": {name: {"status": "pending", "attempt": 0} for name in selected},
        "facts": {},
        "started": "2026-11-29T16:30:00+00:00",
        "finished": "2026-11-29T17:42:10+00:00",
    }
    run = RunDir.create(path, manifest)

    def complete(
        stage: str, start: str, end: str, rows: list[Row], code: str, status: str = "complete"
    ) -> None:
        run.stage_state(stage).update(
            status=status, attempt=1, start=start, end=end, rows=len(rows), stage_code=code
        )

    # topology: GPU facts and versions, as the topology stage publishes them
    names = [HOSTILE_GPU] + ["NVIDIA H100 80GB HBM3"] * 7
    run.facts().update(
        {
            "topology": {
                "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
                "gpus": names,
                "gpu_model": None,
                "numa_nodes": {"0": "0-55", "1": "56-111"},
            }
        }
    )
    run.manifest["versions"].update({"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5"})
    topo_rows = [
        Row(stage="topology", case=f"GPU{i}-GPU{j}", metric="link", value=18.0, unit="count", text="NV18")
        for i in range(8)
        for j in range(i + 1, 8)
    ]
    run.replace_stage_rows("topology", topo_rows)
    run.replace_stage_verdicts(
        "topology",
        [
            Verdict(
                id="topology.links",
                stage="topology",
                status="pass",
                expected="NV18 between every pair",
                observed="NV18 × 28 pairs",
                reason="every GPU pair is joined by 18 NVLinks",
            ),
            Verdict(
                id="topology.gpu_name",
                stage="topology",
                status="warn",
                expected="one GPU model",
                observed=HOSTILE_GPU,
                reason=f"GPU 0 reports {HOSTILE_GPU}; the others NVIDIA H100 80GB HBM3",
            ),
        ],
    )
    (run.raw_dir("topology") / "nvidia-smi-topo-m.txt").write_text("\tGPU0\tGPU1\nGPU0\t X \tNV18\n")
    (run.raw_dir("topology") / "<i>odd & name.log").write_text("a raw file whose name holds markup\n")
    complete(
        "topology", "2026-11-29T16:30:01+00:00", "2026-11-29T16:30:09+00:00", topo_rows, "topology-code-1"
    )

    # bandwidth: a sweep with repeats, and the 70%-of-peak expectation
    rows, expectations = [], []
    for collective in COLLECTIVES:
        for size in SIZES:
            for repeat in range(repeats):
                bw = busbw(size, collective, bandwidth_scale, repeat)
                rows.append(
                    Row(
                        stage="bandwidth",
                        case=collective,
                        metric="busbw",
                        value=bw,
                        unit="GB/s",
                        size_bytes=size,
                        dtype="float32",
                        placement="oop",
                        source="nccl-tests",
                        world=8,
                        repeat=repeat,
                    )
                )
                rows.append(
                    Row(
                        stage="bandwidth",
                        case=collective,
                        metric="time",
                        value=size / (bw * 1e3) + 20.0,
                        unit="us",
                        size_bytes=size,
                        dtype="float32",
                        placement="oop",
                        source="nccl-tests",
                        world=8,
                        repeat=repeat,
                    )
                )
        expectations.append(
            Expectation(
                stage="bandwidth",
                case=collective,
                metric="busbw",
                value=315.0,
                unit="GB/s",
                basis="70% of NVLink 4 × 18 links (450 GB/s)",
                size_bytes=SIZES[-1],
                world=8,
            )
        )
    run.replace_stage_expectations("bandwidth", expectations)
    run.replace_stage_rows("bandwidth", rows)
    run.replace_stage_verdicts(
        "bandwidth",
        [
            Verdict(
                id=f"bandwidth.peak.{c}",
                stage="bandwidth",
                status="fail",
                expected="busbw ≥ 315 GB/s at 4 MiB",
                observed=f"{busbw(SIZES[-1], c, bandwidth_scale, 1):.1f} GB/s",
                reason="large-message busbw below 70% of "
                "the NVLink peak: check `nvidia-smi topo -m` for SYS links and NCCL_P2P_DISABLE",
            )
            for c in COLLECTIVES
        ]
        + [
            Verdict(
                id="bandwidth.wrong",
                stage="bandwidth",
                status="pass",
                expected="#wrong = 0",
                observed="0",
                reason="every result validated",
            )
        ],
    )
    (run.raw_dir("bandwidth") / "all_reduce_perf.txt").write_text("# nThread 1 nGpus 1\n#  size count\n")
    complete("bandwidth", "2026-11-29T16:30:09+00:00", "2026-11-29T16:52:40+00:00", rows, bandwidth_code)

    # crossover: expectations and rows with an algo parameter; a skip
    rows = [
        Row(
            stage="crossover",
            case="all_reduce",
            metric="time",
            value=30.0 + math.log2(s) * (1 if algo == "ring" else 1.4),
            unit="us",
            size_bytes=s,
            algo=algo,
            world=8,
            repeat=0,
        )
        for s in SIZES
        for algo in ("ring", "tree")
    ]
    run.replace_stage_expectations(
        "crossover",
        [
            Expectation(
                stage="crossover",
                case="all_reduce",
                metric="crossover_bytes",
                value=262144.0,
                unit="bytes",
                basis="α-β: ring 2(n−1)(α+S/(nβ)) = tree 2⌈log₂n⌉(α+S/β), α=20 µs β=150 GB/s",
                world=8,
            )
        ],
    )
    run.replace_stage_rows("crossover", rows)
    run.replace_stage_verdicts(
        "crossover",
        [
            Verdict(
                id="crossover.position",
                stage="crossover",
                status="skip",
                expected="crossover within 10× of 256 KiB",
                observed="no Tree win seen",
                reason="NCCL chose Ring at every size: rerun with NCCL_ALGO=Tree",
            )
        ],
    )
    complete("crossover", "2026-11-29T16:52:40+00:00", "2026-11-29T17:10:00+00:00", rows, "crossover-code-1")

    # dp: selected but never ran (pending, no records)

    # fault: the stage crashed; its verdict carries the command, exit code and log tail
    run.replace_stage_verdicts(
        "fault",
        [
            Verdict(
                id="fault.run",
                stage="fault",
                status="fail",
                expected="the stage completes",
                observed="exit code 1",
                reason="torchrun exited 1\ncommand: torchrun --nproc-per-node 8 -m suite.workloads.fault\n"
                'exit code: 1\nlast lines of the log:\n[rank1]: RuntimeError: <NCCL> & "watchdog" timeout',
            )
        ],
    )
    complete(
        "fault", "2026-11-29T17:10:00+00:00", "2026-11-29T17:42:10+00:00", [], "fault-code-1", status="error"
    )
    run.save_manifest()
    return run.path


# ---------------------------------------------------------------- figure modules for the tests


def install_figure_module(monkeypatch, stage: str, figures) -> None:
    """Make `figures` the report's suite/stages/<stage>/figure.py for one test (whatever that file holds)."""
    import importlib.machinery
    import sys
    import types

    from reports import figures as figure_modules

    name = figure_modules.module_name(stage)
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.figures = figures
    module.installed_by_test = True
    monkeypatch.setitem(sys.modules, name, module)


def only_installed_figures(monkeypatch) -> None:
    """Hide the stages' own figure modules: a test sees only what install_figure_module put there."""
    import sys

    from reports import figures as figure_modules

    monkeypatch.setattr(
        figure_modules,
        "has_module",
        lambda stage: getattr(sys.modules.get(figure_modules.module_name(stage)), "installed_by_test", False),
    )


def busbw_lines(rows, expectations, facts):
    """A figure like the bandwidth stage's: busbw vs size per collective, with a 70%-of-peak line."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5))
    ax = fig.add_subplot()
    busbw_rows = rows[rows["metric"] == "busbw"]
    for case, group in busbw_rows.groupby("case"):
        curve = group.groupby("size_bytes")["value"].median()
        ax.plot(curve.index.astype(float), curve.values, marker=".", label=str(case))
    ax.axhline(315.0, linestyle=":", color="grey", label="70% of peak")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"busbw vs size on {(facts.get('topology') or {}).get('gpus', ['CPU'])[0]}")
    ax.legend()
    return [fig]


def link_matrix(rows, expectations, facts):
    """A figure like the topology stage's: a GPU×GPU matrix (an image: never overlaid)."""
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 3))
    ax = fig.add_subplot()
    ax.imshow(np.full((8, 8), 18.0))
    ax.set_title("NVLinks between GPU pairs")
    return [fig]


def broken_figures(rows, expectations, facts):
    raise ValueError("no busbw rows for this stage")
