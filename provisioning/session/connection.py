"""One SSH connection to a rented host (Fabric), with known_hosts honoured and errors that explain.

    remote = Remote.open(parse_host("root@203.0.113.7:2222"), accept_new_host=True)
    remote.run(["nvidia-smi", "-L"]).stdout

Fabric on its own accepts any host key silently (paramiko's AutoAddPolicy, known_hosts never
read). Here known_hosts is loaded and a key that is not in it is refused, unless
ACCEPT_NEW_HOST=1: then it is accepted on this first use, its fingerprint printed, appended to
known_hosts and kept in `first_use` for the run's record. A key that differs from the recorded
one is always refused (paramiko's BadHostKeyException).

No environment variables are ever sent: commands are argv lists quoted by provisioning.session.shell and
run by `sh -c`; the laptop's cloud credentials never reach the host.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import paramiko
from fabric import Config, Connection
from invoke.exceptions import CommandTimedOut

from provisioning.session.hosts import HostSpec, SshTarget, parse_jump, resolve
from provisioning.session.shell import sh_command

TAIL_LINES = 15
KEEPALIVE_S = 30
"""An SSH keepalive this often: a NAT or a provider's relay drops idle TCP after minutes, and a
dead link is noticed (Fabric ignores ServerAliveInterval)."""
COMMAND_TIMEOUT_S = 600.0
"""Any command without its own timeout (a clone of a large origin is the slowest): after a laptop
sleep a read on a dead link would otherwise block for as long as TCP takes to give up."""
WATCHDOG_GRACE_S = 5.0  # beyond a command's timeout, before its connection is declared dead
CONNECT_TIMEOUT_S = 15  # the TCP connect, the SSH banner and the login, each


class RemoteError(RuntimeError):
    """A remote step that failed: host, command, exit code and the last lines of its output."""

    def __init__(
        self,
        host: str,
        what: str,
        *,
        command: str = "",
        exit_code: int | None = None,
        output: str = "",
        hint: str = "",
    ):
        self.host, self.what, self.command, self.exit_code, self.output, self.hint = (
            host,
            what,
            command,
            exit_code,
            output,
            hint,
        )
        super().__init__(self.describe())

    def describe(self) -> str:
        lines = [f"{self.host}: {self.what}"]
        if self.command:
            shown = self.command if len(self.command) <= 400 else self.command[:400] + " …"
            lines.append(f"  command: {shown}")
        if self.exit_code is not None:
            lines.append(f"  exit code: {self.exit_code}")
        tail = last_lines(self.output)
        if tail:
            lines.append("  last lines of output:")
            lines.extend("    " + line for line in tail.splitlines())
        if self.hint:
            lines.append(f"  next: {self.hint}")
        return "\n".join(lines)


class ConnectionLost(RemoteError):
    """The SSH connection could not be made or dropped; the host may still be running our job."""


def last_lines(text: str, n: int = TAIL_LINES) -> str:
    return "\n".join((text or "").rstrip().splitlines()[-n:])


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's form: SHA256:<base64 of sha256(key blob), unpadded>."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


@dataclass
class FirstUse:
    """A host key accepted on first use (ACCEPT_NEW_HOST=1)."""

    name: str
    key_type: str
    fingerprint: str
    known_hosts: str


class TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Refuse unknown host keys, or, when allowed, accept, print, record and remember them."""

    def __init__(self, label: str, known_hosts: Path, accept_new: bool, record: list[FirstUse]):
        self.label, self.known_hosts, self.accept_new, self.record = label, known_hosts, accept_new, record

    def missing_host_key(self, client, hostname, key):
        fp = fingerprint(key)
        if not self.accept_new:
            raise RemoteError(
                self.label,
                f"host key unknown: {hostname} offers {key.get_name()} {fp}, not in {self.known_hosts}",
                hint="check the fingerprint with the provider, then rerun with ACCEPT_NEW_HOST=1 "
                f"(or add the key with: ssh-keyscan -p PORT HOST >> {self.known_hosts})",
            )
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.known_hosts, "a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        self.record.append(FirstUse(hostname, key.get_name(), fp, str(self.known_hosts)))
        print(
            f"ACCEPT_NEW_HOST: trusting {hostname} on first use: {key.get_name()} {fp} (added to "
            f"{self.known_hosts})",
            file=sys.stderr,
            flush=True,
        )


@dataclass
class Result:
    stdout: str
    stderr: str
    exit_code: int


def connect_failure(error: BaseException) -> str:
    """What a failed connect means, in words a renter acts on (paramiko's own text: 'No existing session',
    '[Errno None] Unable to connect to port 22 on …', 'timed out')."""
    text = str(error)
    if isinstance(error, (socket.timeout, TimeoutError)) or text == "timed out":
        return "no answer (the address is unreachable, a firewall drops the port, or the box is not up yet)"
    if isinstance(error, (ConnectionRefusedError, paramiko.ssh_exception.NoValidConnectionsError)):
        return "connection refused: nothing listens on that port (the box's SSH port is another?)"
    if isinstance(error, paramiko.SSHException) and ("banner" in text or "No existing session" in text):
        return "the port answered but spoke no SSH (not sshd there, or sshd too busy to greet)"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass
class Remote:
    """A lazily opened Fabric connection with quoting, host-key policy and explained errors."""

    spec: HostSpec
    conn: Connection
    known_hosts: Path
    first_use: list[FirstUse] = field(default_factory=list)
    target: SshTarget | None = None
    """Where `spec` leads by the user's ssh configuration (hosts.resolve)."""
    hops: list["Remote"] = field(default_factory=list)
    """The ProxyJump gateways, in order, each under the same host-key policy."""

    @classmethod
    def open(
        cls,
        spec: HostSpec,
        *,
        key: str | None = None,
        known_hosts: str | os.PathLike | None = None,
        accept_new_host: bool = False,
        connect_timeout: int | None = None,
        ssh_config: str | None = None,
        gateway: "Remote | bool | None" = None,
        first_use: list[FirstUse] | None = None,
    ) -> "Remote":
        """`gateway`: None follows the configured ProxyJump; a Remote is the hop to go through;
        False goes direct (a hop of a chain, reached through the one before it)."""
        target = resolve(spec, ssh_config)
        keys = ([str(Path(key).expanduser())] if key else []) + [k for k in target.identity_files if k != key]
        connect_kwargs: dict = {"key_filename": keys} if keys else {}
        # banner/auth timeouts keep a half-open TCP connection from hanging the laptop forever.
        connect_timeout = CONNECT_TIMEOUT_S if connect_timeout is None else connect_timeout
        connect_kwargs.update(banner_timeout=connect_timeout, auth_timeout=connect_timeout)
        path = Path(known_hosts or target.known_hosts or "~/.ssh/known_hosts").expanduser()
        first_use = [] if first_use is None else first_use
        hops: list[Remote] = []
        if gateway is None:
            for hop in target.proxy_jumps:  # each hop reached through the one before it, as ssh -J does
                hops.append(
                    cls.open(
                        parse_jump(hop),
                        key=key,
                        known_hosts=path,
                        accept_new_host=accept_new_host,
                        connect_timeout=connect_timeout,
                        ssh_config=ssh_config,
                        gateway=hops[-1] if hops else False,
                        first_use=first_use,
                    )
                )
            gateway = hops[-1] if hops else None
        # Fabric's own ssh_config reading (no Include) stays off: `ssh -G` has answered already.
        conn = Connection(
            target.hostname,
            user=target.user,
            port=target.port,
            connect_timeout=connect_timeout,
            connect_kwargs=connect_kwargs,
            inline_ssh_env=True,
            gateway=gateway.conn if gateway else False,
            config=Config(overrides={"load_ssh_configs": False}),
        )
        remote = cls(spec=spec, conn=conn, known_hosts=path, first_use=first_use, target=target, hops=hops)
        if Path("/etc/ssh/ssh_known_hosts").is_file():
            conn.client.load_system_host_keys("/etc/ssh/ssh_known_hosts")
        if path.is_file():
            conn.client.load_host_keys(str(path))
        conn.client.set_missing_host_key_policy(TrustOnFirstUse(spec.label, path, accept_new_host, first_use))
        return remote

    @property
    def label(self) -> str:
        return self.spec.label

    def connect(self) -> None:
        """Open the connection now (preflight does, so that a bad key or host fails in seconds);
        after a drop, a fresh one (Fabric's cached SFTP session of the dead one is dropped first)."""
        if self.conn.transport is not None and not self.conn.is_connected:
            self.close()
        try:
            self.conn.open()
            for c in [self.conn, *(h.conn for h in self.hops)]:
                c.transport.set_keepalive(KEEPALIVE_S)
        except RemoteError:
            raise
        except paramiko.BadHostKeyException as e:
            raise RemoteError(
                self.label,
                f"HOST KEY CHANGED: {e.hostname} now offers {fingerprint(e.key)}, "
                f"known_hosts has {fingerprint(e.expected_key)}",
                hint=f"if the host was really re-created, remove its line from {self.known_hosts}; "
                "otherwise stop: someone may be in the middle",
            ) from None
        except paramiko.AuthenticationException as e:
            raise RemoteError(
                self.label,
                f"authentication failed ({e})",
                hint="load the key into ssh-agent, name it in ~/.ssh/config, or pass KEY=path/to/key",
            ) from None
        except (OSError, socket.timeout, paramiko.SSHException) as e:
            raise ConnectionLost(
                self.label,
                f"cannot connect: {connect_failure(e)}",
                hint="check HOST (user@host:port), that sshd runs and the port is open",
            ) from None

    def run(
        self,
        script: str | Iterable[object],
        *,
        check: bool = True,
        timeout: float | None = None,
        what: str = "remote command failed",
        hint: str = "",
    ) -> Result:
        """Run a POSIX script (or an argv list, quoted) under `sh -c`; raise RemoteError on a non-zero
        exit."""
        self.connect()
        command = sh_command(script)
        shown = script if isinstance(script, str) else " ".join(str(a) for a in script)
        timeout = COMMAND_TIMEOUT_S if timeout is None else timeout

        # Every command here is short or bounded: no answer in time means the link is gone (a
        # laptop asleep, a relay dropped). Invoke's own timeout stops a command that hangs on a
        # live link; on a dead one paramiko waits for the channel forever, so the watchdog closes
        # the transport, which wakes every wait, and callers retry on a fresh connection.
        def lost(output: str = "") -> ConnectionLost:
            return ConnectionLost(
                self.label,
                f"no answer within {timeout:.0f} s: connection treated as lost",
                command=shown,
                output=output,
                hint=hint or "rerun the same make command: it re-attaches",
            )

        fired = threading.Event()
        watchdog = threading.Timer(timeout + WATCHDOG_GRACE_S, lambda: (fired.set(), self._abandon()))
        watchdog.daemon = True
        watchdog.start()
        try:
            r = self.conn.run(command, hide=True, warn=True, in_stream=False, timeout=timeout)
        except CommandTimedOut as e:
            self.close()
            raise lost((e.result.stdout or "") + (e.result.stderr or "")) from None
        except (OSError, EOFError, socket.timeout, paramiko.SSHException) as e:
            if fired.is_set():
                raise lost() from None
            raise ConnectionLost(
                self.label,
                f"connection lost: {e}",
                command=shown,
                hint="rerun the same make command: it re-attaches",
            ) from None
        finally:
            watchdog.cancel()
        if fired.is_set():
            raise lost()
        result = Result(r.stdout, r.stderr, r.exited)
        if r.exited == -1 and not self.conn.is_connected:
            # The channel closed without an exit status because the connection went away.
            raise ConnectionLost(
                self.label,
                "connection lost during the command",
                command=shown,
                output=r.stdout + r.stderr,
                hint="rerun the same make command: it re-attaches",
            )
        if check and r.exited != 0:
            raise RemoteError(
                self.label, what, command=shown, exit_code=r.exited, output=r.stdout + r.stderr, hint=hint
            )
        return result

    def _abandon(self) -> None:
        transport = self.conn.transport
        if transport is not None:
            transport.close()

    def sftp(self) -> paramiko.SFTPClient:
        self.connect()
        try:
            return self.conn.sftp()
        except (OSError, EOFError, paramiko.SSHException) as e:
            if self.conn.is_connected:
                # The login works, the subsystem is refused: a marketplace's proxied "basic SSH"
                # relay, or an sshd without the sftp subsystem. Code and runs travel over SFTP.
                raise RemoteError(
                    self.label,
                    f"this SSH endpoint offers no SFTP ({e or 'subsystem refused'}): "
                    "make remote ships code and fetches runs over SFTP",
                    hint="use the provider's direct SSH connection (the box's public IP and mapped "
                    "port, often called 'SSH over exposed TCP'), not its proxied SSH; on your own "
                    "box enable `Subsystem sftp internal-sftp` in sshd_config",
                ) from None
            raise ConnectionLost(
                self.label,
                f"connection lost opening SFTP: {e}",
                hint="rerun the same make command: it re-attaches",
            ) from None

    def write_text(self, path: str, text: str, mode: int = 0o644) -> None:
        """Write a small file on the host through SFTP (no shell sees its content)."""
        sftp = self.sftp()
        with sftp.open(path, "w") as f:
            f.write(text.encode())
        sftp.chmod(path, mode)

    def close(self) -> None:
        for c in [self.conn, *(h.conn for h in reversed(self.hops))]:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is not an error worth raising
                pass
