"""HOST=user@host[:port] → a HostSpec; the one place that reads a host string."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A host name, an IPv4 address or a bracketed IPv6 address: no spaces, no shell characters.
# Neither user nor host may begin with "-": `ssh -G -v` would read the host as an option.
_HOST_RE = re.compile(
    r"^(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]*)@)?"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._][A-Za-z0-9._-]*)(?::(?P<port>\d{1,5}))?$"
)


class HostSpecError(ValueError):
    """A HOST value that is not user@host[:port]."""


@dataclass(frozen=True)
class HostSpec:
    host: str
    """Host name or address as given (IPv6 without brackets)."""
    user: str | None = None
    """Login user; None lets ~/.ssh/config (or the local user name) decide."""
    port: int | None = None
    """SSH port; None lets ~/.ssh/config decide (22 by default)."""

    @property
    def label(self) -> str:
        """user@host:port as given, for messages."""
        text = f"{self.user}@{self.host}" if self.user else self.host
        return f"{text}:{self.port}" if self.port else text

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH files the key under: host, or [host]:port off port 22."""
        if self.port and self.port != 22:
            return f"[{self.host}]:{self.port}"
        return self.host


def parse_host(text: str) -> HostSpec:
    """`root@203.0.113.7:2222` → HostSpec("203.0.113.7", "root", 2222)."""
    m = _HOST_RE.match((text or "").strip())
    if not m:
        raise HostSpecError(f"HOST={text!r} is not user@host[:port] (for example HOST=root@203.0.113.7:2222)")
    port = int(m["port"]) if m["port"] else None
    if port is not None and not 0 < port < 65536:
        raise HostSpecError(f"HOST={text!r}: port {port} is outside 1–65535 (HOST=user@host[:port])")
    return HostSpec(host=m["host"].strip("[]"), user=m["user"], port=port)


@dataclass(frozen=True)
class SshTarget:
    """Where HOST really leads, as the user's own `ssh` resolves it (aliases, Include, Match,
    ProxyJump): paramiko's own ssh_config reader ignores Include, so an alias defined in an
    included file would silently become the bare name on port 22."""

    hostname: str
    user: str | None
    port: int
    identity_files: tuple[str, ...] = ()
    """Those that exist, in ssh's order."""
    known_hosts: str | None = None
    """The first UserKnownHostsFile."""
    proxy_jumps: tuple[str, ...] = ()
    """ProxyJump's hops in order ([user@]host[:port] each); () without one."""

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH files the key under: host, or [host]:port off port 22."""
        return HostSpec(self.hostname, self.user, self.port).known_hosts_name


def resolve(spec: HostSpec, ssh_config: str | None = None) -> SshTarget:
    """`ssh -G` for HOST: the user's ssh's answer. Without an ssh client, HOST as written."""
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("ssh") is None:
        return SshTarget(spec.host, spec.user, spec.port or 22)
    argv = [
        "ssh",
        "-G",
        *(["-F", ssh_config] if ssh_config else []),
        *(["-p", str(spec.port)] if spec.port else []),
        *(["-l", spec.user] if spec.user else []),
        "--",
        spec.host,
    ]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise HostSpecError(
            f"ssh -G {spec.host} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:] or ['?']}"
            " (check ~/.ssh/config or SSH_CONFIG=)"
        )
    values: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():
        key, _, value = line.partition(" ")
        values.setdefault(key.lower(), []).append(value.strip())
    one = lambda key: (values.get(key) or [None])[0]  # noqa: E731
    identities = tuple(
        str(Path(p).expanduser()) for p in values.get("identityfile", []) if Path(p).expanduser().is_file()
    )
    jump = one("proxyjump")
    known = one("userknownhostsfile")
    return SshTarget(
        hostname=one("hostname") or spec.host,
        user=one("user") or spec.user,
        port=int(one("port") or spec.port or 22),
        identity_files=identities,
        known_hosts=known.split()[0] if known else None,
        proxy_jumps=tuple(h.strip() for h in jump.split(",")) if jump and jump.lower() != "none" else (),
    )


def parse_jump(text: str) -> HostSpec:
    """A ProxyJump hop, `[user@]host[:port]` or `ssh://[user@]host[:port]`, as a HostSpec."""
    return parse_host(text[len("ssh://") :] if text.startswith("ssh://") else text)


def unnamed_user_note(spec: HostSpec, ssh_config: str | None = None) -> str | None:
    """HOST written without user@: whom ssh will log in as, said before the first connection (a rented box
    wants root@ or ubuntu@ far more often than this laptop's user); None when HOST names its user."""
    if spec.user:
        return None
    import getpass

    user = resolve(spec, ssh_config).user or getpass.getuser()
    source = "this laptop's user" if user == getpass.getuser() else "the User in your ssh_config"
    return (
        f"HOST={spec.label} names no user: logging in as {user!r} ({source}); write HOST=user@{spec.host} "
        "(root@, ubuntu@…) if the box wants another"
    )
