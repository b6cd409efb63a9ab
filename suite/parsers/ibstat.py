"""InfiniBand/RoCE ports from `ibstat`, `ibv_devinfo` or /sys/class/infiniband → one dict per port:
{ca, ca_type, port, state, physical_state, rate, link_layer}.

`ibstat` prints `CA 'mlx5_0'` blocks with `Port N:` sections (State Active/Down/Init, Physical state
LinkUp/Polling/Disabled, Rate in Gb/s); when a device vanishes mid-listing it ends with an `ibpanic:` line,
kept in `errors`. `ibv_devinfo` prints `hca_id:` blocks with `port: N` and `state: PORT_ACTIVE (4)`; it has no
rate or physical state without -v. The sysfs files say `4: ACTIVE`, `5: LinkUp`, `400 Gb/sec (4X NDR)`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from suite.parsers import ParseError

_STATE_WORDS = {
    "PORT_ACTIVE": "Active",
    "PORT_DOWN": "Down",
    "PORT_INIT": "Initializing",
    "PORT_ARMED": "Armed",
    "ACTIVE": "Active",
    "DOWN": "Down",
    "INIT": "Initializing",
    "ARMED": "Armed",
}


def _rate(value: str | None) -> float | None:
    m = re.match(r"\s*(\d+(?:\.\d+)?)", value or "")
    return float(m.group(1)) if m else None


def _port(ca: dict[str, Any], port: int) -> dict[str, Any]:
    return {
        "ca": ca["ca"],
        "ca_type": ca.get("ca_type"),
        "port": port,
        "state": None,
        "physical_state": None,
        "rate": None,
        "link_layer": None,
    }


def parse_ibstat(text: str) -> dict[str, Any]:
    cas: list[dict[str, Any]] = []
    ports: list[dict[str, Any]] = []
    errors: list[str] = []
    keys = {"State": "state", "Physical state": "physical_state", "Rate": "rate", "Link layer": "link_layer"}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        ca = re.fullmatch(r"CA '([^']+)'", line)
        if ca:
            cas.append({"ca": ca.group(1)})
            continue
        if re.match(r"(ibpanic|ibwarn|ibstat):", line):
            errors.append(line)
            continue
        if not cas:
            raise ParseError(
                f"line {number}: {line[:60]!r} comes before any `CA '…'` line: not `ibstat` output"
            )
        port = re.fullmatch(r"Port (\d+):", line)
        if port:
            ports.append(_port(cas[-1], int(port.group(1))))
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ParseError(f"line {number}: {line[:60]!r} is not a `Key: value` line of `ibstat` output")
        if key == "CA type":
            cas[-1]["ca_type"] = value.strip()
        elif key in keys and ports and ports[-1]["ca"] == cas[-1]["ca"]:
            ports[-1][keys[key]] = _rate(value) if key == "Rate" else value.strip()
    if not cas:
        raise ParseError("line 1: no `CA '…'` line: not `ibstat` output (or no InfiniBand/RoCE device)")
    return {"tool": "ibstat", "ca_count": len(cas), "ports": ports, "errors": errors}


def parse_ibv_devinfo(text: str) -> dict[str, Any]:
    cas: list[dict[str, Any]] = []
    ports: list[dict[str, Any]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        value = value.strip()
        if key == "hca_id":
            cas.append({"ca": value})
        elif not cas:
            raise ParseError(
                f"line {number}: {line[:60]!r} comes before any `hca_id:` line: not `ibv_devinfo` output"
            )
        elif key == "port":
            if not value.isdigit():
                raise ParseError(
                    f"line {number}: port {value[:20]!r} is not a number: not `ibv_devinfo` output"
                )
            ports.append(_port(cas[-1], int(value)))
        elif key == "vendor_part_id":
            cas[-1]["ca_type"] = f"MT{value}"
        elif ports and ports[-1]["ca"] == cas[-1]["ca"] and key in ("state", "phys_state", "link_layer"):
            if key != "link_layer" and not re.fullmatch(r"[A-Z_]+ \(\d+\)", value):
                raise ParseError(
                    f"line {number}: {key} {value[:30]!r} is not `WORD (number)` as `ibv_devinfo` writes it: "
                    "the capture is damaged"
                )
            word = value.split(" (")[0]
            if key == "state":
                ports[-1]["state"] = _STATE_WORDS.get(word, word)
            elif key == "phys_state":
                ports[-1]["physical_state"] = {
                    "LINK_UP": "LinkUp",
                    "POLLING": "Polling",
                    "DISABLED": "Disabled",
                }.get(word, word)
            else:
                ports[-1]["link_layer"] = value
    if not cas:
        raise ParseError("line 1: no `hca_id:` line: not `ibv_devinfo` output (or no InfiniBand/RoCE device)")
    for ca in cas:
        ca_ports = [p for p in ports if p["ca"] == ca["ca"]]
        for p in ca_ports:
            p["ca_type"] = ca.get("ca_type")
        if not ca_ports:
            raise ParseError(
                f"hca {ca['ca']} lists no `port:` block: the output was cut short; capture it again"
            )
    return {"tool": "ibv_devinfo", "ca_count": len(cas), "ports": ports, "errors": []}


def port_from_sysfs(
    ca: str, port: int, state: str, phys_state: str, rate: str, link_layer: str
) -> dict[str, Any]:
    """The files of /sys/class/infiniband/<ca>/ports/<port>/ ('4: ACTIVE', '5: LinkUp', '400 Gb/sec (4X
    NDR)')."""
    word = state.strip().split(":")[-1].strip()
    return {
        "ca": ca,
        "ca_type": None,
        "port": port,
        "state": _STATE_WORDS.get(word, word),
        "physical_state": phys_state.strip().split(":")[-1].strip(),
        "rate": _rate(rate),
        "link_layer": link_layer.strip(),
    }


KIND = "ibstat"
IBV_KIND = "ibv_devinfo"


def sniff(head: bytes) -> bool:
    """`ibstat` (first line `CA 'mlx5_0'`) or `ibv_devinfo` (first line `hca_id: mlx5_0`)."""
    return kind_of(head.decode("utf-8", "replace")) is not None


def kind_of(text: str) -> str | None:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return IBV_KIND if first.startswith("hca_id:") else KIND if re.match(r"CA '[^']+'$", first) else None


def parse(text: str) -> dict[str, Any]:
    """Either tool's output, told apart by its first block line."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return parse_ibv_devinfo(text) if first.startswith("hca_id:") else parse_ibstat(text)


def parse_file(path: Path | str) -> dict[str, Any]:
    return parse(Path(path).read_text(encoding="utf-8"))
