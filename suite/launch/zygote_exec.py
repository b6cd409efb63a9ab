"""The zygote's side of suite/launch/warm_python.py: one process forked from the warm state to run a module,
and its relay.

The zygote forks a relay per request (this module's `relay`), which forks the process that becomes
the module's `__main__` (suite.launch.zygote.become) on the client's stdin/stdout/stderr, then stands
between the two until that process ends:

  * it answers {"started": pid}, then {"exit": code} once the process has exited (code as
    os.waitstatus_to_exitcode gives it: negative, the signal that killed it);
  * a {"signal": n} line from the client is sent on to the process, and only that (no SIGCONT with
    a SIGTERM: a stopped worker stays stopped, as under torchrun's own killpg);
  * the client's going away (its socket closed: it was killed, SIGKILL included) SIGKILLs the
    process and every process below it (a torchrun's proxies, whose relays then kill their workers).

The relay dies with the zygote, the process with its relay (PR_SET_PDEATHSIG from their first
instant): no process of a killed run is left behind.
"""

from __future__ import annotations

import json
import os
import runpy
import selectors
import signal
import socket
import sys
import traceback

from suite.launch import procs

POLL_S = 0.05
"""How often a waiting relay or agent looks at its children where nothing wakes it."""


# ---------------------------------------------------------------- messages: one JSON object per line


def become(
    module: str, args: list[str], env: dict[str, str], cwd: str, spawned_at: float | None = None
) -> None:
    """In a process forked from the zygote: run `module` as `python -m module args` would, with exactly `env`,
    then exit. A launch's ranks (suite/launch/zygote.py's start_rank) and an exec's process (below) both.
    `spawned_at`: when the process standing in for this one was created (suite/launch/warm_python.py), which
    the worker reports as its start."""
    code = 1
    try:
        procs.die_with_parent(expected_parent=os.getppid())  # from the first instant, as fault_drill arms it
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        import random

        import torch

        # Read by libgomp at torch's import, in the zygote: the worker's value is applied here.
        torch.set_num_threads(int(env.get("OMP_NUM_THREADS", "1")))
        random.seed()  # a fresh process's own seed, not the zygote's copy
        from suite import workloads

        # the agent: worker_session dies with it, as with torchrun's agent
        workloads.LAUNCHER_PID = os.getppid()
        workloads.SPAWNED_AT = spawned_at
        sys.argv = [module, *args]
        sys.path.insert(0, cwd)  # what `python -m` puts first
        sys.modules.pop(module, None)  # preloaded as a module; now run as __main__
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, (int, type(None))):
            print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as an uncaught exception ends a torchrun worker: traceback, exit 1
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def send(conn: socket.socket, message: dict) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


def client_gone(conn: socket.socket) -> bool:
    """The socket is readable: at its end (or reset) the client is gone; the client sends nothing after its
    request."""
    try:
        return not conn.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


# ---------------------------------------------------------------- an exec: one module's process and its relay


def relay(conn: socket.socket, request: dict, fds: list[int]) -> int:
    """In the zygote's fork: start the module's process on `fds` (stdin, stdout, stderr), relay, report its
    exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this process waits for its child itself
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    procs.die_with_parent(expected_parent=os.getppid())
    if len(fds) != 3:
        send(
            conn,
            {"error": f"the exec request brought {len(fds)} file descriptors, not stdin, stdout and stderr"},
        )
        return 1
    pid = os.fork()
    if pid == 0:
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        # never returns
        become(
            request["module"],
            list(request["args"]),
            dict(request["env"]),
            request["cwd"],
            spawned_at=request.get("spawned_at"),
        )
    for fd in fds:
        os.close(fd)
    send(conn, {"started": pid})
    code = wait_relaying(conn, pid)
    if code is None:  # the client is gone: nobody reads the exit
        return 1
    try:
        send(conn, {"exit": code})
    except OSError:
        return 1
    return 0


def wait_relaying(conn: socket.socket, pid: int) -> int | None:
    """Pass the client's signals to `pid` until it exits (its exit code); None when the client went away
    first."""
    watch = selectors.DefaultSelector()
    watch.register(conn, selectors.EVENT_READ)
    try:  # Linux ≥ 5.3: woken by the child's exit itself; elsewhere polled every POLL_S
        exited = os.pidfd_open(pid)
        watch.register(exited, selectors.EVENT_READ)
    except (AttributeError, OSError):
        exited = None
    buffer = bytearray()
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            ready = {key.fd for key, _ in watch.select(timeout=POLL_S)}
            if conn.fileno() not in ready:
                continue
            if client_gone(conn):
                procs.kill_tree(pid, grace_s=0.0)
                os.waitpid(pid, 0)
                return None
            buffer.extend(conn.recv(65536))
            while b"\n" in buffer:
                line, _, rest = bytes(buffer).partition(b"\n")
                buffer[:] = rest
                try:
                    os.kill(pid, int(json.loads(line)["signal"]))
                except ProcessLookupError:
                    pass  # exited meanwhile: the next waitpid reports it
    finally:
        if exited is not None:
            os.close(exited)
