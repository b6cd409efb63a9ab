"""Timing figures, printed, never asserted (a shared 2-core machine is too noisy for timed tests).

    python -m tests.bench            # or: make bench

Each figure is a function below printing one or more lines `name: value unit (target)`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCHES = []
REPORT_BASELINE = "dcae1e2305"
"""The commit whose renderer the report bench compares with (before the first-screen report, issue 17)."""
_REHEARSAL: dict[str, Path] = {}
"""The run directory rehearsal_wall_time made, kept for report_render (one rehearsal serves both)."""
_KEEP = []


def bench(fn):
    BENCHES.append(fn)
    return fn


STAGE_LINE = re.compile(r"^\[\s*\d+/\d+\] (\S+)\s+([\d.]+)s (done|FAILED)")


def _children_cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rehearse(
    launcher: str,
) -> tuple[float, int, dict[str, tuple[float, str]], str, tuple[float, float], float]:
    """One full gloo-cpu rehearsal with `launcher`: wall seconds, exit code, stage → (seconds, done|FAILED),
    the summary line, the 1-minute load average before and after, and the CPU seconds (user+sys) of the
    processes the run waited for (the fork launcher's ranks are reaped by its zygote's kernel-side SIG_IGN, so
    on that side the figure counts the runner, its stages and the zygote only: compare walls, read this beside
    them)."""
    keep = tempfile.TemporaryDirectory()
    _KEEP.append(keep)  # removed at exit: report_render renders the fork run first
    out = keep.name
    load_before = os.getloadavg()[0]
    cpu_before = _children_cpu_s()
    start = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite",
            "run",
            "--profile",
            "gloo-cpu",
            "--launcher",
            launcher,
            "--out",
            out,
            "--record-last",
            f"{out}/LAST",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - start
    last = Path(out) / "LAST"
    if last.exists():
        _REHEARSAL[launcher] = Path(last.read_text().strip())
    stages = {m[1]: (float(m[2]), m[3]) for m in map(STAGE_LINE.match, result.stderr.splitlines()) if m}
    summary = next(
        (line for line in reversed(result.stderr.splitlines()) if line.startswith("summary:")), "no summary"
    )
    return (
        seconds,
        result.returncode,
        stages,
        summary,
        (load_before, os.getloadavg()[0]),
        _children_cpu_s() - cpu_before,
    )


def _cell(stage: tuple[float, str] | None) -> str:
    if stage is None:
        return "–"
    return f"{stage[0]:.1f}" + ("" if stage[1] == "done" else " FAILED")


@bench
def rehearsal_wall_time() -> None:
    """The full gloo-cpu rehearsal once the venv exists, the old way (torchrun per launch) and the new way
    (the warm fork launcher), back to back in the same run, stage by stage, then the new way's report rendered
    as `make rehearse` does (target: the new way with its report ≤ 60 s on the 2-core machine)."""
    runs = {launcher: rehearse(launcher) for launcher in ("torchrun", "fork")}
    (
        (old, old_code, old_stages, old_summary, old_load, old_cpu),
        (new, new_code, new_stages, new_summary, new_load, new_cpu),
    ) = runs["torchrun"], runs["fork"]
    print(
        f"rehearsal wall time, --launcher torchrun: {old:.1f} s; exit {old_code}; CPU {old_cpu:.1f} s; "
        f"load average {old_load[0]:.1f} → {old_load[1]:.1f}"
    )
    print(
        f"rehearsal wall time, --launcher fork:     {new:.1f} s; exit {new_code}; CPU {new_cpu:.1f} s "
        f"(runner, stages, "
        f"zygote); load average {new_load[0]:.1f} → {new_load[1]:.1f}"
    )
    print(f"  fork / torchrun: {new / old:.2f}")
    print(f"  {'stage':<12} {'torchrun s':>10} {'fork s':>8} {'ratio':>6}")
    for stage in dict.fromkeys([*old_stages, *new_stages]):
        a, b = old_stages.get(stage), new_stages.get(stage)
        ratio = f"{b[0] / a[0]:6.2f}" if a and b and a[0] > 0 else f"{'–':>6}"
        print(f"  {stage:<12} {_cell(a):>10} {_cell(b):>8} {ratio}")
    old_sum, new_sum = (sum(t for t, _ in stages.values()) for stages in (old_stages, new_stages))
    print(
        f"  {'stages':<12} {old_sum:>10.1f} {new_sum:>8.1f} "
        f"{new_sum / old_sum if old_sum else float('nan'):6.2f}"
    )
    print(
        f"  {'start, end':<12} {old - old_sum:>10.1f} {new - new_sum:>8.1f}   (the run's wall time outside "
        f"its stages)"
    )
    print(f"  torchrun: {old_summary}")
    print(f"  fork:     {new_summary}")
    run = _REHEARSAL.get("fork")
    if run is not None:
        _REHEARSAL["run"] = run
        with tempfile.TemporaryDirectory() as d:
            # as `make rehearse` renders it: the figure cache the run's drawer filled (the user's)
            render, render_cpu, _, render_code = _render(REPO, run, Path(d) / "report.html", cache=None)
        print(
            f"make rehearse, new way: {new:.1f} s run + {render:.1f} s report ({render_cpu:.1f} s CPU, exit "
            f"{render_code}) = {new + render:.1f} s (target ≤ 60 s on the 2-core machine)"
        )


def _render(
    python_path: Path, run: Path, out: Path, cache: str | None = "off"
) -> tuple[float, float, int, int]:
    """`python -m reports RUN -o OUT` with the given code first on the path: wall and CPU seconds (a loaded
    machine stretches the wall time, hardly the CPU time), bytes, exit code. `cache`: CARDTIME_FIGURE_CACHE
    (None: as this process has it)."""
    import resource

    env = {
        **os.environ,
        "PYTHONPATH": str(python_path),
        **({"CARDTIME_FIGURE_CACHE": cache} if cache else {}),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "reports", str(run), "-o", str(out)],
        cwd=python_path,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stat().st_size if out.exists() else 0, done.returncode


def _renderer_at(commit: str, into: Path) -> Path | None:
    """The reports and suite packages as they were at `commit`, unpacked under `into`; None (said why) if
    unreadable."""
    archive = subprocess.run(["git", "archive", commit, "reports", "suite"], cwd=REPO, capture_output=True)
    if archive.returncode != 0:
        print(
            f"report render: cannot read the renderer of {commit} (git archive): "
            f"{archive.stderr.decode().strip()}"
        )
        return None
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


@bench
def report_render() -> None:
    """A full rehearsal's report: render time and size, this renderer against main's (the one it replaces) and
    REPORT_BASELINE's, in the same run on the same run directory, one after another (target: ≤ 5 s and ≤ 600
    KB on the 2-core machine). This renderer twice: drawing every figure (cold) and reading them back from its
    figure cache (warm: a report rendered again, or after a run that drew its stages' figures as it went).
    REPORT_RUN=DIR renders that run directory instead of making a rehearsal first."""
    run = Path(os.environ["REPORT_RUN"]) if os.environ.get("REPORT_RUN") else _REHEARSAL.get("run")
    if run is None:
        rehearsal_wall_time()
        run = _REHEARSAL.get("run")
    if run is None:
        print("report render: no rehearsal run directory to render (the rehearsal did not start)")
        return
    with tempfile.TemporaryDirectory() as d:
        renderers = [
            (f"baseline {REPORT_BASELINE}", _renderer_at(REPORT_BASELINE, Path(d) / "baseline"), "off"),
            ("main", _renderer_at("main", Path(d) / "main"), "off"),
            ("this, cold", REPO, "off"),
            ("this, warm", REPO, str(Path(d) / "cache")),
        ]
        # the warm one's cache, filled first
        _render(REPO, run, Path(d) / "fill.html", str(Path(d) / "cache"))
        print(f"report render of {run.name}; load average {os.getloadavg()[0]:.1f} before")
        for i, (name, code, cache) in enumerate(renderers):
            if code is None:
                continue
            wall, cpu, size, code_exit = _render(code, run, Path(d) / f"{i}.html", cache)
            print(
                f"  {name:<20} {wall:5.1f} s wall, {cpu:5.1f} s CPU, {size / 1024:5.0f} KB, exit {code_exit}"
            )
        print(f"  target ≤ 5 s, ≤ 600 KB; load average {os.getloadavg()[0]:.1f} after")


@bench
def harness_overhead() -> None:
    """Bandwidth stage: the sweep's all_reduce busbw at the largest rehearsal size vs a bare dist.all_reduce
    loop, alternated in one gloo launch (target: the harness within 5% of the bare loop)."""
    import statistics

    from suite.config import GLOO_CPU
    from suite.launch.forklaunch import launch

    size = max(GLOO_CPU.sweep.sizes())
    repeats, iters = 7, 20
    with tempfile.TemporaryDirectory() as raw:
        result = launch(
            GLOO_CPU,
            "suite.workloads.collective_sweep",
            [
                "--sizes",
                str(size),
                "--collectives",
                "all_reduce",
                "--warmup",
                "2",
                "--iters",
                str(iters),
                "--bare-repeats",
                str(repeats),
            ],
            raw_dir=Path(raw),
            tag="bench",
            timeout_s=600,
        )
        rows = result.rows()
    harness = [r.value for r in rows if r.case == "overhead.harness"]
    bare = [r.value for r in rows if r.case == "overhead.bare"]
    h, b = statistics.median(harness), statistics.median(bare)
    print(
        f"harness overhead, all_reduce {size} B on {GLOO_CPU.nproc} gloo ranks, {repeats} alternations × "
        f"{iters} iters:"
    )
    print(f"  suite busbw (median): {h:.4f} GB/s")
    print(f"  bare dist.all_reduce busbw (median): {b:.4f} GB/s")
    print(f"  suite / bare: {h / b:.3f} (target ≥ 0.95)")
    print("  pairs: " + ", ".join(f"{x:.3f}/{y:.3f}" for x, y in zip(harness, bare)))


def _parse_figures(path: Path) -> tuple[float, float, int, str]:
    """`python -m suite parse nccl-tests PATH` in a fresh child: wall seconds, peak RSS MiB, exit code,
    stderr."""
    probe = (
        "import resource, subprocess, sys, time; t = time.monotonic(); "
        "r = subprocess.run([sys.executable, '-m', 'suite', 'parse', 'nccl-tests', sys.argv[1]], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True); "
        "print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode); "
        "print(r.stderr.strip()[:160])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(path)], cwd=REPO, capture_output=True, text=True
    ).stdout
    head, _, said = out.partition("\n")
    seconds, rss_kib, code = head.split()
    return float(seconds), int(rss_kib) / 1024, int(code), said.strip()


@bench
def parse_large_inputs() -> None:
    """parse nccl-tests on 50 MB of text that is not nccl-tests output (target: refused in < 1 s, < 60 MiB),
    and on a 50 MB real-shaped capture — capture 10's table after 50 MB of NCCL INFO lines (target: streamed,
    memory flat)."""
    import random

    capture = (
        REPO / "tests/data/nccl-tests/10-h100-all_reduce-2node-16rank-mpi-warnings-interleaved.txt"
    ).read_text()
    rng = random.Random(18)
    size = 50 * 2**20
    with tempfile.TemporaryDirectory() as d:
        garbage, shaped = Path(d) / "garbage.txt", Path(d) / "all_reduce_perf.out"
        with open(garbage, "w") as f:
            written = 0
            while written < size:
                line = " ".join(f"{rng.getrandbits(32):08x}" for _ in range(rng.randint(2, 16))) + "\n"
                written += f.write(line)
        head, sep, table = capture.partition("NCCL version")
        info = "bm-h100-01:29262:29262 [0] NCCL INFO Channel {:02d}/32 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
        with open(shaped, "w") as f:
            f.write(head + sep + table.split("\n", 1)[0] + "\n")
            written, n = 0, 0
            while written < size:
                written += f.write(info.format(n % 32))
                n += 1
            f.write(table.split("\n", 1)[1])
        for name, path in (("50 MB not nccl-tests output", garbage), ("50 MB real-shaped capture", shaped)):
            seconds, rss, code, said = _parse_figures(path)
            print(f"parse nccl-tests, {name}: {seconds:.2f} s, peak RSS {rss:.0f} MiB, exit {code}")
            if said:
                print(f"  {said}")


@bench
def parse_million_rows() -> None:
    """A million-row nccl-tests sweep parsed and ingested: time and peak memory (tests/bench_sizes.py)."""
    from .bench_sizes import parse_million_rows as run

    run()


@bench
def image_rebuild() -> None:
    """CPU image rebuild after a change under suite/ (target: under 30 s); skipped without a Docker engine."""
    from .bench_image import image_rebuild_after_a_suite_change

    image_rebuild_after_a_suite_change()


@bench
def cuda_image() -> None:
    """The CUDA image's size on disk and its recorded build time (docker/build-cuda-image.sh)."""
    from .bench_image import cuda_image_size_and_build_time

    cuda_image_size_and_build_time()


@bench
def fetch_rate() -> None:
    """A run's files fetched over SFTP vs a plain get(), on loopback and behind a 100 ms round trip."""
    from .bench_fetch import fetch_rates

    fetch_rates()


def main(argv: list[str]) -> int:
    wanted = set(argv)
    for fn in BENCHES:
        if not wanted or fn.__name__ in wanted:
            fn()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
