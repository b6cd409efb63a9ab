"""What never leaves in a bundle: credentials; and, when asked, the box's names and addresses.

    clean = Redactor(scrub_hosts=False, hosts=["gpu-a"]).text(raw)

Credentials are removed whatever the flag: the values of this process's environment variables whose names
say secret (…TOKEN, …SECRET…, …PASSWORD, …_KEY), any `NAME=value` or `NAME: value` whose name says so,
and the shapes of well-known keys (AWS access key ids, Hugging Face and GitHub tokens, Slack tokens, PEM
private keys, bearer headers). Host names and IPv4/IPv6 addresses are replaced by host-N / addr-N only with
scrub_hosts.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable, Mapping

SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|SESSION_?KEY|AUTH)", re.I
)
MIN_SECRET_LEN = 6
"""A shorter value (`1`, `true`) would blank innocent words everywhere; no real credential is that short."""
REDACTED = "[redacted]"
SHAPES = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"(?i)(authorization:\s*(?:bearer|basic)\s+)\S+"),
)
ASSIGNED = re.compile(
    r"(?P<name>\b[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>\s*[=:]\s*)(?P<quote>[\"']?)(?P<value>[^\s\"',;]+)"
)
IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
"""A candidate only: ipaddress decides (a time such as 12:34:56 is not an address)."""
KEPT_ADDRESSES = {"127.0.0.1", "0.0.0.0", "255.255.255.255", "::1", "::"}


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of variables whose names say they are secret, longest first (a value inside another)."""
    found = {v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(found, key=len, reverse=True)


def run_hosts(manifest: Mapping) -> list[str]:
    """The host names a run's files may carry: this machine's, the run's host and its nodes."""
    hosts = [socket.gethostname(), str((manifest.get("host") or {}).get("hostname", ""))]
    return hosts + [str(n) for n in manifest.get("nodes", []) if isinstance(n, str)]


class Redactor:
    def __init__(
        self,
        *,
        scrub_hosts: bool = False,
        hosts: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
    ):
        self.secrets = secret_values(os.environ if env is None else env)
        self.scrub_hosts = scrub_hosts
        self.hosts = sorted({h for h in hosts if h and len(h) > 1}, key=len, reverse=True)
        self.names: dict[str, str] = {}
        self.removed = 0

    def text(self, text: str) -> str:
        for value in self.secrets:
            if value in text:
                self.removed += text.count(value)
                text = text.replace(value, REDACTED)
        for shape in SHAPES:
            text = shape.sub(self._shape, text)
        text = ASSIGNED.sub(self._assigned, text)
        if self.scrub_hosts:
            text = self._hosts(text)
        return text

    def _shape(self, m: re.Match) -> str:
        self.removed += 1
        return (m.group(1) if m.re.groups else "") + REDACTED

    def _assigned(self, m: re.Match) -> str:
        if not SECRET_NAME.search(m["name"]) or m["value"] == REDACTED or len(m["value"]) < MIN_SECRET_LEN:
            return m.group(0)
        self.removed += 1
        return f"{m['name']}{m['sep']}{m['quote']}{REDACTED}"

    def _placeholder(self, kind: str, value: str) -> str:
        if value not in self.names:
            self.names[value] = f"{kind}-{sum(1 for n in self.names.values() if n.startswith(kind)) + 1}"
        return self.names[value]

    def _hosts(self, text: str) -> str:
        for host in self.hosts:
            text = re.sub(
                rf"(?<![\w-]){re.escape(host)}(?![\w-])", lambda m: self._placeholder("host", m[0]), text
            )

        def address(m: re.Match) -> str:
            try:
                ipaddress.ip_address(m[0])
            except ValueError:
                return m[0]
            return m[0] if m[0] in KEPT_ADDRESSES else self._placeholder("addr", m[0])

        return IPV6.sub(address, IPV4.sub(address, text))
