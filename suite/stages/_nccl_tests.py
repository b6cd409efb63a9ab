"""nccl-tests' `*_perf` binaries for the bandwidth and crossover stages: find, run, keep output, turn into
rows.

Not a stage (the leading underscore keeps it out of discovery). By default nccl-tests runs in
NVIDIA's multi-process form, `mpirun -np <nproc> <binary> … -g 1`: one process per GPU, as torch
runs, so the two are compared like for like (the image builds nccl-tests with MPI=1 and sets
OMPI_ALLOW_RUN_AS_ROOT[_CONFIRM] for root in a container). `sweep.nccl_tests_form = "single"` runs
one process driving every GPU (`-g <nproc>`, ncclCommInitAll: no MPI needed). Each status row says
which form ran, and so does the α-β fit the later stages use.
The binaries come from PATH or `$CARDTIME_NCCL_TESTS_DIR` (the image sets it to nccl-tests' build/).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from suite.cluster.mpirun import hostfile_text, mpirun_across_nodes
from suite.cluster.multinode import node_socket_env, parse_nodes
from suite.cluster.node_container import container_prefix
from suite.config import Profile
from suite.hardware.card_fit import card_bytes, fitted_sweep, nccl_tests_max_bytes
from suite.launch.nccl_tests_watch import line_buffered, watch
from suite.parsers import ParseError
from suite.parsers.nccl_tests import parse_file
from suite.results import Row

DIR_ENV = "CARDTIME_NCCL_TESTS_DIR"
# Our collective names → nccl-tests' program names.
PROGRAMS = {
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "all_to_all": "alltoall_perf",
    "broadcast": "broadcast_perf",
    "sendrecv": "sendrecv_perf",
}


def search_path(env: dict[str, str] | None = None) -> list[Path]:
    env = os.environ if env is None else env
    dirs = []
    if env.get(DIR_ENV):
        base = Path(env[DIR_ENV])
        dirs += [base, base / "build"]
    dirs += [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p]
    return dirs


def find_binary(program: str, env: dict[str, str] | None = None) -> Path | None:
    """`program` (or its MPI build `<program>_mpi`) in $CARDTIME_NCCL_TESTS_DIR[/build] or on PATH."""
    for directory in search_path(env):
        for name in (program, program + "_mpi"):
            candidate = directory / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    found = shutil.which(program)
    return Path(found) if found else None


def binaries(profile: Profile, programs: list[str]) -> tuple[dict[str, Path | None], str]:
    """Each program's binary and, for those missing, where it was looked for. Under pyxis (a Slurm job with
    IMAGE=) the binaries run in the image, so they are looked for there with one srun, never on the batch
    host (suite/cluster/slurm_pyxis.py); anywhere else here (find_binary)."""
    import shlex

    from suite.cluster.slurm import SRUN_ARGS_ENV
    from suite.cluster.slurm_pyxis import image_binaries, in_container

    srun_args = shlex.split(os.environ.get(SRUN_ARGS_ENV, "")) if profile.node_launcher == "srun" else []
    if len(profile.nodes) > 1 and in_container(srun_args):
        found, why = image_binaries(programs, srun_args)
        return {p: Path(found[p]) if p in found else None for p in programs}, (
            why or f"in the image: not in its ${DIR_ENV}[/build] nor on its PATH"
        )
    return {p: find_binary(p) for p in programs}, where_searched()


def where_searched(env: dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    d = env.get(DIR_ENV)
    return f"${DIR_ENV}={d}" if d else f"${DIR_ENV} unset; PATH"


def perf_args(profile: Profile) -> list[str]:
    """`-b min -e max -f factor -g gpus-per-process -w warmup -n iters -c 1`, or the profile's own
    nccl_tests_args."""
    s = profile.sweep
    if s.nccl_tests_args:
        return list(s.nccl_tests_args)
    per_process = 1 if mpi_form(profile) else profile.nproc
    return [
        "-b",
        str(s.min_bytes),
        "-e",
        str(s.max_bytes),
        "-f",
        str(s.factor),
        "-g",
        str(per_process),
        "-w",
        str(s.warmup_iters),
        "-n",
        str(s.iters),
        "-c",
        "1",
    ]


def mpi_form(profile: Profile) -> bool:
    """One process per GPU under mpirun: asked for, or the only form that spans several nodes."""
    return profile.sweep.nccl_tests_form == "mpi" or len(profile.nodes) > 1


def form_label(profile: Profile) -> str:
    """Which form of nccl-tests ran, in words the report and the α-β fit's basis carry."""
    if len(profile.nodes) > 1:
        return f"mpirun -np {profile.world} across {len(profile.nodes)} nodes, -g 1 (one process per GPU)"
    if profile.sweep.nccl_tests_form == "mpi":
        return f"mpirun -np {profile.nproc}, -g 1 (one process per GPU)"
    return f"one process, -g {profile.nproc}"


def launcher(
    profile: Profile, env: dict[str, str] | None = None, raw_dir: Path | None = None
) -> tuple[list[str] | None, str]:
    """The words before the binary: [] for the single-process form, `mpirun -np N …` for MPI; (None, why)
    without mpirun. Across nodes: suite/cluster/mpirun.py's words, the hostfile written into raw_dir."""
    if not mpi_form(profile):
        return [], ""
    path = (env or {}).get("PATH") or os.environ.get("PATH", "")
    mpirun = shutil.which("mpirun", path=path)
    if mpirun is None:
        return None, (
            "mpirun not found on PATH: install Open MPI (the image has it), or run nccl-tests as one "
            'process driving every GPU with sweep.nccl_tests_form = "single" in the profile'
        )
    # Each variable the stage sets (NCCL_ALGO) is exported to every rank by name; --bind-to none leaves
    # CPU placement to the OS as torchrun does.
    exports = [a for key in sorted(env or {}) for a in ("-x", key)]
    if len(profile.nodes) > 1:
        return across_nodes(profile, mpirun, {**os.environ, **(env or {})}, Path(raw_dir or ".")), ""
    # Root (a container pod without Docker, a rented VM's root login) needs Open MPI's consent on the command
    # line: the CUDA image sets OMPI_ALLOW_RUN_AS_ROOT, a host run (RUNTIME=host) has no such variable.
    as_root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [mpirun, "-np", str(profile.nproc), "--bind-to", "none", *as_root, *exports], ""


def across_nodes(profile: Profile, mpirun: str, env: dict[str, str], raw_dir: Path) -> list[str]:
    """mpirun across the profile's nodes, one process per GPU; the hostfile kept as raw/<stage>/hostfile.
    Inside a Slurm allocation: srun --mpi=pmix instead (no ssh between compute nodes;
    suite/cluster/slurm_pyxis.py)."""
    nodes = parse_nodes(profile.nodes)
    if profile.node_launcher == "srun":
        import shlex

        from suite.cluster.slurm import SRUN_ARGS_ENV
        from suite.cluster.slurm_pyxis import srun_mpi_words

        return srun_mpi_words(len(nodes), profile.nproc, shlex.split(env.get(SRUN_ARGS_ENV, "")))
    hostfile = raw_dir / "hostfile"
    hostfile.parent.mkdir(parents=True, exist_ok=True)
    hostfile.write_text(hostfile_text(nodes, profile.nproc, profile.node_addrs))  # the nodes' own addresses
    socket_env = {**env, **node_socket_env(profile.socket_ifname)}
    return mpirun_across_nodes(
        mpirun,
        nodes,
        profile.nproc,
        str(hostfile),
        env=socket_env,
        ssh_config=profile.ssh_config,
        ifname=profile.socket_ifname,
        as_root=os.geteuid() == 0,
        in_image=container_prefix(env) is not None,
        addrs=profile.node_addrs,
    )


def run_binary(
    binary: Path,
    args: list[str],
    raw_dir: Path,
    label: str,
    *,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
    prefix: list[str] | None = None,
    planned: list[int] | None = None,
    budget_s: float | None = None,
) -> tuple[int | None, Path, list[tuple[int, str]]]:
    """Run one binary (after `prefix`, e.g. mpirun's words), stdout and stderr kept untouched in
    raw/<stage>/<label>.out / .err; (exit code or None when stopped or timed out, .out, the sizes not run and
    why). `planned` sizes and `budget_s`: the binary is stopped before a size that would pass its time
    (nccl_tests_watch)."""
    out, err = raw_dir / f"{label}.out", raw_dir / f"{label}.err"
    full_env = {**os.environ, **(env or {})}
    argv, lines_as_printed = line_buffered([str(binary), *args])
    boxed = budget_s if planned and lines_as_printed else None  # without stdbuf the lines come only at exit
    with open(out, "wb") as fo, open(err, "wb") as fe:
        # mpirun's ranks share its new session's group
        proc = subprocess.Popen(
            [*(prefix or []), *argv], stdout=fo, stderr=fe, env=full_env, start_new_session=True
        )
        code, dropped = watch(proc, out, planned or [], label, boxed, timeout_s)
    return code, out, dropped


def rows_from_parse(
    parsed: dict[str, Any], collective: str, stage: str, algo: str | None = None
) -> list[Row]:
    """nccl-tests' rows in the tidy schema, source=nccl-tests; N/A wrong counts give no wrong row."""
    rows = []
    for r in parsed["rows"]:
        for placement in ("oop", "ip"):
            half = r.get(placement)
            if not half:
                continue
            common = dict(
                stage=stage,
                case=collective,
                size_bytes=r["size"],
                count=r["count"],
                dtype=r["type"],
                redop=r["redop"],
                root=r["root"],
                placement=placement,
                source="nccl-tests",
                world=parsed["nranks"],
                algo=algo,
            )
            for metric, unit in (("time_us", "us"), ("algbw", "GB/s"), ("busbw", "GB/s"), ("wrong", "count")):
                if half.get(metric) is not None:
                    rows.append(Row(metric=metric, value=float(half[metric]), unit=unit, **common))
    return rows


def status_row(stage: str, collective: str, status: str, text: str, algo: str | None = None) -> Row:
    """What became of one binary: value 1 ran to its footer, 0 did not, NaN not run; text says why."""
    value = {"complete": 1.0, "incomplete": 0.0, "stopped": 0.0}.get(status, float("nan"))  # cut: not known
    return Row(
        stage=stage,
        case=f"nccl-tests.{collective}",
        metric="status",
        value=value,
        unit="count",
        source="nccl-tests",
        algo=algo,
        text=f"{status}: {text}",
    )


def sweep(
    profile: Profile,
    ctx,
    collectives: list[str],
    *,
    algo: str | None = None,
    env: dict[str, str] | None = None,
    on_binary=None,
) -> list[Row]:
    """Run the binaries of `collectives` (those that exist); rows plus one status row each (across nodes, the
    network NCCL took too: suite/stages/_nccl_net.py); `on_binary(rows)` is called with each binary's rows as
    it ends (the stage keeps them in the run directory)."""
    from suite.stages import _nccl_net

    rows: list[Row] = []
    suffix = f".NCCL_ALGO-{algo}" if algo else ""
    # -e sized to the card (suite/hardware/card_fit.py: 3 buffers of S per GPU); a node's own context carries
    # no facts
    card = card_bytes(getattr(ctx, "facts", None) or {})
    sized = (
        ""
        if card is None or profile.sweep.nccl_tests_args
        else "; sized: " + nccl_tests_max_bytes(profile.sweep, card)[1]
    )
    profile = profile.with_overrides(sweep=fitted_sweep(profile.sweep, card))
    prefix, no_launcher = launcher(profile, env, ctx.raw_dir)
    form = form_label(profile)
    found, searched = binaries(profile, [PROGRAMS[c] for c in collectives])
    for i, collective in enumerate(collectives):
        program = PROGRAMS[collective]
        binary = found[program]
        if binary is None:
            rows.append(
                status_row(
                    ctx.stage,
                    collective,
                    "missing",
                    f"{program} not found ({searched}): build nccl-tests "
                    f"(make MPI=1 in its repository) and set {DIR_ENV} to its build/ folder",
                    algo,
                )
            )
            continue
        if prefix is None:
            rows.append(status_row(ctx.stage, collective, "missing", no_launcher, algo))
            continue
        args = perf_args(profile)
        ctx.say(f"nccl-tests {program}{' ' + algo if algo else ''}", done=i, of=len(collectives))
        left = ctx.time_left()  # a hung binary may take its share of the stage's time, not the others'
        share = None if left is None else max(30.0, left / (len(collectives) - i))
        planned = [] if profile.sweep.nccl_tests_args or not profile.sweep.time_box else profile.sweep.sizes()
        # which network NCCL took, to its own files (suite/stages/_nccl_net.py)
        across = len(profile.nodes) > 1
        run_env = {**(env or {}), **(_nccl_net.debug_env(ctx.raw_dir, program + suffix) if across else {})}
        code, out, dropped = run_binary(
            binary,
            args,
            ctx.raw_dir,
            program + suffix,
            env=run_env,
            timeout_s=share,
            prefix=prefix,
            planned=planned,
            budget_s=None if share is None else share * BOX_SHARE,
        )
        rows += _nccl_net.transport_rows(ctx.stage, ctx.raw_dir, program + suffix) if across else []
        try:
            parsed = parse_file(out)
        except ParseError as e:
            done = [
                status_row(
                    ctx.stage,
                    collective,
                    "incomplete",
                    f"{binary} {' '.join(args)} exited {code}; its output does not parse: {e}",
                    algo,
                )
            ]
        else:
            # mpirun starting N copies of a binary built without MPI=1 gives N separate one-rank runs
            ranks = (
                None
                if profile.sweep.nccl_tests_args
                else (
                    profile.world,
                    "rebuild nccl-tests with `make MPI=1`" if prefix else "check -g and CUDA_VISIBLE_DEVICES",
                )
            )
            done = rows_from_output(
                parsed,
                collective,
                ctx.stage,
                algo,
                exit_code=code,
                what=f"{binary.name} {' '.join(args)} [{form}]{sized}",
                ranks=ranks,
                stopped=dropped[0][1] if dropped else None,
            )
        done += dropped_rows(ctx.stage, collective, dropped, algo)
        rows += done
        if on_binary is not None:
            on_binary(done)  # the stage keeps them now: a kill later loses none
    return rows


BOX_SHARE = 0.85
"""Share of a binary's time (its hard timeout) its sizes may fill: the margin is the stop's and a size's
misprediction."""


def dropped_rows(
    stage: str, collective: str, dropped: list[tuple[int, str]], algo: str | None = None
) -> list[Row]:
    """One row per size a binary was stopped before, the reason in its text (the stage's judge lists them)."""
    return [
        Row(
            stage=stage,
            case=collective,
            metric="dropped",
            value=float("nan"),
            unit="s",
            size_bytes=size,
            source="nccl-tests",
            algo=algo,
            text=why,
        )
        for size, why in dropped
    ]


def rows_from_output(
    parsed: dict[str, Any],
    collective: str,
    stage: str,
    algo: str | None = None,
    *,
    exit_code: int | None = 0,
    what: str = "",
    ranks: tuple[int, str] | None = None,
    stopped: str | None = None,
    pasted: bool = False,
) -> list[Row]:
    """One binary's parsed output → its rows and its status row (a live run and `suite ingest` alike);
    exit_code None means it was killed at its timeout; `ranks` (count, what to do) the communicator expected;
    `stopped`: why the time box stopped it before its largest sizes (status `stopped`, judged a warn).
    `pasted` (ingest): a capture that stops short without an error line is status `cut`, judged open, not a
    fail: a paste cut off and a run that died look the same there, and the file cannot say which."""
    ok = parsed["complete"] and exit_code == 0
    why = "ran to its footer" if ok else (parsed["reason"] or f"exit code {exit_code}")
    if pasted and not ok and parsed["rows"] and not parsed.get("aborted"):
        return rows_from_parse(parsed, collective, stage, algo) + [
            status_row(
                stage,
                collective,
                "cut",
                f"{what}: {why}; its {len(parsed['rows'])} whole rows are judged, the end of "
                "the run is not: capture the whole output (`… 2>&1 | tee FILE`) to decide it",
                algo,
            )
        ]
    # its own stop: whatever mpirun said of the TERM, the lines printed are whole
    if stopped and parsed["rows"]:
        return rows_from_parse(parsed, collective, stage, algo) + [
            status_row(stage, collective, "stopped", f"{what}: {stopped}" if what else stopped, algo)
        ]
    if exit_code is None:
        why = f"timed out and was killed; {why}"
    if ok and ranks and parsed["nranks"] not in (None, ranks[0]):
        ok, why = False, f"{parsed['nranks']} rank(s) in one communicator, not {ranks[0]}: {ranks[1]}"
    return rows_from_parse(parsed, collective, stage, algo) + [
        status_row(
            stage, collective, "complete" if ok else "incomplete", f"{what}: {why}" if what else why, algo
        )
    ]
