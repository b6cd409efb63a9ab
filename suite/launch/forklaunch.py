"""The warm launcher: the rehearsal's ranks forked from a process that imported torch once
(suite/launch/zygote.py).

    launch(profile, "suite.stages.dp.worker", args, raw_dir=…, tag="dp")   # what StageContext.torchrun calls

`launch` chooses by `profile.launcher`: "fork" (the gloo-cpu rehearsal's default) forks the ranks
from the warm zygote; "torchrun" runs `python -m torch.distributed.run` (suite/launch/torchrun.py), as a
user launches, which the nccl-gpu profile always does. A launch that asks for torchrun's own
behaviour (restarts, torchrun arguments) always gets torchrun. Both give the same LaunchResult:
rows from rows.rank<N>.jsonl, each rank's log in raw/<stage>/[<tag>.]rank<N>.log, the
progress file, a LaunchError with the log tail on a failed rank or a timeout. The warm launcher's
own output (and a rank's before it redirects to its log) goes to [<tag>.]launcher.log, whose
first line is the torchrun command that runs the same workers.

One zygote serves a whole run (the runner starts it before the first stage) or a whole test
session (started at the first launch). A dead zygote costs a relaunch: the next launch starts
another.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from suite.config import Profile
from suite.forensics.collect import collect_quietly, explained, forget_hellos
from suite.launch import procs
from suite.launch.torchrun import (
    LaunchError,
    LaunchResult,
    choose_port,
    log_tail,
    prepare_launch,
    run_torchrun,
    torchrun_command,
)

CONNECT_RETRY_S = 0.05
POLL_S = 0.2
"""How often a waiting launch calls on_poll (run_torchrun's interval too)."""


class ZygoteGone(LaunchError):
    """The zygote died before it took the launch."""


class Zygote:
    """A running `python -m suite.launch.zygote` and its socket; the process that started it owns (and reaps)
    it."""

    def __init__(self, proc: subprocess.Popen, folder: Path, log_path: Path):
        self.proc, self.folder, self.log_path = proc, folder, log_path
        self.pid = proc.pid
        self.owner = os.getpid()
        self.socket_path = str(folder / "sock")

    @classmethod
    def start(cls, log_path: Path | None = None) -> "Zygote":
        """Start one; it binds its socket at once and imports torch meanwhile (launches queue until it is
        warm)."""
        folder = Path(tempfile.mkdtemp(prefix="cardtime-zygote-"))  # short: a socket path has ≤ 104 bytes
        log_path = Path(log_path) if log_path else folder / "zygote.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        # One thread at import: no OpenMP pool exists when the ranks are forked (see suite/launch/zygote.py).
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        repo_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, env.get("PYTHONPATH", "")) if p)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "suite.launch.zygote", str(folder / "sock"), str(log_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=repo_root,
                start_new_session=True,
                preexec_fn=functools.partial(
                    procs.die_with_parent, signal.SIGTERM, expected_parent=os.getpid()
                ),
            )
        return cls(proc, folder, log_path)

    @classmethod
    def fork_here(cls, log_path: Path | None = None) -> "Zygote":
        """Start one as a fork of this process, which has imported the warm set itself (the runner's preload):
        warm at once, and torch imported once per run instead of twice. Only from a process as fork-safe as
        the zygote (torch at one thread: no OpenMP pool; the runner forks its stages from the same state)."""
        from suite.launch.zygote import main as zygote_main

        folder = Path(tempfile.mkdtemp(prefix="cardtime-zygote-"))
        log_path = Path(log_path) if log_path else folder / "zygote.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # what Zygote.start's `python -m suite.launch.zygote` would be, without its imports
            code = 1
            try:
                os.setsid()
                procs.die_with_parent(signal.SIGTERM, expected_parent=parent)
                log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                sys.stdout = open(1, "w", buffering=1, closefd=False)
                sys.stderr = open(2, "w", buffering=1, closefd=False)
                os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
                code = zygote_main([str(folder / "sock"), str(log_path)])
            finally:
                os._exit(code)
        return cls(_ForkedChild(pid), folder, log_path)

    def alive(self) -> bool:
        if os.getpid() == self.owner:
            return self.proc.poll() is None
        return procs.alive(self.pid)  # a forked stage sees its runner's zygote, not its own child

    def stop(self) -> None:
        """End it (its agents and ranks die with it) and remove its socket; only in the process that started
        it."""
        if os.getpid() != self.owner:
            return
        if self.proc.poll() is None:
            procs.kill_tree(self.pid, grace_s=1.0)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)

    def connect(self, deadline: float | None) -> socket.socket:
        """A connection to it, waiting while it starts; ZygoteGone once it has died."""
        while True:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(self.socket_path)
                return conn
            except (FileNotFoundError, ConnectionRefusedError):
                conn.close()
                if not self.alive():
                    raise ZygoteGone(
                        f"the warm launcher (pid {self.pid}) has exited: see {self.log_path}"
                    ) from None
                if deadline is not None and time.monotonic() > deadline:
                    raise LaunchError(
                        f"the warm launcher (pid {self.pid}) did not start in time: see {self.log_path}"
                    ) from None
                time.sleep(CONNECT_RETRY_S)

    def ping(self, timeout_s: float = 120.0) -> dict:
        """Once it is warm: its pid and thread count (a test checks it forks with one thread)."""
        conn = self.connect(time.monotonic() + timeout_s)
        with conn:
            conn.settimeout(timeout_s)
            conn.sendall(b'{"op": "ping"}\n')
            return json.loads(conn.makefile().readline())


class _ForkedChild:
    """What Zygote uses of a Popen (pid, poll, wait), for a zygote forked from this process."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"zygote pid {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode


_current: Zygote | None = None


def can_fork_zygote_here() -> bool:
    """Whether this process may become a zygote by fork: it holds the warm set and torch runs at one
    thread."""
    torch = sys.modules.get("torch")
    return "torch._dynamo" in sys.modules and torch is not None and torch.get_num_threads() == 1


def warm_zygote(log_path: Path | None = None, fork_here: bool = False) -> Zygote:
    """This process's zygote: the one inherited from the runner or started earlier, else a new one (a fork of
    this process when fork_here and can_fork_zygote_here(), else `python -m suite.launch.zygote`)."""
    global _current
    if _current is None or not _current.alive():
        if _current is not None:
            _current.stop()
        _current = (
            Zygote.fork_here(log_path) if fork_here and can_fork_zygote_here() else Zygote.start(log_path)
        )
        atexit.register(_current.stop)  # a no-op in forked children (not the owner)
    return _current


def settle_warm_zygote(timeout_s: float = 10.0) -> None:
    """After a stage was killed: wait until nothing this process's zygote forked for it still runs, killing
    what outlives `timeout_s`. The zygote's agents kill their ranks when the stage's socket closes, but
    on their own time: a rank still running would write rows after the runner kept the stage's, and take
    cores from the next stage. Only between stages, when no launch is in flight."""
    zygote = _current
    if zygote is None or os.getpid() != zygote.owner or not zygote.alive():
        return
    procs.wait_gone(procs.descendants(zygote.pid), timeout_s)
    for pid in procs.descendants(zygote.pid):  # what outlived it, and any rank forked meanwhile
        procs.kill_tree(pid, grace_s=0.0)


def stop_warm_zygote() -> None:
    global _current
    if _current is not None:
        _current.stop()
        _current = None


# ---------------------------------------------------------------- launching


def launch(
    profile: Profile,
    module: str,
    args: Sequence[str] = (),
    *,
    max_restarts: int = 0,
    extra_torchrun_args: Sequence[str] = (),
    **kwargs,
) -> LaunchResult:
    """Run `module` on the profile's ranks with its launcher; torchrun whenever torchrun's behaviour is asked
    for.

    Under the fork launcher a launch with restarts gets the real torchrun too, with torchrun and its workers
    forked from the warm zygote (warm_torchrun_prefix)."""
    if profile.launcher == "fork" and not max_restarts and not extra_torchrun_args:
        try:
            return run_forked(profile, module, args, **kwargs)
        except ZygoteGone:  # a launch that killed it cost only a relaunch
            return run_forked(profile, module, args, **kwargs)
    if profile.launcher == "fork" and not extra_torchrun_args:
        return run_warm_torchrun(profile, module, args, max_restarts=max_restarts, **kwargs)
    return run_torchrun(
        profile, module, args, max_restarts=max_restarts, extra_torchrun_args=extra_torchrun_args, **kwargs
    )


WARM_PYTHON = Path(__file__).resolve().parent / "warm_python.py"


def warm_run_module(zygote: "Zygote") -> list[str]:
    """What runs a module like `python -m` but forked from `zygote` (suite/launch/warm_python.py): -S, no
    site, ~50 ms."""
    return [sys.executable, "-S", str(WARM_PYTHON), zygote.socket_path]


def module_command(profile: Profile, module: str, args: Sequence[str] = ()) -> list[str]:
    """`python -m module args` for one process of the stage's own (not a launch of ranks): forked from the
    warm zygote under the fork launcher, a fresh interpreter otherwise."""
    head = warm_run_module(warm_zygote()) if profile.launcher == "fork" else [sys.executable, "-m"]
    return [*head, module, *args]


def run_warm_torchrun(
    profile: Profile, module: str, args: Sequence[str] = (), *, raw_dir: Path, tag: str = "", **kwargs
) -> LaunchResult:
    """run_torchrun with torchrun (`torch.distributed.run`'s own main, every option and restart its own) and
    each worker it starts forked from the warm zygote instead of importing torch: 15 processes of the fault
    drill's three launches start in ~1 s of CPU instead of ~40. The log's first line is the command users
    run."""
    zygote = warm_zygote()
    zygote.ping()  # warm before torchrun starts: its timeouts then count from a process that is running
    prefix = f"{tag}." if tag else ""
    Path(raw_dir).mkdir(parents=True, exist_ok=True)
    plain = torchrun_command(
        profile, module, args, nproc=kwargs.get("nproc"), port=0, max_restarts=kwargs.get("max_restarts", 0)
    )
    with open(Path(raw_dir) / f"{prefix}torchrun.log", "ab") as log:
        log.write(
            f"warm torchrun (torchrun and its workers forked from the zygote, pid {zygote.pid}); "
            f"as users launch it (port chosen below):\n# {shlex.join(plain)}\n".encode()
        )
    return run_torchrun(
        profile, module, args, raw_dir=raw_dir, tag=tag, run_module=warm_run_module(zygote), **kwargs
    )


def run_forked(
    profile: Profile,
    module: str,
    args: Sequence[str] = (),
    *,
    raw_dir: Path,
    tag: str = "",
    nproc: int | None = None,
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
    on_poll: Callable[[], None] | None = None,
) -> LaunchResult:
    """run_torchrun's contract, with the ranks forked from the warm zygote."""
    raw_dir = Path(raw_dir)
    out_dir, prefix, full_env = prepare_launch(profile, raw_dir, tag, env)
    n = nproc or profile.nproc
    port = choose_port(profile)
    command = torchrun_command(profile, module, args, nproc=n, port=port)
    launcher_log = raw_dir / f"{prefix}launcher.log"
    logs = [launcher_log] + [raw_dir / f"{prefix}rank{r}.log" for r in range(n)]
    start = time.monotonic()
    deadline = None if timeout_s is None else start + timeout_s
    zygote = warm_zygote()
    with open(launcher_log, "ab") as log:
        log.write(
            f"fork launcher (zygote pid {zygote.pid}): {n} ranks of {module}; the same workers under "
            f"torchrun:\n$ {shlex.join(command)}\n".encode()
        )

    def failure(message: str, exit_code: int | None = None) -> LaunchError:
        return LaunchError(message, command=command, exit_code=exit_code, log_tail=log_tail(logs))

    conn = zygote.connect(deadline)
    agent = None
    try:
        conn.sendall(
            (
                json.dumps(
                    {
                        "module": module,
                        "args": list(args),
                        "env": full_env,
                        "nproc": n,
                        "cwd": os.getcwd(),
                        "master_addr": profile.master_addr,
                        "master_port": port,
                        "log": str(launcher_log),
                        "store_timeout_s": profile.collective_timeout_s,
                    }
                )
                + "\n"
            ).encode()
        )
        messages = _Messages(conn)
        while True:
            message = messages.next(POLL_S)
            if message is _Messages.CLOSED:
                raise failure(
                    f"the fork launcher's agent for {module} died before its ranks finished"
                    + (f" (agent pid {agent})" if agent else "")
                )
            if message is None:
                if on_poll is not None:
                    on_poll()
                if deadline is not None and time.monotonic() > deadline:
                    findings = collect_quietly(
                        raw_dir, prefix, world=n, reason="timeout", store=(profile.master_addr, port)
                    )
                    raise failure(explained(f"{module} timed out after {timeout_s:.0f} s", findings))
                continue
            if "started" in message:
                agent = message["started"]["agent"]
                if message.get("store_error"):
                    raise failure(message["store_error"])
            if "done" in message:
                codes, first_failed = message["done"]["codes"], message["done"]["first_failed"]
                break
    except BaseException:
        conn.close()  # the agent SIGKILLs its ranks when the socket closes
        if agent is not None:
            procs.kill_tree(agent, grace_s=0.0)
        raise
    conn.close()
    seconds = time.monotonic() - start
    if first_failed is not None:
        code = codes[first_failed]
        findings = collect_quietly(
            raw_dir,
            prefix,
            world=n,
            reason="failed",
            exit_codes=dict(enumerate(codes)),
            first_failed=first_failed,
            ask_live=False,
        )
        message = (
            f"fork launcher running {module}: rank {first_failed} exited with code {code} first "
            f"(every rank's exit code: {codes}; the others were then stopped)"
        )
        raise failure(explained(message, findings), exit_code=code)
    forget_hellos(raw_dir, prefix)  # a launch that ended well needs no forensics
    return LaunchResult(command=command, exit_code=0, seconds=seconds, out_dir=out_dir, log_paths=logs)


class _Messages:
    """JSON lines from the agent, read without blocking longer than asked."""

    CLOSED = object()

    def __init__(self, conn: socket.socket):
        self.conn, self.buffer = conn, bytearray()
        self.selector = selectors.DefaultSelector()
        self.selector.register(conn, selectors.EVENT_READ)

    def next(self, wait_s: float):
        """The next message; None when none came within wait_s; CLOSED at the end of the stream."""
        if b"\n" not in self.buffer:
            if not self.selector.select(timeout=wait_s):
                return None
            chunk = self.conn.recv(65536)
            if not chunk:
                return self.CLOSED
            self.buffer.extend(chunk)
            if b"\n" not in self.buffer:
                return None
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer[:] = rest
        return json.loads(line)
