"""`make remote`/`make plan HOST=` to a box that does not answer as sshd should: one line saying what
happened, in words a renter acts on, and the next step — never paramiko's traceback. Made on this machine
only: a loopback port nothing listens on, a loopback listener that never speaks, and (as root, with iptables)
a loopback port whose packets a firewall rule drops, removed afterwards."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import socket
import subprocess
import threading

import pytest

from provisioning.__main__ import main as provisioning_main
from provisioning.session import connection


@pytest.fixture(autouse=True)
def short_connect_timeout(monkeypatch):
    # the product waits 15 s for a connect and a banner; 3 s shows the same words
    monkeypatch.setattr(connection, "CONNECT_TIMEOUT_S", 3)


def plan(port: int) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = provisioning_main(["plan", "--host", f"root@127.0.0.1:{port}"])
    return code, err.getvalue()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_line(code: int, text: str, says: str) -> None:
    lines = text.strip().splitlines()
    assert code == 2 and "Traceback" not in text and len(lines) == 2, text
    assert (
        lines[0].startswith("error: root@127.0.0.1:") and says in lines[0] and lines[1].startswith("  next: ")
    )


def test_a_port_nothing_listens_on_is_refused_in_one_line():
    one_line(*plan(free_port()), "connection refused: nothing listens on that port")


def test_a_listener_that_never_speaks_ssh_is_one_line():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.5)
        while not done.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        one_line(*plan(server.getsockname()[1]), "the port answered but spoke no SSH")
    finally:
        done.set()
        thread.join()
        for s in [*held, server]:
            s.close()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("iptables") is None, reason="needs root and iptables")
def test_a_connect_that_times_out_is_one_line():
    port = free_port()
    rule = ["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-j", "DROP"]
    added = subprocess.run(["iptables", "-A", *rule], capture_output=True, text=True)
    if added.returncode != 0:
        pytest.skip(f"iptables refused the rule: {added.stderr.strip()}")
    try:
        one_line(*plan(port), "no answer (the address is unreachable, a firewall drops the port")
    finally:
        subprocess.run(["iptables", "-D", *rule], check=True)
