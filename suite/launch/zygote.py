"""The warm launcher's server: one process that imported torch once and forks the ranks of each launch.

    python -m suite.launch.zygote SOCKET LOG    # started by suite/launch/forklaunch.py, never by hand

A torchrun launch of 4 gloo ranks spends seconds before the first collective: torchrun's own
`import torch`, then four workers importing torch at once on the same cores (FACTS.md: ~9 s
under load). Here torch and every worker module's imports are done once; a launch forks the
ranks from that state (0.1 s for 4 ranks). What runs in each rank is the worker module's own
main, exactly as under torchrun: the same environment variables (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), the same process group through a TCPStore that the
launch's agent hosts, as torchrun's agent does.

Fork safety: this process never runs a collective, a computation or a thread. OMP_NUM_THREADS=1
keeps torch's import from starting an OpenMP pool (a child forked after the parent used a pool
of more than one thread hangs in its first parallel region); each rank sets its own thread count.
Per launch, the zygote forks an agent (a clean copy of itself) that forks the ranks first and
only then starts the store's server thread.

The protocol is one JSON line per message on a Unix socket. The client sends the launch; the
agent answers {"started": …} with its pid and the ranks' pids, then {"done": …} with every
rank's exit code. A client that goes away (a stage killed at its timeout) closes the socket: the
agent then SIGKILLs its ranks. When a rank fails, the agent stops the others, as torchrun does.
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import selectors
import signal
import socket
import sys
import time
import traceback
from datetime import timedelta

from suite.launch.warm_python import receive_line
from suite.launch.zygote_exec import POLL_S, become, client_gone, relay, send

STOP_GRACE_S = 3.0
"""After one rank failed: how long the others get between SIGTERM and SIGKILL (torchrun waits 30 s)."""
TELL_GRACE_S = 1.0
"""After one rank failed, before the SIGTERM: the peers whose sockets reset raise, leave their post-mortem
(suite/forensics/answer.py: which collective they were in) and exit by themselves in well under this."""


# ---------------------------------------------------------------- messages


def receive_request(conn: socket.socket) -> tuple[dict | None, list[int]]:
    """The client's request and the file descriptors sent with its first bytes (an exec's
    stdin/stdout/stderr)."""
    data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    try:
        return receive_line(conn, bytearray(data)), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


# ---------------------------------------------------------------- the server


def warm_imports() -> list[str]:
    """Import torch, torch.distributed and every worker module (as modules, not run): each rank then starts
    with them in memory. A module that fails to import here is left for the rank to import (and report)."""
    import torch

    # DDP's first construction imports it: 2.7 s per rank on a 2-core machine
    import torch._dynamo  # noqa: F401
    import torch.distributed
    import torch.distributed._functional_collectives
    import torch.distributed.fsdp
    import torch.distributed.optim
    import torch.distributed.tensor
    import torch.nn.parallel
    import torch.profiler  # noqa: F401 - the worker modules import these inside functions

    from suite import workloads

    failed = []
    for info in pkgutil.iter_modules(workloads.__path__):
        name = f"{workloads.__name__}.{info.name}"
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 - the rank imports it again and its log says why
            failed.append(f"{name}: {type(error).__name__}: {error}")
    return failed


def thread_count() -> int:
    """Threads of this process (Linux: /proc; elsewhere Python's own count)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def serve(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)  # before the imports: clients connect at once and wait in the backlog
    listener.listen(64)
    t0 = time.monotonic()
    failed = warm_imports()
    # Every object so far into the collector's permanent generation: a full collection in a forked child would
    # otherwise walk all ~300 000 of them and write their headers, copying ~76 MB of shared pages per child
    # (measured: 0.4 s of CPU each, 19 000 page faults; with the freeze, 0.00 s and 400).
    gc.collect()
    gc.freeze()
    threads = thread_count()
    print(
        f"zygote {os.getpid()}: warm in {time.monotonic() - t0:.1f} s, {threads} thread(s)"
        + "".join(f"\n  not preloaded: {f}" for f in failed),
        flush=True,
    )
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # agents are reaped by the kernel
    while True:
        conn, _ = listener.accept()
        try:
            request, fds = receive_request(conn)
        except (OSError, ValueError) as error:  # a client gone or garbled: this process serves the next one
            print(f"zygote: a request could not be read: {error}", flush=True)
            request, fds = None, []
        if request is None or (fds and request.get("op") != "exec"):
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        if request.get("op") == "ping":
            send(conn, {"pid": os.getpid(), "threads": thread_count()})
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            code = 1
            try:
                # one process: `python -m module` forked (suite/launch/warm_python.py)
                if request.get("op") == "exec":
                    code = relay(conn, request, fds)
                else:
                    code = agent(conn, request)
            except BaseException:  # noqa: BLE001 - the agent's own failure goes to the zygote's log
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        conn.close()


# ---------------------------------------------------------------- one launch: the agent


def rank_env(request: dict, rank: int) -> dict[str, str]:
    """The launch's environment plus what torchrun's agent sets for each worker (LocalElasticAgent, torch
    2.13)."""
    n = request["nproc"]
    env = dict(request["env"])
    env.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "GROUP_RANK": "0",
            "ROLE_RANK": str(rank),
            "ROLE_NAME": "default",
            "LOCAL_WORLD_SIZE": str(n),
            "WORLD_SIZE": str(n),
            "GROUP_WORLD_SIZE": "1",
            "ROLE_WORLD_SIZE": str(n),
            "MASTER_ADDR": request["master_addr"],
            "MASTER_PORT": str(request["master_port"]),
            "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0",
            "TORCHELASTIC_RUN_ID": "none",
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        }
    )
    return env


def agent(conn: socket.socket, request: dict) -> int:
    """Fork the ranks, host the store, wait; on a failed rank stop the others; on the client's going away kill
    all."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this process waits for its ranks itself
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from suite.launch import procs

    procs.die_with_parent(expected_parent=os.getppid())
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    # The store's port listens before the ranks exist: their first connect waits in the backlog until the
    # store's thread accepts it. A refused connect makes TCPStore's client back off: 0.3–0.7 s of every
    # launch.
    where = f"{request['master_addr']}:{request['master_port']}"
    try:
        listener, store_error = (
            socket.create_server((request["master_addr"], request["master_port"]), backlog=1024),
            None,
        )
    except OSError as error:  # a port taken since the client chose it: the launch fails
        listener, store_error = None, error
    ranks = {}
    for rank in range(request["nproc"]):
        pid = os.fork()
        if pid == 0:
            conn.close()
            if listener is not None:
                listener.close()
            start_rank(request, rank)  # never returns
        ranks[pid] = rank
    store = None
    try:
        import torch.distributed as dist

        if listener is not None:  # the store owns the socket from here
            store = dist.TCPStore(
                request["master_addr"],
                request["master_port"],
                is_master=True,
                wait_for_workers=False,
                timeout=timedelta(seconds=request["store_timeout_s"]),
                master_listen_fd=listener.detach(),
            )
    except Exception as error:  # noqa: BLE001 - the store did not start: the launch fails
        store_error = error
    if store_error is not None:
        store_error = (
            f"the agent could not host the store on {where}: {store_error}; pass --master-port "
            f"with a free port"
        )
        print(store_error, flush=True)
    send(
        conn,
        {
            "started": {"agent": os.getpid(), "ranks": sorted(ranks, key=ranks.get)},
            "store_error": store_error,
        },
    )
    outcome = wait_ranks(conn, ranks, stop_now=store_error is not None)
    if outcome is None:  # the client is gone: nobody reads a result
        return 1
    codes, first_failed = outcome
    send(conn, {"done": {"codes": codes, "first_failed": first_failed}})
    del store
    return 0


def wait_ranks(
    conn: socket.socket, ranks: dict[int, int], stop_now: bool
) -> tuple[list[int], int | None] | None:
    """Every rank's exit code and the rank that failed first (None: none failed); None when the client went
    away."""
    from suite.launch import procs

    codes: list[int | None] = [None] * len(ranks)
    first_failed = None
    running = dict(ranks)
    watch = selectors.DefaultSelector()
    watch.register(conn, selectors.EVENT_READ)
    stop_at = time.monotonic() if stop_now else None
    failed_at = None
    while running:
        if watch.select(timeout=POLL_S) and client_gone(conn):
            for pid in running:
                procs.kill_tree(pid, grace_s=0.0)
            reap(running, codes)
            return None
        reap(running, codes, nohang=True)
        if first_failed is None:
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            # Peers of a rank that died exit 1 within the same poll (their sockets reset): the one killed by a
            # signal is the cause, whatever its rank number; else the lowest rank.
            first_failed = min(failed, key=lambda r: (codes[r] >= 0, r)) if failed else None
        if first_failed is not None and failed_at is None:
            failed_at = time.monotonic()
        telling = failed_at is not None and time.monotonic() - failed_at < TELL_GRACE_S
        if (first_failed is not None and not telling or stop_now) and stop_at is None:
            stop_at = time.monotonic()
            for pid in running:
                signal_quietly(pid, signal.SIGTERM)
                signal_quietly(pid, signal.SIGCONT)
        if stop_at is not None and time.monotonic() - stop_at > STOP_GRACE_S:
            for pid in list(running):
                procs.kill_tree(pid, grace_s=0.0)
    return codes, first_failed


def reap(running: dict[int, int], codes: list, nohang: bool = False) -> None:
    for pid in list(running):
        done, status = os.waitpid(pid, os.WNOHANG if nohang else 0)
        if done:
            codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)


def signal_quietly(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- one rank


def start_rank(request: dict, rank: int) -> None:
    """In the forked rank: become the worker torchrun would have started, run the module's main, exit."""
    become(request["module"], request["args"], rank_env(request, rank), request["cwd"])


def main(argv: list[str]) -> int:
    # LOG is where the client sends this process's output; on the command line (which every agent and rank
    # forked from here shares) it tells `ps` whose run they serve.
    if len(argv) != 2:
        print(
            "usage: python -m suite.launch.zygote SOCKET LOG (started by suite/launch/forklaunch.py)",
            file=sys.stderr,
        )
        return 2
    folder = os.path.dirname(argv[0])

    # the client's death (PR_SET_PDEATHSIG, armed before exec) or its stop(): remove the socket
    def leave(
        *_,
    ):
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, leave)
    serve(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
