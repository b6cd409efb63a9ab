"""A real sshd and a real S3-compatible server (moto) on 127.0.0.1, for the remote tests.

sshd (Debian's openssh-server) runs with its own config, host key and client key under a
temporary folder, on a free port. Every session goes through a ForceCommand audit script that
appends the command line and the full environment sshd gave it to `audit.log`, then runs the
command with /bin/sh (or the SFTP server): the tests read that log to prove what reached the host.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"

AUDIT = """#!/bin/sh
{{ printf 'CMD %s\\n' "$SSH_ORIGINAL_COMMAND"; env | sed 's/^/ENV /'; }} >> {log}
case "$SSH_ORIGINAL_COMMAND" in
  internal-sftp|sftp|*sftp-server) exec {sftp} ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s} s")


def sshd_available() -> bool:
    return Path(SSHD).exists() and shutil.which("ssh-keygen") is not None


@dataclass
class Sshd:
    port: int
    folder: Path
    client_key: Path
    host_pub: str
    audit_log: Path
    proc: subprocess.Popen

    @property
    def host(self) -> str:
        return f"root@127.0.0.1:{self.port}"

    def known_hosts_line(self) -> str:
        kind, blob = self.host_pub.split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {blob}\n"

    def audit(self) -> str:
        return self.audit_log.read_text() if self.audit_log.exists() else ""

    def stop(self) -> None:
        stop_process(self.proc)


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_sshd(folder: Path) -> Sshd:
    folder.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    audit_log = folder / "audit.log"
    audit = folder / "audit.sh"
    audit.write_text(AUDIT.format(log=audit_log, sftp=SFTP_SERVER))
    audit.chmod(0o755)
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\nPidFile {folder / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        # AcceptEnv *: were the laptop to send any variable, sshd would pass it on and the audit would see it.
        "AcceptEnv *\nSubsystem sftp internal-sftp\n"
        f"ForceCommand {audit}\nLogLevel VERBOSE\nMaxSessions 50\nMaxStartups 50\n"
    )
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                            stderr=open(folder / "sshd.log", "w"))
    wait_port(port, proc, "sshd")
    return Sshd(port=port, folder=folder, client_key=folder / "client_key",
                host_pub=(folder / "host_key.pub").read_text().strip(), audit_log=audit_log, proc=proc)


@dataclass
class Moto:
    port: int
    proc: subprocess.Popen

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.proc)


def start_moto(venv_bin: Path) -> Moto:
    port = free_port()
    exe = venv_bin / "moto_server"
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_port(port, proc, "moto_server")
    return Moto(port=port, proc=proc)


def fake_credentials(endpoint: str) -> dict[str, str]:
    """Credentials moto accepts, with sentinels a test can search for on the host side."""
    return {
        "AWS_ACCESS_KEY_ID": "AKIASENTINEL0LAPTOP0ONLY",
        "AWS_SECRET_ACCESS_KEY": "secret-sentinel-that-must-stay-on-the-laptop",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without ssh-agent or AWS settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SSH_AUTH_SOCK"))}
    env.update(extra)
    return env
