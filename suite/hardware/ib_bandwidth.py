"""`ib_write_bw` per IB port from each GPU's nearest NIC, held against the port's rate.

    ports = read_ports()                                       # /sys/class/infiniband/<dev>/ports/<n>/…
    rows = measure(ports, facts_topology, raw_dir, seconds=5)  # one server/client pair per port, here
    ib_verdict(rows, on_gpu=True)                              # fail naming every port far below its rate

The pairs run on one host: the server on one HCA (`ib_write_bw -d mlx5_1 -i 1 -p P …`), the client on the port
being tested, meeting through `localhost` for the out-of-band exchange (`ib_write_bw -d mlx5_0 -i 1 -p P …
localhost`), so the data crosses the fabric between the two HCAs (the leaf switch), or the HCA's own loopback
when the box has one NIC. The tested ports are the GPUs' nearest NICs (the best `nvidia-smi topo -m` path: PIX
before PXB, PHB, NODE, SYS), the ones NCCL puts each GPU's traffic on. Where perftest is missing, no pair runs
and the check stays open with the install line; where no HCA exists, the check does not apply.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from suite.hardware.fabric_counters import IB_ROOT
from suite.parsers import ParseError, perftest
from suite.results import Row, Verdict
from suite.verdicts import NOT_APPLICABLE, verdicts_for

TOOL = "ib_write_bw"
INSTALL = (
    "perftest is not installed: `apt-get install perftest` on the host (RUNTIME=host), or rebuild the image, "
    "whose Dockerfile installs it (RUNTIME=docker)"
)
RATE_SHARE = 0.80
"""A port below 80 % of its rate is far below it: one healthy QP pair reaches 91–98 % of the line rate at 64
KiB (tests/data/perftest: 97.66 of 100 Gb/s RoCE, 363 of 400), so 80 % leaves room for headers and a busy host
and still catches a port trained down a speed or width (half or a quarter of its rate)."""
PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")
"""`nvidia-smi topo -m` GPU–NIC paths, nearest first."""
_RATE = re.compile(r"\s*([\d.]+)\s*Gb/sec")


@dataclass(frozen=True)
class IbPort:
    device: str
    port: int
    rate_gbps: float | None
    """sysfs `rate` ('400 Gb/sec (4X NDR)'): what the port trained to."""
    state: str
    """sysfs `state` ('4: ACTIVE')."""
    link_layer: str

    @property
    def name(self) -> str:
        return f"{self.device} port {self.port}"

    @property
    def active(self) -> bool:
        return "ACTIVE" in self.state


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def read_ports(root: Path = IB_ROOT) -> list[IbPort]:
    out = []
    for port_dir in sorted(root.glob("*/ports/*")):
        if not port_dir.name.isdigit():
            continue
        found = _RATE.match(_read(port_dir / "rate"))
        out.append(
            IbPort(
                port_dir.parent.parent.name,
                int(port_dir.name),
                float(found.group(1)) if found else None,
                _read(port_dir / "state"),
                _read(port_dir / "link_layer"),
            )
        )
    return out


def nearest_nics(topology: dict) -> dict[str, list[str]]:
    """{'mlx5_0': ['GPU0', 'GPU1'], …}: each GPU's nearest NIC(s) by device name, from topology's published
    matrix."""
    links = topology.get("gpu_nic_links") or {}
    legend = topology.get("nic_legend") or {}
    by_gpu: dict[str, dict[str, str]] = {}
    for pair, path in links.items():
        gpu, nic = pair.split("-", 1)
        by_gpu.setdefault(gpu, {})[legend.get(nic, nic)] = path
    out: dict[str, list[str]] = {}
    for gpu, paths in sorted(by_gpu.items()):
        ranked = [p for p in paths.values() if p in PATHS]
        if not ranked:
            continue
        best = min(ranked, key=PATHS.index)
        for nic in sorted(n for n, p in paths.items() if p == best):
            out.setdefault(nic, []).append(gpu)
    return out


def pairs(ports: list[IbPort], nearest: dict[str, list[str]]) -> list[tuple[IbPort, IbPort, list[str]]]:
    """(client port tested, server port, its GPUs): every active port of a nearest NIC (every active port when
    the matrix names none), each served by the next active port in the list (itself when it is the only
    one)."""
    active = [p for p in ports if p.active]
    tested = [p for p in active if p.device in nearest] or active
    return [(p, active[(active.index(p) + 1) % len(active)], nearest.get(p.device, [])) for p in tested]


def command(port: IbPort, tcp_port: int, seconds: float, server_host: str | None) -> list[str]:
    argv = [
        TOOL,
        "-d",
        port.device,
        "-i",
        str(port.port),
        "-p",
        str(tcp_port),
        "-D",
        f"{seconds:g}",
        "-F",
        "--report_gbits",
        "-q",
        "2",
    ]
    return argv + ([server_host] if server_host else [])


def run_pair(client: IbPort, server: IbPort, tcp_port: int, seconds: float, raw_dir: Path) -> tuple[str, str]:
    """The client's stdout and a failure note ('' when it ran); both sides' output kept under raw_dir."""
    tag = f"ib_write_bw-{client.device}-{client.port}"
    with open(raw_dir / f"{tag}.server.txt", "wb") as server_log:
        served = subprocess.Popen(
            command(server, tcp_port, seconds, None),
            stdout=server_log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            time.sleep(1.0)  # the server listens before the client connects (perftest has no ready signal)
            done = subprocess.run(
                command(client, tcp_port, seconds, "localhost"),
                capture_output=True,
                timeout=seconds + 60,
                stdin=subprocess.DEVNULL,
            )
            (raw_dir / f"{tag}.txt").write_bytes(done.stdout + done.stderr)
            note = "" if done.returncode == 0 else f"exit {done.returncode}: see raw/burnin/{tag}.txt"
            return done.stdout.decode("utf-8", "replace"), note
        except subprocess.TimeoutExpired:
            return "", f"no result in {seconds + 60:g} s: see raw/burnin/{tag}.txt"
        finally:
            served.kill()
            served.wait()


def measure(
    ports: list[IbPort], topology: dict, raw_dir: Path, *, seconds: float, stage: str, say=lambda _: None
) -> list[Row]:
    """Rows per tested port: its rate and its ib_write_bw average; a `note` row where nothing could be
    measured."""
    base = dict(stage=stage, case="ib_write_bw", source="perftest")
    if not ports:
        return [Row(**base, metric="note", value=float("nan"), unit="", text="no-hca")]
    planned = pairs(ports, nearest_nics(topology))
    if not planned:
        return [Row(**base, metric="note", value=float("nan"), unit="", text="no-active-port")]
    if not shutil.which(TOOL):
        return [Row(**base, metric="note", value=float("nan"), unit="", text="no-perftest")]
    rows = []
    for index, (client, server, gpus) in enumerate(planned):
        say(f"ib_write_bw {client.name} (server {server.name})")
        text = f"{client.name} (nearest to {', '.join(gpus) or 'no GPU named'}; server {server.name})"
        rows.append(
            Row(
                **base,
                metric="rate_Gbps",
                value=client.rate_gbps or float("nan"),
                unit="Gb/s",
                text=client.name,
            )
        )
        out, note = run_pair(client, server, 18515 + index, seconds, raw_dir)
        try:
            value = perftest.average_gbps(perftest.parse(out)) if not note else None
        except ParseError as e:
            note = f"unreadable output ({e})"
            value = None
        rows.append(
            Row(
                **base,
                metric="avg_Gbps",
                value=value if value is not None else float("nan"),
                unit="Gb/s",
                text=text if not note else f"{text}: {note}",
            )
        )
    return rows


def ib_verdict(rows: list[Row], *, on_gpu: bool, stage: str) -> Verdict:
    v = verdicts_for(stage)
    mine = [r for r in rows if r.case == "ib_write_bw"]
    expected = f"ib_write_bw from each GPU's nearest NIC ≥ {RATE_SHARE:.0%} of its port's rate"
    if not on_gpu:
        return v.skip(
            "ib_write_bw",
            expected=expected,
            observed="the rehearsal runs on CPU ranks",
            reason="no HCA in the rehearsal: ib_write_bw runs on the GPU box, per IB port",
        )
    notes = {r.text for r in mine if r.metric == "note"}
    if "no-perftest" in notes:
        return v.skip(
            "ib_write_bw",
            expected=expected,
            observed="IB ports present, ib_write_bw not on PATH",
            reason=INSTALL,
        )
    if not mine:
        return v.skip(
            "ib_write_bw",
            expected=expected,
            observed="no ib_write_bw row",
            reason="not measured: burnin.ib_seconds is 0, or the captures hold no ib_write_bw output",
        )
    if "no-active-port" in notes:
        return v.skip(
            "ib_write_bw",
            expected=expected,
            observed="IB ports present, none ACTIVE",
            reason="no ACTIVE IB port to measure: see health's IB port check (`ibstat`)",
        )
    if "no-hca" in notes:
        return v.skip(
            "ib_write_bw",
            expected=expected,
            observed="no port under /sys/class/infiniband",
            reason=f"{NOT_APPLICABLE}: no HCA on this host",
        )
    rates = {r.text: r.value for r in mine if r.metric == "rate_Gbps"}
    measured = [r for r in mine if r.metric == "avg_Gbps"]
    failed = [r.text for r in measured if r.value != r.value]  # NaN: the pair did not run to a result
    low, fine = [], []
    for r in measured:
        if r.value != r.value:
            continue
        port = r.text.split(" (")[0]
        rate = rates.get(port)
        line = (
            f"{port} {r.value:.1f} of {rate:g} Gb/s"
            if rate == rate and rate
            else f"{port} {r.value:.1f} Gb/s"
        )
        (low if rate == rate and rate and r.value < RATE_SHARE * rate else fine).append(line)
    if low:
        return v.fail(
            "ib_write_bw",
            expected=expected,
            observed="; ".join(low + failed),
            reason="these ports carry far less than their rate: a cable, transceiver or switch port "
            "trained down or erroring (compare `ibstat` and the fabric counters); ask the provider",
        )
    if failed:
        return v.skip(
            "ib_write_bw",
            expected=expected,
            observed="; ".join(failed + fine),
            reason="ib_write_bw gave no result on these ports (see raw/burnin/ib_write_bw-*.txt): "
            "undecided, not passed",
        )
    return v.passed(
        "ib_write_bw",
        expected=expected,
        observed="; ".join(fine),
        reason="every tested port carries its rate",
    )
