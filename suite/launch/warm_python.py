"""`python -m MODULE ARGS…` without importing torch again: the module runs in a process forked from the warm
zygote.

    python -S suite/launch/warm_python.py SOCKET MODULE [ARGS…]      # SOCKET: the zygote's
                                                                     # (suite/launch/forklaunch.py)

The rehearsal's fault drill runs a real torchrun with --max-restarts (torchrun's own detection
and restart are what it tests), and every launch there costs each process an `import torch`
(2.5 s of CPU; fifteen processes of three drills on two cores). Under gloo-cpu's warm launcher
torchrun and its workers start through this script instead: torchrun as
`warm_python.py SOCKET torch.distributed.run …`, its workers as `--no-python` entrypoints
`python -S warm_python.py SOCKET suite.stages.fault.drill_worker …`. It imports only the standard
library (-S: not even site; ~50 ms) and asks the zygote (suite/launch/zygote_exec.py) for a fork that
becomes MODULE's `__main__` with this process's environment, working directory, argv and
stdin/stdout/stderr. It stands in for that process to whoever started it:

  * signals sent to it (torchrun's SIGTERM to a worker's process group, a launcher's SIGINT)
    are passed on to the module's process;
  * it exits as the module's process exited: with its exit code, or killed by the same signal
    (a worker that SIGKILLs itself is, to torchrun, a worker killed by SIGKILL);
  * the module's process dies with it: when this process dies (SIGKILL included) its socket
    closes and the zygote's relay SIGKILLs the module's process tree; and this process dies
    with its own parent (PR_SET_PDEATHSIG), as a torchrun worker of the suite does.

Only the standard library here, and no `suite` import: the script runs by path, before anything.
"""

import ctypes
import json
import os
import signal
import socket
import sys
import time

RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
"""Signals passed on to the module's process (SIGKILL and SIGSTOP cannot be caught: the socket's closing ends
it)."""


def die_with_parent() -> None:
    """Linux: SIGKILL when the parent dies; a parent already gone (we were re-parented) means exit now."""
    parent = os.getppid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() != parent:
        os._exit(1)


def started_at() -> float:
    """When this process was created (wall clock, from /proc; now elsewhere): the moment its starter spawned
    it."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - max(uptime - ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return time.time()


def receive_line(conn: socket.socket, buffer: bytearray) -> dict | None:
    """The next JSON line from `conn` (blocking; a relayed signal's handler does not end the wait, PEP 475);
    None at end of stream. The zygote's side reads its messages with this too
    (suite/launch/zygote_exec.py)."""
    while b"\n" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buffer.extend(chunk)
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return json.loads(line)


def exit_as(code: int) -> None:
    """Exit with `code`; a negative one (killed by signal -code) by that same signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
        os.kill(os.getpid(), -code)
        code = 128 - code  # a signal whose default is not to end the process
    os._exit(code)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(
            "usage: python -S warm_python.py SOCKET MODULE [ARGS…] (started by suite/launch/forklaunch.py)",
            file=sys.stderr,
        )
        return 2
    die_with_parent()
    spawned = started_at()
    path, module, args = argv[0], argv[1], argv[2:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError as error:
        print(
            f"warm_python: the warm launcher's socket {path} does not answer ({error}): is the run's zygote "
            f"alive? Rerun with --launcher torchrun to start {module} without it",
            file=sys.stderr,
        )
        return 1
    request = {
        "op": "exec",
        "module": module,
        "args": args,
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "spawned_at": spawned,
        "proxy": os.getpid(),
    }
    data = (json.dumps(request) + "\n").encode()
    sent = socket.send_fds(conn, [data], [0, 1, 2])  # stdin, stdout, stderr: the module's own
    conn.sendall(data[sent:])

    def relay(signum, _frame):
        try:
            conn.sendall((json.dumps({"signal": signum}) + "\n").encode())
        except OSError:
            pass  # the relay is gone: its child is being killed anyway

    for sig in RELAYED:
        signal.signal(sig, relay)
    buffer = bytearray()
    while True:
        message = receive_line(conn, buffer)
        if message is None:
            print(f"warm_python: the zygote's relay for {module} went away before it exited", file=sys.stderr)
            return 1
        if "exit" in message:
            while receive_line(conn, buffer) is not None:  # the relay's end: gone before its stand-in is
                pass
            exit_as(int(message["exit"]))
        if "error" in message:
            print(f"warm_python: {message['error']}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
