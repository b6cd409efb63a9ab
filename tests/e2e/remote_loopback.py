"""A real sshd and a real S3-compatible server (moto) on 127.0.0.1, for the remote tests.

sshd (Debian's openssh-server) runs with its own config, host key and client key under a
temporary folder, on a free port. Every session goes through a ForceCommand audit script that
appends the command line and the full environment sshd gave it to `audit.log`, then runs the
command with /bin/sh (or the SFTP server): the tests read that log to prove what reached the host.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
WORKTREE = Path(__file__).resolve().parents[2]
VENV_CACHE = Path(os.environ.get("CARDTIME_E2E_VENV_CACHE", "/tmp/cardtime-e2e-host-venvs"))
SFTP_SERVER = "/usr/lib/openssh/sftp-server"

AUDIT = """#!/bin/sh
{path}{{ printf 'CMD %s\\n' "$SSH_ORIGINAL_COMMAND"; env | sed 's/^/ENV /'; }} >> {log}
case "$SSH_ORIGINAL_COMMAND" in
  internal-sftp|sftp|*sftp-server) exec {sftp} ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"""


# What the session, the probe, the job and the fetch run on the host: a shell and basic tools.
SESSION_TOOLS = (
    "sh",
    "bash",
    "env",
    "cat",
    "cp",
    "mv",
    "rm",
    "mkdir",
    "rmdir",
    "ln",
    "ls",
    "chmod",
    "touch",
    "date",
    "sleep",
    "kill",
    "printf",
    "echo",
    "test",
    "true",
    "false",
    "head",
    "tail",
    "wc",
    "sort",
    "uniq",
    "cut",
    "tr",
    "sed",
    "grep",
    "awk",
    "find",
    "xargs",
    "basename",
    "dirname",
    "readlink",
    "realpath",
    "pwd",
    "id",
    "uname",
    "hostname",
    "df",
    "du",
    "stat",
    "sha256sum",
    "tar",
    "gzip",
    "setsid",
    "nohup",
    "timeout",
    "tee",
    "mktemp",
    "sync",
    "ps",
    "pgrep",
    "nproc",
    "getconf",
    "flock",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{what} exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
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
    in_pid_namespace: bool = False

    @property
    def host(self) -> str:
        return f"root@127.0.0.1:{self.port}"

    def known_hosts_line(self, port: int | None = None) -> str:
        """The host key as known_hosts files it for 127.0.0.1 at `port` (sshd's own by default)."""
        kind, blob = self.host_pub.split()[:2]
        return f"[127.0.0.1]:{port or self.port} {kind} {blob}\n"

    def audit(self) -> str:
        return self.audit_log.read_text() if self.audit_log.exists() else ""

    def stop(self) -> None:
        if self.in_pid_namespace:
            # unshare --fork ignores SIGTERM while it waits (SIGTERM would cost stop_process's 10 s): SIGKILL
            # it, and --kill-child takes the namespace's pid 1, and every process in the namespace, with it.
            self.proc.kill()
            self.proc.wait()
        else:
            stop_process(self.proc)


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_sshd(
    folder: Path,
    sftp: bool = True,
    path_first: Path | None = None,
    path_only: Path | None = None,
    pid1_env: dict[str, str] | None = None,
    home: Path | None = None,
) -> Sshd:
    """sftp=False: no sftp subsystem, as on a marketplace's proxied "basic SSH" endpoint.
    path_first: a folder every session finds first on its PATH (a host's own tools, nvidia-smi say).
    path_only: the one folder on every session's PATH (a host with only the tools linked there).
    pid1_env: sshd runs in its own PID namespace under a pid 1 with exactly this environment, as
    in a container pod, whose image environment (/proc/1/environ) SSH sessions do not inherit.
    home: every session's HOME and working folder (the login's home on a box; this machine's own stays
    untouched)."""
    folder.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    audit_log = folder / "audit.log"
    audit = folder / "audit.sh"
    path = f"PATH={shlex.quote(str(path_first))}:$PATH; export PATH\n" if path_first else ""
    if path_only:
        path = f"PATH={shlex.quote(str(path_only))}; export PATH\n"
    if home:
        path += f'HOME={shlex.quote(str(home))}; export HOME; cd "$HOME"\n'
    audit.write_text(AUDIT.format(log=audit_log, sftp=SFTP_SERVER, path=path))
    audit.chmod(0o755)
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\nPidFile "
        f"{folder / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        # AcceptEnv *: were the laptop to send any variable, sshd would pass it on and the audit would see it.
        "AcceptEnv *\n"
        + ("Subsystem sftp internal-sftp\n" if sftp else "")
        + f"ForceCommand {audit}\nLogLevel VERBOSE\nMaxSessions 50\nMaxStartups 50\n"
    )
    argv = [SSHD, "-D", "-e", "-f", str(config)]
    if pid1_env is not None:  # --kill-child: the namespace (sshd, every job in it) ends with stop()
        argv = [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "env",
            "-i",
            *(f"{k}={v}" for k, v in pid1_env.items()),
            "/bin/sh",
            "-c",
            '"$@" & wait',
            "pid1",
            *argv,
        ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(folder / "sshd.log", "w"))
    wait_port(port, proc, "sshd")
    return Sshd(
        port=port,
        folder=folder,
        client_key=folder / "client_key",
        host_pub=(folder / "host_key.pub").read_text().strip(),
        audit_log=audit_log,
        proc=proc,
        in_pid_namespace=pid1_env is not None,
    )


def host_venv_cache() -> Path:
    """The host venvs the remote tests keep across sessions, as a real host keeps its venvs: a test links
    <remote dir>/venvs to this folder. It holds only what the current installer (hostruntime.ENSURE_VENV)
    made: a changed installer empties it, so the first remote test after the change runs the install for real.
    Every test reaching the cache comes through here first; the check and the emptying hold a lock, as `make
    test`'s two serial lines (tests/parallel_groups.py) may get here at once (two installs of one venv wait
    for each other in the installer itself)."""
    import fcntl

    from provisioning.runtime import hostruntime

    VENV_CACHE.mkdir(parents=True, exist_ok=True)
    stamp = VENV_CACHE / ".installer-sha256"
    installer = hashlib.sha256(hostruntime.ENSURE_VENV.encode()).hexdigest()
    with open(VENV_CACHE.with_name(VENV_CACHE.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text().strip() != installer:
            for entry in VENV_CACHE.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            stamp.write_text(installer + "\n")
    return VENV_CACHE


def make_repo(dest: Path) -> Path:
    """A fresh git repository holding this working tree's files (tracked and new, not ignored), one commit."""
    files = (
        subprocess.run(
            ["git", "-C", str(WORKTREE), "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = WORKTREE / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(src.read_bytes())
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "snapshot for the remote e2e test"], check=True)
    return dest


def git_repo(path: Path, branch: str = "main") -> Path:
    """A tiny laptop-side repository: pyproject.toml and README, one commit on `branch`."""
    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", branch], check=True)
    (path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (path / "README").write_text("hello\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    return path


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
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
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


def provisioning(*args: str, cwd: Path = WORKTREE) -> subprocess.CompletedProcess:
    """`python -m provisioning ARGS` as the laptop runs it: this checkout's code, no agent, no AWS
    settings."""
    return subprocess.run(
        [str(WORKTREE / ".venv" / "bin" / "python"), "-m", "provisioning", *args],
        cwd=cwd,
        env=clean_env(PYTHONPATH=str(WORKTREE)),
        capture_output=True,
        text=True,
        timeout=300,
    )


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without ssh-agent or AWS settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SSH_AUTH_SOCK"))}
    env.update(extra)
    return env


class DelayProxy:
    """A TCP relay on 127.0.0.1 that delivers every byte `delay_s` after it arrived, in each
    direction: a long-distance link modelled in user space (no root, no tc). Throughput is not
    limited, only latency added, so a protocol waiting for each reply pays one round trip per
    request and a pipelined one pays it once. `pause()` stops delivery (a laptop asleep, a link
    gone quiet without a reset); `client_bytes` counts what the client sent."""

    def __init__(self, target_port: int, delay_s: float):
        import threading

        self.target_port, self.delay_s = target_port, delay_s
        self.client_bytes = 0
        self.running = threading.Event()
        self.running.set()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self) -> None:
        self.running.clear()

    def resume(self) -> None:
        self.running.set()

    def _accept(self) -> None:
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        import queue
        import threading

        due: queue.Queue = queue.Queue()

        def deliver() -> None:
            while True:
                when, data = due.get()
                if data is None:
                    return
                time.sleep(max(0.0, when - time.monotonic()))
                self.running.wait()
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=deliver, daemon=True).start()
        while True:
            try:
                data = src.recv(1 << 16)
            except OSError:
                data = b""
            if from_client:
                self.client_bytes += len(data)
            if not data:
                due.put((0.0, None))
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            due.put((time.monotonic() + self.delay_s, data))

    def stop(self) -> None:
        self.running.set()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass


def sandbox_bin(folder: Path, extra: tuple[str, ...] = ()) -> Path:
    """A folder of links to the session's basic tools and `extra` ones (git, python3 …): a box's PATH that
    holds only those (start_sshd's path_only), whatever else this machine has installed (Docker, say)."""
    folder.mkdir(parents=True)
    for tool in SESSION_TOOLS + extra:
        found = shutil.which(tool, path="/usr/bin:/bin:/usr/sbin:/sbin")
        if found:
            (folder / tool).symlink_to(found)
    return folder


# One H100 on an R550 driver, as `nvidia-smi` answers the probe (preflight.PROBE_SCRIPT).
FAKE_NVIDIA_SMI = r"""#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6f1f3b4c-0000-0000-0000-000000000000)" ;;
  *compute_cap*) printf 'index, name, compute_cap, driver_version\n0, NVIDIA H100 80GB HBM3, 9.0, 550.54.15\n' ;;
  *driver_version*) echo "550.54.15" ;;
esac
"""  # noqa: E501


def fake_nvidia_smi(folder: Path) -> Path:
    """FAKE_NVIDIA_SMI as `folder`/nvidia-smi (the folder made if needed); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (folder / "nvidia-smi").chmod(0o755)
    return folder
