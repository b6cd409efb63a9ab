"""HOST=user@host[:port] → a HostSpec; the one place that reads a host string."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A host name, an IPv4 address or a bracketed IPv6 address: no spaces, no shell characters.
_HOST_RE = re.compile(r"^(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(?P<port>\d{1,5}))?$")


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
