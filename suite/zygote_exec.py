"""The zygote's side of suite/warm_python.py: one process forked from the warm state to run a module, and its relay.

The zygote forks a relay per request (this module's `relay`), which forks the process that becomes
the module's `__main__` (suite.zygote.become) on the client's stdin/stdout/stderr, then stands
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
import selectors
import signal
import socket

from . import procs
from .zygote import POLL_S, become, client_gone, send


def relay(conn: socket.socket, request: dict, fds: list[int]) -> int:
    """In the zygote's fork: start the module's process on `fds` (stdin, stdout, stderr), relay, report its exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this process waits for its child itself
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    procs.die_with_parent(expected_parent=os.getppid())
    if len(fds) != 3:
        send(conn, {"error": f"the exec request brought {len(fds)} file descriptors, not stdin, stdout and stderr"})
        return 1
    pid = os.fork()
    if pid == 0:
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        become(request["module"], list(request["args"]), dict(request["env"]), request["cwd"],
               spawned_at=request.get("spawned_at"))  # never returns
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
    """Pass the client's signals to `pid` until it exits (its exit code); None when the client went away first."""
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
