"""Thin adapters that ask the machine about itself: run a tool and keep its output untouched, read sysfs, ask
torch.

Everything here records failures as values (a missing binary, a non-zero exit, a timeout) so the
topology stage can judge them instead of crashing.
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence


@dataclass
class ToolRun:
    name: str
    """File stem under raw/<stage>/: nvidia-smi-topo-m → nvidia-smi-topo-m.txt."""
    argv: list[str]
    status: str
    """ok, missing (not on PATH), failed (non-zero exit) or timeout."""
    exit_code: int | None
    stdout: str
    detail: str
    """Why it did not work, one line: 'nvidia-smi: not on PATH', 'exit 9: NVIDIA-SMI has failed …'."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("stdout")
        return data


def run_tool(name: str, argv: Sequence[str], raw_dir: Path, timeout_s: float = 60.0) -> ToolRun:
    """Run argv; its stdout goes untouched to raw_dir/<name>.txt (stderr, when any, to <name>.stderr.txt)."""
    argv = list(argv)
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return ToolRun(name, argv, "missing", None, "", f"{argv[0]}: not on PATH")
    except subprocess.TimeoutExpired as e:
        (raw_dir / f"{name}.txt").write_bytes(e.stdout or b"")
        return ToolRun(
            name,
            argv,
            "timeout",
            None,
            (e.stdout or b"").decode("utf-8", "replace"),
            f"{' '.join(argv)} did not finish in {timeout_s:.0f} s",
        )
    (raw_dir / f"{name}.txt").write_bytes(proc.stdout)
    if proc.stderr:
        (raw_dir / f"{name}.stderr.txt").write_bytes(proc.stderr)
    stdout = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        return ToolRun(
            name,
            argv,
            "failed",
            proc.returncode,
            stdout,
            f"exit {proc.returncode}: {first[0] if first else 'no output'}",
        )
    return ToolRun(name, argv, "ok", 0, stdout, "")


def numa_nodes_sysfs(root: Path = Path("/sys/devices/system/node")) -> dict[str, str]:
    """{'node0': '0-47,96-143', …} from sysfs; empty where the kernel exposes no NUMA nodes (macOS, some
    containers)."""
    nodes = {}
    for path in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        try:
            nodes[path.name] = (path / "cpulist").read_text().strip()
        except OSError:
            continue
    return nodes


def cpu_model_procfs(path: Path = Path("/proc/cpuinfo")) -> str | None:
    """The first 'model name' of /proc/cpuinfo (the fallback where lscpu is missing)."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model name", "cpu model"):
                return value.strip()
    except OSError:
        pass
    return None


def usable_cpus() -> int:
    """CPUs this process may run on (a container's cpuset, taskset), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def torch_facts(want_cuda: bool) -> dict[str, Any]:
    """torch's version, the CUDA it was built for, NCCL's version and the CUDA devices it sees.

    With want_cuda (a GPU profile) this imports torch (≈ 1.3 s, more on a loaded machine) and asks it;
    without, it reads torch's installed version from the package metadata and leaves CUDA/NCCL unasked,
    which keeps the CPU rehearsal fast. On a CPU build `torch.cuda.nccl.version()` raises: nccl stays
    None with the reason.
    """
    if not want_cuda:
        from importlib import metadata

        try:
            version = metadata.version("torch")
        except metadata.PackageNotFoundError:
            version = None
        return {
            "torch": version,
            "cuda": None,
            "python": platform.python_version(),
            "nccl": None,
            "nccl_error": "not asked on a CPU profile",
            "cuda_available": False,
            "cuda_devices": 0,
            "cuda_names": [],
        }

    import torch

    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "nccl": None,
        "nccl_error": None,
        "cuda_available": False,
        "cuda_devices": 0,
        "cuda_names": [],
    }
    try:
        version = torch.cuda.nccl.version()
        facts["nccl"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    except Exception as e:  # noqa: BLE001 - a CPU build has no NCCL; that is a fact, not a crash
        facts["nccl_error"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
        facts["cuda_devices"] = torch.cuda.device_count() if facts["cuda_available"] else 0
        facts["cuda_names"] = [torch.cuda.get_device_name(i) for i in range(facts["cuda_devices"])]
    except Exception as e:  # noqa: BLE001 - a broken driver is a finding, reported by the stage's verdicts
        facts["cuda_error"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    return facts


def nccl_tests_versions(env: dict[str, str] | None = None) -> dict[str, str | None]:
    """nccl-tests' release and the NCCL it was compiled against, from the files the image's build
    leaves beside the binaries (Dockerfile: VERSION, NCCL_VERSION in /opt/nccl-tests).

    The folder is $CARDTIME_NCCL_TESTS_DIR's parent, else that of all_reduce_perf on PATH; a
    nccl-tests built by hand has no VERSION ('unknown') nor NCCL_VERSION (None: unknown, not
    guessed). No nccl-tests at all: both None, and the report says so on its first screen.
    """
    import shutil

    env = os.environ if env is None else env
    where = env.get("CARDTIME_NCCL_TESTS_DIR") or (
        os.path.dirname(shutil.which("all_reduce_perf", path=env.get("PATH")) or "") or None
    )
    out: dict[str, str | None] = {"nccl_tests": None, "nccl_tests_nccl": None}
    if not where:
        return out
    if not any(Path(where).glob("*_perf*")):
        return out
    out["nccl_tests"] = "unknown"
    for key, name in (("nccl_tests", "VERSION"), ("nccl_tests_nccl", "NCCL_VERSION")):
        try:
            out[key] = (Path(where).parent / name).read_text().strip() or out[key]
        except OSError:
            pass
    return out


def nccl_versions_differ(torch_nccl: str | None, nccl_tests_nccl: str | None) -> bool:
    """Whether torch's NCCL and nccl-tests' NCCL are two libraries ('2.29.7' vs '2.26.2+cuda12.8'); False if
    one is unknown."""
    import re

    def numbers(v: str | None) -> tuple[int, ...] | None:
        m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", v or "")
        return tuple(int(x) for x in m.groups()) if m else None

    a, b = numbers(torch_nccl), numbers(nccl_tests_nccl)
    return a is not None and b is not None and a != b
