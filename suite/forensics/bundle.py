"""The evidence bundle: one archive a renter attaches to the provider's ticket, so the box is swapped, not
argued about.

    python -m suite bundle RUN [--scrub-hosts]   # on demand; `suite run` makes one on a fail, REJECT, hang

Each item is taken from what the run captured (raw/<stage>/<tool>.out), else from the tool on this machine,
else named in the bundle's manifest with the reason it is missing: nvidia-bug-report.sh, `nvidia-smi -q`,
`topo -m`, `nvlink -s/-e`, the kernel log's XID/SXID lines, IB/RoCE ports and counters, the failing
stages' logs (NCCL's debug lines, torchrun's and every rank's), versions, the verdicts that failed and the
hang forensics. Every text passes through redact.Redactor: credentials never leave; host names and
addresses only stay without --scrub-hosts.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from suite import run_schema
from suite.forensics.collect import RESULT as FORENSICS
from suite.forensics.redact import Redactor, run_hosts
from suite.results import verdict_from_dict
from suite.verdicts import failed_stages

PREFIX = "bundle-"
XID_LINE = re.compile(r"\b(?:S?Xid|NVRM: Xid|nvidia-nvswitch\d*: SXid)\b", re.I)
KERNEL_LOGS = ("dmesg.out", "sudo-dmesg.out", "journalctl-k.out", "host-kernel-log.txt")
BUG_REPORT_TIMEOUT_S = 600
LIVE_TIMEOUT_S = 60


@dataclass
class Item:
    name: str
    what: str
    files: list[str] = field(default_factory=list)
    source: str = ""
    missing: str = ""

    def entry(self) -> dict:
        out = {"item": self.name, "what": self.what, "included": bool(self.files)}
        out.update(
            {"files": self.files, "source": self.source} if self.files else {"why_missing": self.missing}
        )
        return out


MAX_FILE_BYTES = 16 << 20
"""A longer file (an NCCL debug log of a long sweep) keeps its first MiB and its last 15: a ticket's size."""


def read_capped(path: Path) -> bytes:
    size = path.stat().st_size
    if size <= MAX_FILE_BYTES or path.suffix == ".gz":
        return path.read_bytes()
    head, tail = 1 << 20, MAX_FILE_BYTES - (1 << 20)
    with open(path, "rb") as f:
        first = f.read(head)
        f.seek(size - tail)
        last = f.read()
    return first + f"\n[... {size - head - tail} bytes left out of the bundle ...]\n".encode() + last


class Bundle:
    """The archive being filled: every text redacted on the way in."""

    def __init__(self, run: Path, redactor: Redactor):
        self.run, self.redactor = run, redactor
        self.members: dict[str, bytes] = {}

    def add_text(self, name: str, text: str) -> str:
        self.members[name] = self.redactor.text(text).encode()
        return name

    def add_file(self, name: str, path: Path) -> str:
        data = read_capped(path)
        if path.suffix == ".gz":  # nvidia-bug-report.log.gz: redacted inside, packed again
            text = gzip.decompress(data).decode(errors="replace")
            self.members[name] = gzip.compress(self.redactor.text(text).encode())
            return name
        return self.add_text(name, data.decode(errors="replace"))


def raw_files(run: Path, *names: str) -> list[Path]:
    """The run's captures of these names, a multi-node run's (raw/<stage>/<node>/) included."""
    return sorted(p for name in names for p in run.glob(f"raw/**/{name}") if p.is_file() and p.stat().st_size)


def member_name(run: Path, path: Path) -> str:
    """raw/health/node-b/nvidia-smi-q.out → health.node-b.nvidia-smi-q.out"""
    return ".".join(path.relative_to(run / "raw").parts)


def live(argv: list[str], timeout_s: float = LIVE_TIMEOUT_S) -> tuple[str | None, str]:
    """A tool's output on this machine, or why there is none."""
    if not shutil.which(argv[0]):
        return None, f"{argv[0]} is not on this machine's PATH"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv)} did not finish within {timeout_s:.0f} s"
    if done.returncode != 0:
        return (
            None,
            f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[:200]}",
        )
    return done.stdout, ""


def captured_or_live(b: Bundle, label: str, argv: list[str], what: str) -> Item:
    """An item from the run's capture raw/*/<label>.out, else from the tool here."""
    item = Item(label, what)
    found = raw_files(b.run, f"{label}.out")
    if found:
        item.files = [b.add_file(member_name(b.run, p) + ".txt", p) for p in found]
        item.source = "the run's capture: " + ", ".join(str(p.relative_to(b.run)) for p in found)
        return item
    text, why = live(argv)
    if text is None:
        item.missing = f"the run captured none, and {why}"
    else:
        item.files, item.source = [b.add_text(f"{label}.txt", text)], f"`{' '.join(argv)}` on {_here()}"
    return item


def _here() -> str:
    return socket.gethostname()


def bug_report(b: Bundle) -> Item:
    item = Item(
        "nvidia-bug-report", "NVIDIA's own report (nvidia-bug-report.sh), what a provider asks for first"
    )
    found = raw_files(b.run, "nvidia-bug-report*.log.gz")
    if found:
        item.files = [b.add_file(p.name, p) for p in found]
        item.source = "the run's capture"
        return item
    if not shutil.which("nvidia-bug-report.sh"):
        item.missing = (
            "nvidia-bug-report.sh is not on this machine's PATH (it ships with the NVIDIA driver): "
            "run `python -m suite bundle RUN` on the box"
        )
        return item
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "nvidia-bug-report"
        try:
            subprocess.run(
                ["nvidia-bug-report.sh", "--output-file", str(out)],
                capture_output=True,
                timeout=BUG_REPORT_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            item.missing = f"nvidia-bug-report.sh did not finish within {BUG_REPORT_TIMEOUT_S} s"
            return item
        made = out.with_suffix(".log.gz")
        if not made.exists():
            item.missing = "nvidia-bug-report.sh ran but wrote no nvidia-bug-report.log.gz"
            return item
        item.files, item.source = [b.add_file(made.name, made)], f"nvidia-bug-report.sh on {_here()}"
    return item


def kernel_xids(b: Bundle) -> Item:
    item = Item("kernel-xid", "the kernel log's XID/SXID lines (GPU and NVSwitch errors)")
    logs = raw_files(b.run, *KERNEL_LOGS)
    if not logs:
        item.missing = "the run read no kernel log (the health stage's verdicts say why)"
        return item
    lines = [ln for p in logs for ln in p.read_text(errors="replace").splitlines() if XID_LINE.search(ln)]
    text = "\n".join(lines) + "\n" if lines else "(no XID or SXID line in the kernel log)\n"
    item.files = [b.add_text("kernel-xid.txt", text)]
    item.source = f"{len(lines)} lines of " + ", ".join(str(p.relative_to(b.run)) for p in logs)
    return item


def network_ports(b: Bundle) -> Item:
    item = Item("ib-ports", "IB/RoCE ports: state, rate and counters")
    found = raw_files(b.run, "ibstat.out", "ibv_devinfo.out", "*counters*")
    if found:
        item.files = [b.add_file(member_name(b.run, p) + ".txt", p) for p in found]
        item.source = "the run's capture"
        return item
    ports = sorted(Path("/sys/class/infiniband").glob("*/ports/*"))
    if not ports:
        item.missing = "the run captured no port and this machine has no /sys/class/infiniband"
        return item
    lines = []
    for port in ports:
        for f in (
            "state",
            "rate",
            *(f"counters/{c}" for c in ("port_xmit_data", "port_rcv_data", "symbol_error")),
        ):
            if (port / f).exists():
                lines.append(
                    f"{port.parent.parent.name} port {port.name} {f}: {(port / f).read_text().strip()}"
                )
    item.files, item.source = [b.add_text("ib-ports.txt", "\n".join(lines) + "\n")], "sysfs on " + _here()
    return item


def stage_logs(b: Bundle, stages: list[str]) -> Item:
    item = Item("stage-logs", "the failing stages' logs: torchrun's, every rank's, NCCL's debug lines")
    for stage in stages:
        for p in sorted((b.run / "raw" / stage).rglob("*")):  # every node's, on a multi-node run
            if p.is_file() and (p.suffix == ".log" or ".nccl-debug." in p.name):
                item.files.append(b.add_file("logs/" + "/".join(p.relative_to(b.run / "raw").parts), p))
    item.source = "raw/<stage>/ of " + ", ".join(stages) if item.files else ""
    item.missing = (
        "" if item.files else ("no stage failed" if not stages else "the failing stages left no log")
    )
    return item


def make_bundle(run: Path, *, scrub_hosts: bool = False, reason: str = "on demand") -> Path:
    """Write RUN/bundle-<time>.tar.gz and return its path."""
    run = Path(run)
    manifest = _json(run / "manifest.json") or {}
    verdicts = (_json(run / "verdicts.json") or {}).get("verdicts", [])
    b = Bundle(run, Redactor(scrub_hosts=scrub_hosts, hosts=run_hosts(manifest)))
    readable = [verdict_from_dict(v) for v in verdicts if not run_schema.verdict_problem(v)]
    stages = sorted(failed_stages(manifest, readable))
    items = [
        bug_report(b),
        captured_or_live(
            b, "nvidia-smi-q", ["nvidia-smi", "-q"], "every GPU's state: ECC, remapped rows, clocks"
        ),
        captured_or_live(b, "nvidia-smi-topo-m", ["nvidia-smi", "topo", "-m"], "the GPU/NIC topology matrix"),
        captured_or_live(b, "nvidia-smi-nvlink-s", ["nvidia-smi", "nvlink", "-s"], "NVLink state and speed"),
        captured_or_live(b, "nvidia-smi-nvlink-e", ["nvidia-smi", "nvlink", "-e"], "NVLink error counters"),
        kernel_xids(b),
        network_ports(b),
        stage_logs(b, stages),
        _from_run(
            b,
            "versions",
            "versions of the driver, CUDA, NCCL, torch and this suite",
            "versions.json",
            json.dumps(manifest.get("versions", {}), indent=1) if manifest.get("versions") else "",
        ),
        _from_run(
            b,
            "failed-verdicts",
            "the verdicts that failed or warned",
            "failed-verdicts.json",
            json.dumps([v for v in verdicts if v.get("status") in ("fail", "warn")], indent=1),
        ),
        _forensics(b),
    ]
    book = {
        "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run": manifest.get("run_id", run.name),
        "reason": reason,
        "hosts_scrubbed": scrub_hosts,
        "credentials_removed": b.redactor.removed,
        "items": [i.entry() for i in items],
    }
    b.members["MANIFEST.json"] = json.dumps(book, indent=1).encode()
    path = run / f"{PREFIX}{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in sorted(b.members.items()):
            info = tarfile.TarInfo(f"bundle/{name}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
    return path


def _from_run(b: Bundle, name: str, what: str, member: str, text: str) -> Item:
    item = Item(name, what)
    if text and text != "[]":
        item.files, item.source = [b.add_text(member, text + "\n")], "the run's manifest.json / verdicts.json"
    else:
        item.missing = "the run recorded none"
    return item


def _forensics(b: Bundle) -> Item:
    item = Item("forensics", "which rank on which host stopped where (hang forensics)")
    found = sorted(b.run.glob(f"raw/**/*{FORENSICS}"))
    item.files = [b.add_file("forensics/" + member_name(b.run, p), p) for p in found]
    item.source = "raw/<stage>/forensics.json" if found else ""
    item.missing = "" if found else "no launch of this run hung or failed"
    return item


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def latest(run: Path) -> Path | None:
    found = sorted(Path(run).glob(f"{PREFIX}*.tar.gz"))
    return found[-1] if found else None
