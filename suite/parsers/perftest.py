"""perftest's `ib_write_bw --report_gbits` output → the device, the QPs and its result lines.

     Dual-port       : OFF          Device         : mlx5_0           ← the settings block, two per line
     Number of qps   : 1            Transport type : IB
     ...
     #bytes  #iterations BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
     65536   55881440      0.00               97.66              0.186272      ← one line per message size

A duration run (`-D`) measures no peak (0.00): the average is the figure. Columns are separated by spaces or
tabs. Only `--report_gbits` output is read (the suite always asks for it): an MB/sec table is refused with the
flag to add, rather than guessing whether perftest's MB meant 10^6 or 2^20 bytes.
"""

from __future__ import annotations

import re
from typing import Any

from suite.parsers import ParseError

_SETTING = re.compile(r"\s*([A-Za-z][A-Za-z0-9 .*]*?)\s*:\s*(\S+(?:\[[^\]]*\])?)")
_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[(\w+/sec)\]\s+BW average\[(\w+/sec)\]")
_RESULT = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+))?\s*$")


def parse(text: str) -> dict[str, Any]:
    """{'test': 'RDMA_Write BW Test', 'device': 'mlx5_0', 'qps': 1, 'link_type': 'Ethernet', 'results':
    [{'bytes': 65536, 'iterations': 55881440, 'peak_gbps': 0.0, 'avg_gbps': 97.66, 'msg_rate_mpps': …}]}"""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if header is None:
        raise ParseError(
            "no `#bytes #iterations BW peak[…] BW average[…]` line: not ib_write_bw output, or the "
            "test did not reach its measurement (see its stderr)"
        )
    units = _HEADER.match(lines[header]).groups()
    if units != ("Gb/sec", "Gb/sec"):
        raise ParseError(f"line {header + 1}: bandwidth in {units[1]}; run ib_write_bw with --report_gbits")
    settings: dict[str, str] = {}
    for line in lines[:header]:
        for key, value in _SETTING.findall(line.replace("\t", "  ")):
            settings.setdefault(key.strip(), value)
    results = []
    for number, line in enumerate(lines[header + 1 :], start=header + 2):
        if line.strip().startswith("---") or not line.strip():
            if results:
                break
            continue
        found = _RESULT.match(line)
        if not found:
            raise ParseError(f"line {number}: not a result line: {line.strip()!r}")
        size, iterations, peak, avg, rate = found.groups()
        results.append(
            {
                "bytes": int(size),
                "iterations": int(iterations),
                "peak_gbps": float(peak),
                "avg_gbps": float(avg),
                "msg_rate_mpps": float(rate) if rate else None,
            }
        )
    if not results:
        raise ParseError(f"line {header + 1}: the result table has no line")
    title = next((line.strip() for line in lines[:header] if line.strip().endswith("Test")), None)
    qps = settings.get("Number of qps")
    return {
        "test": title,
        "device": settings.get("Device"),
        "qps": int(qps) if qps and qps.isdigit() else None,
        "link_type": settings.get("Link type"),
        "results": results,
    }


def average_gbps(parsed: dict[str, Any]) -> float:
    """The figure a port is judged by: the largest message size's average (a sweep's last line, a fixed size's
    one)."""
    return max(parsed["results"], key=lambda r: r["bytes"])["avg_gbps"]
