"""Preflight: in a few seconds, before anything is copied, say whether the host can run the suite.

One SSH round trip runs PROBE_SCRIPT (POSIX sh) on the host; `parse_probe` turns its output into
HostFacts and `decide` chooses the runtime or names, in one line each, what is missing:

    docker present but no NVIDIA runtime: install nvidia-container-toolkit or use RUNTIME=host

Everything but the round trip is pure and tested on captured probe outputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .shell import quote

MIN_PYTHON = (3, 11)  # pyproject.toml: requires-python >= 3.11

# Free disk wanted under the remote directory, GiB: a CUDA torch venv is ~8 GiB, the GPU image
# (CUDA devel base + nccl-tests + nsys + torch) ~25 GiB; run directories with traces a few GiB more.
MIN_FREE_GIB = {("host", True): 15, ("host", False): 3, ("docker", True): 40, ("docker", False): 8}

PROBE_SCRIPT = r"""
section() { printf '@@%s\n' "$1"; }
ran() { printf '@@rc %s\n' "$?"; }
base=$1
section hostname; hostname; ran
section uname; uname -srm; ran
section home; printf '%s\n' "$HOME"; ran
section base; mkdir -p -- "$base" && cd -- "$base" && pwd -P; ran
section df; df -Pk -- "$base" 2>&1 | tail -n 1; ran
section gpus; nvidia-smi -L 2>&1; ran
section driver; nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -n 1; ran
section docker; command -v docker; ran
section docker_runtimes; docker info --format '{{json .Runtimes}}' 2>&1 | tail -n 3; ran
section nvidia_ctk; command -v nvidia-container-runtime-hook || command -v nvidia-ctk || command -v nvidia-container-cli; ran
section python; python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>&1; ran
section venv; python3 -c 'import venv, ensurepip' 2>&1; ran
section git; git --version 2>&1; ran
section tmux; command -v tmux; ran
section setsid; command -v setsid; ran
section container; if [ -f /.dockerenv ] || grep -qsE 'docker|containerd|kubepods|lxc' /proc/1/cgroup; then echo yes; else echo no; fi; ran
"""


def probe_command(base: str) -> str:
    """The script and its one argument, the remote directory, as a POSIX command line."""
    return "set -- " + quote(base) + "\n" + PROBE_SCRIPT


@dataclass
class Section:
    text: str
    rc: int


@dataclass
class HostFacts:
    """What preflight learned about the host."""

    hostname: str = ""
    uname: str = ""
    home: str = ""
    base: str = ""
    """The remote directory, absolute and created."""
    free_gib: float | None = None
    gpus: list[str] = field(default_factory=list)
    """`nvidia-smi -L` lines: 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)'."""
    gpu_error: str = ""
    driver: str | None = None
    docker: bool = False
    """A docker CLI is installed."""
    docker_usable: bool = False
    """`docker info` answered: an engine runs and this user may talk to it."""
    docker_error: str = ""
    nvidia_runtime: bool = False
    """Docker can give containers GPUs: an `nvidia` runtime is registered or the toolkit's hook is installed."""
    python: tuple[int, ...] | None = None
    venv: bool = False
    git: str | None = None
    tmux: bool = False
    setsid: bool = False
    in_container: bool = False

    def summary(self) -> list[str]:
        gpu = f"{len(self.gpus)} GPU(s): {self.gpus[0].split(' (UUID')[0]}" if self.gpus else "no NVIDIA GPU"
        lines = [
            f"host      {self.hostname} ({self.uname}){' — itself a container' if self.in_container else ''}",
            f"gpus      {gpu}" + (f" (+{len(self.gpus) - 1} more)" if len(self.gpus) > 1 else ""),
            f"driver    {self.driver or '—'}",
            f"disk      {self.free_gib:.1f} GiB free under {self.base}" if self.free_gib is not None else "disk      unknown",
            "docker    " + ("usable" if self.docker_usable else "installed but not usable" if self.docker else "absent")
            + (", NVIDIA runtime" if self.nvidia_runtime else ", no NVIDIA runtime" if self.docker_usable else ""),
            f"python    {'.'.join(map(str, self.python)) if self.python else 'absent'}"
            + ("" if self.venv or not self.python else " (no venv/ensurepip)"),
            f"git       {self.git or 'absent'};  detach with {'tmux' if self.tmux else 'setsid' if self.setsid else 'nohup'}",
        ]
        return lines


def split_sections(text: str) -> dict[str, Section]:
    out: dict[str, Section] = {}
    name, lines = None, []
    for line in text.splitlines():
        if line.startswith("@@rc "):
            if name is not None:
                rc = int(line[5:].strip() or 1)
                out[name] = Section("\n".join(lines).strip(), rc)
            name, lines = None, []
        elif line.startswith("@@"):
            name, lines = line[2:].strip(), []
        elif name is not None:
            lines.append(line)
    return out


def parse_probe(text: str) -> HostFacts:
    s = split_sections(text)

    def ok(key: str) -> str | None:
        sec = s.get(key)
        return sec.text if sec is not None and sec.rc == 0 else None

    facts = HostFacts(
        hostname=ok("hostname") or "",
        uname=ok("uname") or "",
        home=ok("home") or "",
        base=ok("base") or "",
    )
    df = ok("df")
    if df:
        parts = df.split()
        # POSIX df -P: Filesystem 1024-blocks Used Available Capacity Mounted-on
        if len(parts) >= 6 and parts[3].isdigit():
            facts.free_gib = int(parts[3]) / 1024**2
    gpus = s.get("gpus")
    if gpus is not None:
        lines = [l.strip() for l in gpus.text.splitlines() if re.match(r"\s*GPU \d+:", l)]
        if gpus.rc == 0 and lines:
            facts.gpus = lines
        else:
            facts.gpu_error = gpus.text.splitlines()[-1] if gpus.text else f"nvidia-smi exit {gpus.rc}"
    driver = ok("driver")
    if driver and re.match(r"^\d+(\.\d+)+$", driver.strip()):
        facts.driver = driver.strip()
    facts.docker = ok("docker") is not None
    runtimes = s.get("docker_runtimes")
    if facts.docker and runtimes is not None:
        facts.docker_usable = runtimes.rc == 0 and runtimes.text.startswith("{")
        if not facts.docker_usable:
            facts.docker_error = runtimes.text.splitlines()[-1] if runtimes.text else ""
    has_hook = ok("nvidia_ctk") is not None
    facts.nvidia_runtime = facts.docker_usable and (('"nvidia"' in (runtimes.text if runtimes else "")) or has_hook)
    py = ok("python")
    if py and re.match(r"^\d+\.\d+\.\d+$", py):
        facts.python = tuple(int(x) for x in py.split("."))
    facts.venv = ok("venv") is not None
    git = ok("git")
    facts.git = git.replace("git version", "").strip() if git else None
    facts.tmux = ok("tmux") is not None
    facts.setsid = ok("setsid") is not None
    facts.in_container = (ok("container") or "") == "yes"
    return facts


@dataclass
class Decision:
    runtime: str | None
    """'docker' or 'host'; None when refused."""
    problems: list[str]
    """One line each, saying what is missing and what to do; empty when the host can run."""
    notes: list[str] = field(default_factory=list)


def decide(facts: HostFacts, *, runtime: str | None, needs_gpu: bool, image: str | None = None) -> Decision:
    """Choose RUNTIME (the requested one, or docker when the host has Docker with GPU support) and check it."""
    problems: list[str] = []
    notes: list[str] = []
    if runtime not in (None, "", "docker", "host"):
        return Decision(None, [f"RUNTIME={runtime} unknown: use RUNTIME=docker or RUNTIME=host"])
    if not facts.base:
        problems.append("cannot create the remote directory: pass REMOTE_DIR=a writable path")
    if needs_gpu and not facts.gpus:
        problems.append(f"no NVIDIA GPU visible ({facts.gpu_error or 'nvidia-smi -L printed none'}): "
                        "check the driver (nvidia-smi) or run PROFILE=gloo-cpu")
    if not runtime:
        # Docker by default only for the GPU image on a host whose Docker gives containers GPUs;
        # a CPU profile runs in the host's own Python (the CPU image is for laptops, built locally).
        if facts.docker_usable and facts.nvidia_runtime and needs_gpu:
            runtime = "docker"
        elif facts.docker_usable and needs_gpu:
            problems.append("docker present but no NVIDIA runtime: install nvidia-container-toolkit or use RUNTIME=host")
            runtime = None
        else:
            runtime = "host"
            if facts.docker and not facts.docker_usable:
                notes.append(f"docker installed but not usable ({facts.docker_error or 'docker info failed'}): using RUNTIME=host")
    if runtime == "docker":
        if not facts.docker:
            problems.append("no docker on the host: install Docker Engine or use RUNTIME=host")
        elif not facts.docker_usable:
            problems.append(f"docker present but the engine does not answer ({facts.docker_error or 'docker info failed'}): "
                            "start dockerd, add the user to the docker group, or use RUNTIME=host")
        elif needs_gpu and not facts.nvidia_runtime:
            problems.append("docker present but no NVIDIA runtime: install nvidia-container-toolkit or use RUNTIME=host")
    if runtime == "host":
        if facts.python is None:
            problems.append("no python3 on the host: install Python ≥ 3.11 or use RUNTIME=docker")
        elif facts.python < MIN_PYTHON:
            problems.append(f"python3 is {'.'.join(map(str, facts.python))}, the suite needs ≥ 3.11: "
                            "install a newer Python or use RUNTIME=docker")
        elif not facts.venv:
            problems.append("python3 has no venv/ensurepip: apt-get install python3-venv, or use RUNTIME=docker")
    if facts.python is None and runtime == "docker":
        problems.append("no python3 on the host (needed to list and checksum the run directory): install python3")
    if not facts.git:
        problems.append("no git on the host (the code arrives as a git bundle): apt-get install git")
    if runtime and facts.free_gib is not None:
        need = MIN_FREE_GIB[(runtime, needs_gpu)]
        if facts.free_gib < need:
            problems.append(f"only {facts.free_gib:.1f} GiB free under {facts.base}, want ≥ {need} GiB for RUNTIME={runtime}: "
                            "free space or pass REMOTE_DIR= on a bigger disk")
    return Decision(runtime if not problems else None, problems, notes)
