"""torchrun command lines and environments for a profile, and the launcher that runs them.

A launch runs `python -m torch.distributed.run ... -m suite.workloads.<name> ARGS`. Each worker
sends its own output to `raw/<stage>/[<tag>.]rank<N>.log` (suite/workloads/worker.py does the
redirect) and hands its rows back through `rows.rank<N>.jsonl` files in an output folder, never
through stdout. torchrun's own output goes to `raw/<stage>/[<tag>.]torchrun.log`.
"""

from __future__ import annotations

import functools
import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from suite.config import Profile
from suite.forensics.collect import RESULT, collect_quietly, explained, forget_hellos
from suite.launch import procs
from suite.results import Row, read_rows_jsonl

LOG_TAIL_LINES = 30
WORKER_PROGRESS = "progress.json"  # what rank 0 writes in the launch's output folder (Worker.progress)


class LaunchError(RuntimeError):
    """A launch that failed or could not start; carries what a person needs to act."""

    def __init__(
        self, message: str, *, command: Sequence[str] = (), exit_code: int | None = None, log_tail: str = ""
    ):
        super().__init__(message)
        self.command = list(command)
        self.exit_code = exit_code
        self.log_tail = log_tail

    def describe(self) -> str:
        parts = [str(self)]
        if self.command:
            parts.append("command: " + shlex.join(self.command))
        if self.exit_code is not None:
            parts.append(f"exit code: {self.exit_code}")
        if self.log_tail:
            parts.append("last lines of the log:\n" + self.log_tail)
        return "\n".join(parts)


# ---------------------------------------------------------------- ports


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_holder(port: int) -> str | None:
    """'pid 4312 (torchrun)' for the process listening on `port`, where /proc tells; None otherwise."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == port and state == "0A":  # 0A = LISTEN
                inodes.add(inode)
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    name = (proc / "comm").read_text().strip()
                    return f"pid {proc.name} ({name})"
        except OSError:
            continue
    return None


def choose_port(profile: Profile) -> int:
    """The profile's fixed port if it is free, else a free one; a busy fixed port is an error naming its
    holder. On a multi-node profile the fixed port is the rendezvous's across the nodes (multilaunch.py): a
    launch on this node alone takes a free one, so that launches at once (the fault stage's concurrent drills)
    never collide on it."""
    if profile.master_port is None or len(profile.nodes) > 1:
        return free_port(profile.master_addr)
    if not port_is_free(profile.master_port, profile.master_addr):
        holder = port_holder(profile.master_port)
        who = f" by {holder}" if holder else ""
        raise LaunchError(
            f"port {profile.master_port} on {profile.master_addr} is held{who}: "
            f"stop it or pass --master-port with another port"
        )
    return profile.master_port


# ---------------------------------------------------------------- environment and command


def loopback_interface() -> str:
    """gloo's socket interface: `lo` on Linux, `lo0` on macOS (else gloo may pick an external address)."""
    return "lo0" if sys.platform == "darwin" else "lo"


def worker_env(profile: Profile, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every worker gets: threads capped, loopback only, the backend and device named."""
    env = dict(os.environ if base is None else base)
    env["OMP_NUM_THREADS"] = str(profile.omp_threads)
    env["MKL_NUM_THREADS"] = str(profile.omp_threads)
    env["CARDTIME_BACKEND"] = profile.backend
    env["CARDTIME_DEVICE"] = profile.device
    env["CARDTIME_PG_TIMEOUT_S"] = str(profile.collective_timeout_s)
    env["PYTHONUNBUFFERED"] = "1"
    # torch's Flight Recorder: the last collectives of every rank, which the hang forensics ask for
    # (suite/forensics); measured on gloo: no cost per collective that the sweep's spread shows
    env.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    if profile.backend == "gloo":
        env.setdefault("GLOO_SOCKET_IFNAME", loopback_interface())
    # TORCH_NCCL_ASYNC_ERROR_HANDLING is left to torch's default (3: the watchdog aborts a timed-out
    # communicator and ends the process), which is what a production job runs under; the fault stage
    # sets it per drill to compare the settings.
    repo_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, env.get("PYTHONPATH", "")) if p)
    return env


def torchrun_command(
    profile: Profile,
    module: str,
    args: Sequence[str] = (),
    *,
    nproc: int | None = None,
    port: int,
    max_restarts: int = 0,
    extra_torchrun_args: Sequence[str] = (),
    run_module: Sequence[str] | None = None,
) -> list[str]:
    """`python -m torch.distributed.run` for one node with the profile's rendezvous on loopback.

    run_module: what runs a module in place of `python -m` (followed by the module's name), for torchrun and,
    as its `--no-python` entrypoint, for each worker: the warm launcher's (suite/launch/forklaunch.py)."""
    flags = [
        f"--nproc-per-node={nproc or profile.nproc}",
        "--nnodes=1",
        f"--master-addr={profile.master_addr}",
        f"--master-port={port}",
        f"--max-restarts={max_restarts}",
        *extra_torchrun_args,
    ]
    if run_module is not None:
        return [*run_module, "torch.distributed.run", *flags, "--no-python", *run_module, module, *args]
    return [sys.executable, "-m", "torch.distributed.run", *flags, "-m", module, *args]


# ---------------------------------------------------------------- running


@dataclass
class LaunchResult:
    command: list[str]
    exit_code: int
    seconds: float
    out_dir: Path
    log_paths: list[Path] = field(default_factory=list)

    def rows(self) -> list[Row]:
        """Every row the workers wrote, rank 0 first."""
        rows: list[Row] = []
        for path in sorted(self.out_dir.glob("rows.rank*.jsonl"), key=lambda p: int(p.stem.split("rank")[1])):
            rows.extend(read_rows_jsonl(path))
        return rows


def log_tail(paths: Sequence[Path], lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of each log that exists, headed by its name."""
    chunks = []
    for path in paths:
        if path.exists():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            if text:
                chunks.append(f"==> {path.name} <==\n" + "\n".join(text))
    return "\n".join(chunks)


def launch_out_dir(raw_dir: Path, tag: str = "") -> Path:
    """Where a launch's workers leave their rows and progress: raw/<stage>/[<tag>.]out/."""
    return Path(raw_dir) / (f"{tag}.out" if tag else "out")


def prepare_launch(
    profile: Profile, raw_dir: Path, tag: str, env: dict[str, str] | None
) -> tuple[Path, str, dict[str, str]]:
    """What every launcher does first: the output folder emptied of an earlier launch's rows and progress, the
    log prefix, and the workers' environment naming both (CARDTIME_RAW_DIR / CARDTIME_OUT_DIR /
    CARDTIME_LOG_PREFIX)."""
    prefix = f"{tag}." if tag else ""
    out_dir = launch_out_dir(raw_dir, tag)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in [
        *out_dir.glob("rows.rank*.jsonl"),
        out_dir / WORKER_PROGRESS,
        raw_dir / f"{prefix}{RESULT}",
    ]:
        stale.unlink(missing_ok=True)
    forget_hellos(raw_dir, prefix)  # an earlier launch's ranks are not this one's
    full_env = worker_env(profile, env)
    full_env.update(CARDTIME_RAW_DIR=str(raw_dir), CARDTIME_OUT_DIR=str(out_dir), CARDTIME_LOG_PREFIX=prefix)
    return out_dir, prefix, full_env


def run_torchrun(
    profile: Profile,
    module: str,
    args: Sequence[str] = (),
    *,
    raw_dir: Path,
    tag: str = "",
    nproc: int | None = None,
    timeout_s: float | None = None,
    max_restarts: int = 0,
    env: dict[str, str] | None = None,
    extra_torchrun_args: Sequence[str] = (),
    on_poll: Callable[[], None] | None = None,
    run_module: Sequence[str] | None = None,
) -> LaunchResult:
    """Launch a workload on this node and wait for it; a non-zero exit or a timeout raises LaunchError with
    the log tail.

    The workers find their log and output folder in CARDTIME_RAW_DIR / CARDTIME_OUT_DIR / CARDTIME_LOG_PREFIX.
    The launch runs in its own process group so a timeout kills every worker. One node only: a profile naming
    several goes through suite/cluster/multilaunch.py (StageContext.torchrun chooses).
    """
    raw_dir = Path(raw_dir)
    out_dir, prefix, full_env = prepare_launch(profile, raw_dir, tag, env)
    port = choose_port(profile)
    command = torchrun_command(
        profile,
        module,
        args,
        nproc=nproc,
        port=port,
        max_restarts=max_restarts,
        extra_torchrun_args=extra_torchrun_args,
        run_module=run_module,
    )
    torchrun_log = raw_dir / f"{prefix}torchrun.log"
    n = nproc or profile.nproc
    logs = [torchrun_log] + [raw_dir / f"{prefix}rank{r}.log" for r in range(n)]
    start = time.monotonic()
    with open(torchrun_log, "ab") as log:
        log.write(f"$ {shlex.join(command)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
            preexec_fn=functools.partial(procs.die_with_parent, expected_parent=os.getpid()),
        )
        try:
            while True:
                try:
                    exit_code = proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if on_poll is not None:
                        on_poll()
                    if timeout_s is not None and time.monotonic() - start > timeout_s:
                        findings = collect_quietly(
                            raw_dir, prefix, world=n, reason="timeout", store=(profile.master_addr, port)
                        )
                        kill_group(proc)
                        raise LaunchError(
                            explained(f"{module} timed out after {timeout_s:.0f} s", findings),
                            command=command,
                            exit_code=proc.returncode,
                            log_tail=log_tail(logs),
                        )
        except BaseException:
            kill_group(proc)
            raise
    seconds = time.monotonic() - start
    if exit_code != 0:
        findings = collect_quietly(
            raw_dir, prefix, world=n, reason="failed", torchrun_logs=[torchrun_log], ask_live=False
        )
        raise LaunchError(
            explained(f"torchrun running {module} exited with code {exit_code}", findings),
            command=command,
            exit_code=exit_code,
            log_tail=log_tail(logs),
        )
    forget_hellos(raw_dir, prefix)  # a launch that ended well needs no forensics
    return LaunchResult(
        command=command, exit_code=exit_code, seconds=seconds, out_dir=out_dir, log_paths=logs
    )


def kill_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """Kill the launch and everything below it (stopped ranks included), then reap it."""
    procs.kill_tree(proc.pid, grace_s)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
