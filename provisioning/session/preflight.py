"""Preflight: in a few seconds, before anything is copied, say whether the host can run the suite.

One SSH round trip runs PROBE_SCRIPT (POSIX sh) on the host; `parse_probe` turns its output into
HostFacts and `decide` chooses the runtime or names, in one line each, what is missing:

    docker present but no NVIDIA runtime: install nvidia-container-toolkit or use RUNTIME=host

Everything but the round trip is pure and tested on captured probe outputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from provisioning.runtime import efa
from provisioning.session.shell import quote
from suite.hardware import cuda_lines, gpu_host_checks

MIN_PYTHON = (3, 11)  # pyproject.toml: requires-python >= 3.11

# Free disk wanted under the remote directory, GiB: a CUDA torch venv is ~8 GiB, the GPU image
# (CUDA devel base + nccl-tests + nsys + torch) ~25 GiB; run directories with traces a few GiB more.
MIN_FREE_GIB = {("host", True): 15, ("host", False): 3, ("docker", True): 40, ("docker", False): 8}

# Where the remote directory goes when REMOTE_DIR is not given: on a container pod the home folder
# is on the container disk, lost when the pod stops, while a mounted volume (/workspace on most
# GPU marketplaces) persists; so a writable mounted volume first, else ~/cardtime.
PERSISTENT_VOLUMES = ("/workspace", "/data", "/mnt/data")
REMOTE_DIR_RULE = r"""
remote_dir() {  # remote_dir REMOTE_DIR MOUNTS VOLUME...: REMOTE_DIR, else VOLUME/cardtime of the first mounted one
  given=$1 mounts=$2; shift 2
  if [ -n "$given" ]; then printf '%s\n' "$given"; return; fi
  for v in "$@"; do
    if grep -qsE "^[^ ]+ $v " "$mounts" && [ -w "$v" ]; then printf '%s\n' "$v/cardtime"; return; fi
  done
  printf '%s\n' cardtime
}
"""  # noqa: E501
VOLUMES_ARGS = "/proc/mounts " + " ".join(PERSISTENT_VOLUMES)

PROBE_SCRIPT = (
    REMOTE_DIR_RULE
    + r"""
section() { printf '@@%s\n' "$1"; }
ran() { printf '@@rc %s\n' "$?"; }
base=$(remote_dir "$1" """
    + VOLUMES_ARGS
    + r""")
section hostname; hostname; ran
section uname; uname -srm; ran
section home; printf '%s\n' "$HOME"; ran
section base; mkdir -p -- "$base" && cd -- "$base" && pwd -P; ran
section df; df -Pk -- "$base" 2>&1 | tail -n 1; ran
section gpus; nvidia-smi -L 2>&1; ran
section driver; nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -n 1; ran
section gpu_query; """
    + cuda_lines.GPU_QUERY
    + r""" 2>&1; ran
section docker; command -v docker; ran
section docker_runtimes; docker info --format '{{json .Runtimes}}' 2>&1 | tail -n 3; ran
section nvidia_ctk; command -v nvidia-container-runtime-hook || command -v nvidia-ctk || command -v nvidia-container-cli; ran
section ids; id -u && id -g; ran
section container_env; tr '\0' '\n' </proc/1/environ 2>/dev/null | grep -E '^(PATH|NCCL_[A-Z0-9_]*|CARDTIME_[A-Z0-9_]*)='; true; ran
# The container's own PATH (a pod's /opt/conda/bin), which a non-interactive SSH session does not get.
cpath=$(tr '\0' '\n' </proc/1/environ 2>/dev/null | sed -n 's/^PATH=//p')
section pythons
for p in python3.13 python3.12 python3.11 python3 /opt/conda/bin/python3 "$HOME/miniconda3/bin/python3" \
         "$HOME/miniforge3/bin/python3" "$HOME/anaconda3/bin/python3" /usr/local/bin/python3 "$HOME/.local/bin/python3.12" \
         "$HOME/.local/bin/python3.11"; do
  exe=$(PATH="$PATH${cpath:+:$cpath}" command -v "$p" 2>/dev/null) || continue
  "$exe" -c 'import sys
try:
    import venv, ensurepip; ok = 1
except Exception:
    ok = 0
print(sys.executable, "%d.%d.%d" % sys.version_info[:3], ok)' 2>/dev/null
done; true; ran
section path; printf '%s\n' "$PATH"; ran
section tools
for t in all_reduce_perf nsys; do PATH="$PATH${cpath:+:$cpath}:/opt/nccl-tests/bin:/usr/local/cuda/bin" command -v "$t"; done
ls -d /opt/nvidia/nsight-systems/*/bin/nsys /opt/nvidia/nsight-systems-cli/*/bin/nsys 2>/dev/null | tail -n 1; true; ran
section shm; df -Pk /dev/shm 2>&1 | tail -n 1; ran
section smi_q; nvidia-smi -q 2>/dev/null; true; ran
section fabricmanager; if command -v systemctl >/dev/null; then systemctl is-active nvidia-fabricmanager 2>&1; else pgrep -x nv-fabricmanager >/dev/null && echo active || echo unknown; fi; true; ran
section docker_df; d=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null) && df -Pk -- "$d" 2>&1 | tail -n 1; ran
section git; git --version 2>&1; ran
section tmux; command -v tmux; ran
section setsid; command -v setsid; ran
section infiniband; ls /dev/infiniband 2>/dev/null; true; ran
section box_tools
if dmesg >/dev/null 2>&1; then k=dmesg; elif sudo -n dmesg >/dev/null 2>&1; then k=sudo; elif journalctl -k -b -n 1 -q >/dev/null 2>&1; then k=journalctl; else k=none; fi
if [ "$k" = dmesg ] && dmesg 2>/dev/null | head -n 5 | grep -qi gvisor; then k=gvisor; fi
echo "kernel_log $k"; echo "dcgmi $(command -v dcgmi || echo -)"; echo "ib_tool $(command -v ibstat || command -v ibv_devinfo || echo -)"; true; ran
section container; if [ -f /.dockerenv ] || grep -qsE 'docker|containerd|kubepods|lxc' /proc/1/cgroup; then echo yes; else echo no; fi; ran
"""  # noqa: E501
    + f"section efa; {efa.PROBE}; ran\n"
)


def probe_command(base: str) -> str:
    """The script and its one argument, the remote directory ('' = the rule above), as a POSIX command
    line."""
    return "set -- " + quote(base) + "\n" + PROBE_SCRIPT


def resolve_dir_command(base: str) -> str:
    """The remote directory's absolute path by the same rule, if it exists (for `make remote-status`)."""
    return (
        "set -- "
        + quote(base)
        + "\n"
        + REMOTE_DIR_RULE
        + 'cd -- "$(remote_dir "$1" '
        + VOLUMES_ARGS
        + ')" 2>/dev/null && pwd -P'
    )


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
    gpu_query: str = ""
    """cuda_lines.GPU_QUERY's answer (compute capability and driver per GPU): the CUDA line's choice."""
    docker: bool = False
    """A docker CLI is installed."""
    docker_usable: bool = False
    """`docker info` answered: an engine runs and this user may talk to it."""
    docker_error: str = ""
    nvidia_runtime: bool = False
    """Docker can give containers GPUs: an `nvidia` runtime is registered or the toolkit's hook is
    installed."""
    python: tuple[int, ...] | None = None
    """The newest Python found (python3.13 … python3, conda prefixes, the container's PATH)."""
    python_exe: str | None = None
    venv: bool = False
    pythons: list[tuple[str, tuple[int, ...], bool]] = field(default_factory=list)
    """Every Python the probe found: (executable, version, has venv+ensurepip)."""
    uid: int | None = None
    gid: int | None = None
    session_path: str = ""
    """PATH of a non-interactive SSH session, the one the detached job starts with."""
    container_env: dict[str, str] = field(default_factory=dict)
    """PATH, NCCL_* and CARDTIME_* of the host's pid 1 (a container box's image environment)."""
    nccl_tests: str | None = None
    nsys: str | None = None
    shm_bytes: int | None = None
    smi_q: str = ""
    fabric_manager: str = ""
    docker_free_gib: float | None = None
    git: str | None = None
    tmux: bool = False
    setsid: bool = False
    rdma_devices: list[str] = field(default_factory=list)
    """/dev/infiniband's entries (uverbs0, rdma_cm …): RUNTIME=docker passes them to the container."""
    efa_devices: list[str] = field(default_factory=list)
    """The host's EFA devices (PCI vendor 0x1d0f: rdmap…), provisioning/runtime/efa.py."""
    efa_folders: list[str] = field(default_factory=list)
    """The EFA software's folders present (/opt/amazon/efa, /opt/amazon/ofi-nccl …)."""
    in_container: bool = False
    box_tools: dict[str, str] = field(default_factory=dict)
    """kernel_log (dmesg | sudo | journalctl | gvisor | none), dcgmi and ib_tool (a path, or -):
    provisioning/session/decidable.py."""

    def summary(self) -> list[str]:
        gpu = f"{len(self.gpus)} GPU(s): {self.gpus[0].split(' (UUID')[0]}" if self.gpus else "no NVIDIA GPU"
        lines = [
            f"host      {self.hostname} ({self.uname}){' — itself a container' if self.in_container else ''}",
            f"gpus      {gpu}" + (f" (+{len(self.gpus) - 1} more)" if len(self.gpus) > 1 else ""),
            f"driver    {self.driver or '—'}",
            f"disk      {self.free_gib:.1f} GiB free under {self.base}"
            if self.free_gib is not None
            else "disk      unknown",
            "docker    "
            + ("usable" if self.docker_usable else "installed but not usable" if self.docker else "absent")
            + (
                ", NVIDIA runtime"
                if self.nvidia_runtime
                else ", no NVIDIA runtime"
                if self.docker_usable
                else ""
            ),
            "python    "
            + (f"{'.'.join(map(str, self.python))} ({self.python_exe})" if self.python else "absent")
            + ("" if self.venv or not self.python else " (no venv/ensurepip)"),
            f"tools     nccl-tests {self.nccl_tests or 'absent'}; nsys {self.nsys or 'absent'}",
            f"shm       {self.shm_bytes / 2**30:.1f} GiB at /dev/shm"
            if self.shm_bytes is not None
            else "shm       unknown",
            f"git       {self.git or 'absent'};  detach with "
            f"{'tmux' if self.tmux else 'setsid' if self.setsid else 'nohup'}",
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


def _df_free_gib(line: str | None) -> float | None:
    parts = (line or "").split()
    # POSIX df -P: Filesystem 1024-blocks Used Available Capacity Mounted-on
    return int(parts[3]) / 1024**2 if len(parts) >= 6 and parts[3].isdigit() else None


def _pythons(text: str | None) -> list[tuple[str, tuple[int, ...], bool]]:
    found, seen = [], set()
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 3 and re.fullmatch(r"\d+\.\d+\.\d+", parts[1]) and parts[0] not in seen:
            seen.add(parts[0])
            found.append((parts[0], tuple(int(x) for x in parts[1].split(".")), parts[2] == "1"))
    return found


def best_python(pythons: list[tuple[str, tuple[int, ...], bool]]) -> tuple[str, tuple[int, ...], bool] | None:
    """The newest usable Python ≥ MIN_PYTHON with venv; else the newest of any kind (for the refusal)."""
    usable = [p for p in pythons if p[1] >= MIN_PYTHON and p[2]]
    pool = usable or pythons
    return max(pool, key=lambda p: p[1]) if pool else None


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
    facts.free_gib = _df_free_gib(ok("df"))
    facts.docker_free_gib = _df_free_gib(ok("docker_df"))
    shm = (ok("shm") or "").split()
    if len(shm) >= 6 and shm[1].isdigit():
        facts.shm_bytes = int(shm[1]) * 1024
    ids = (ok("ids") or "").split()
    if len(ids) == 2 and all(x.isdigit() for x in ids):
        facts.uid, facts.gid = int(ids[0]), int(ids[1])
    for line in (ok("container_env") or "").splitlines():
        key, _, value = line.partition("=")
        if key:
            facts.container_env[key] = value
    for tool in (ok("tools") or "").splitlines():
        if tool.endswith("/all_reduce_perf"):
            facts.nccl_tests = tool.rsplit("/", 1)[0]
        elif tool.endswith("/nsys") and facts.nsys is None:  # PATH's first, else NVIDIA's install folder
            facts.nsys = tool
    facts.session_path = ok("path") or ""
    facts.smi_q = ok("smi_q") or ""
    facts.fabric_manager = ok("fabricmanager") or ""
    facts.rdma_devices = (ok("infiniband") or "").split()
    facts.efa_devices, facts.efa_folders = efa.parse_probe(ok("efa") or "")
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
    facts.gpu_query = s["gpu_query"].text if "gpu_query" in s else ""
    facts.docker = ok("docker") is not None
    runtimes = s.get("docker_runtimes")
    if facts.docker and runtimes is not None:
        facts.docker_usable = runtimes.rc == 0 and runtimes.text.startswith("{")
        if not facts.docker_usable:
            facts.docker_error = runtimes.text.splitlines()[-1] if runtimes.text else ""
    has_hook = ok("nvidia_ctk") is not None
    facts.nvidia_runtime = facts.docker_usable and (
        ('"nvidia"' in (runtimes.text if runtimes else "")) or has_hook
    )
    facts.pythons = _pythons(ok("pythons"))
    legacy = ok("python")  # captures of the earlier probe: python3 only, venv as its own section
    if not facts.pythons and legacy and re.fullmatch(r"\d+\.\d+\.\d+", legacy):
        facts.pythons = [("python3", tuple(int(x) for x in legacy.split(".")), ok("venv") is not None)]
    best = best_python(facts.pythons)
    if best:
        facts.python_exe, facts.python, facts.venv = best
    git = ok("git")
    facts.git = git.replace("git version", "").strip() if git else None
    facts.tmux = ok("tmux") is not None
    facts.setsid = ok("setsid") is not None
    facts.in_container = (ok("container") or "") == "yes"
    facts.box_tools = dict(line.split(" ", 1) for line in (ok("box_tools") or "").splitlines() if " " in line)
    return facts


@dataclass
class Decision:
    runtime: str | None
    """'docker' or 'host'; None when refused."""
    problems: list[str]
    """One line each, saying what is missing and what to do; empty when the host can run."""
    notes: list[str] = field(default_factory=list)
    cuda_line: cuda_lines.CudaLine | None = None
    """The CUDA line both runtimes install (torch's wheel index, the image's build arguments); None on CPU."""


def choose_cuda_line(
    facts: HostFacts, requested: str | None
) -> tuple[cuda_lines.CudaLine | None, str | None]:
    """(line, problem): from the GPUs' compute capability and the driver (suite/hardware/cuda_lines.py's
    choose_line), the requested line or the newest that runs them; a probe of an older version (no gpu_query)
    goes by the driver."""
    if facts.gpu_query:
        return cuda_lines.choose_line(facts.gpu_query, requested)
    try:
        line = cuda_lines.line_named(requested) if requested else None
        if facts.driver is None:
            return line or cuda_lines.DEFAULT, None
        if line is None:
            return cuda_lines.line_for_driver(facts.driver), None
    except ValueError as e:  # an unknown CUDA_LINE, or a driver older than every line
        return None, str(e)
    return line, cuda_lines.driver_refusal(facts.driver, line, how_to_choose="CUDA_LINE={name}")


def gpu_host_problems(facts: HostFacts) -> list[str]:
    """What makes NCCL fail on this host (suite/hardware/gpu_host_checks.py), one line each."""
    found = [
        gpu_host_checks.shm_problem(facts.shm_bytes, len(facts.gpus)),
        gpu_host_checks.fabric_problem(facts.smi_q, facts.fabric_manager),
        gpu_host_checks.processes_problem(facts.smi_q),
    ]
    return [p for p in found if p]


def decide(
    facts: HostFacts,
    *,
    runtime: str | None,
    needs_gpu: bool,
    image: str | None = None,
    cuda_line: str | None = None,
) -> Decision:
    """Choose RUNTIME (the requested one, or docker when the host has Docker with GPU support) and check
    it."""
    problems: list[str] = []
    notes: list[str] = []
    if runtime not in (None, "", "docker", "host"):
        return Decision(None, [f"RUNTIME={runtime} unknown: use RUNTIME=docker or RUNTIME=host"])
    if not facts.base:
        problems.append("cannot create the remote directory: pass REMOTE_DIR=a writable path")
    if needs_gpu and not facts.gpus:
        problems.append(
            f"no NVIDIA GPU visible ({facts.gpu_error or 'nvidia-smi -L printed none'}): "
            "check the driver (nvidia-smi) or run PROFILE=gloo-cpu"
        )
    if not runtime:
        # Docker by default only for the GPU image on a host whose Docker gives containers GPUs;
        # a CPU profile runs in the host's own Python (the CPU image is for laptops, built locally).
        if facts.docker_usable and facts.nvidia_runtime and needs_gpu:
            runtime = "docker"
        elif facts.docker_usable and needs_gpu:
            problems.append(
                "docker present but no NVIDIA runtime: install nvidia-container-toolkit or use RUNTIME=host"
            )
            runtime = None
        else:
            runtime = "host"
            if facts.docker and not facts.docker_usable:
                notes.append(
                    f"docker installed but not usable ({facts.docker_error or 'docker info failed'}): using "
                    f"RUNTIME=host"
                )
    if (
        runtime == "docker"
        and needs_gpu
        and isinstance(refused := efa.for_container(facts.efa_devices, facts.efa_folders), str)
    ):
        problems.append(refused)
    if runtime == "docker":
        if not facts.docker:
            problems.append("no docker on the host: install Docker Engine or use RUNTIME=host")
        elif not facts.docker_usable:
            problems.append(
                f"docker present but the engine does not answer "
                f"({facts.docker_error or 'docker info failed'}): "
                "start dockerd, add the user to the docker group, or use RUNTIME=host"
            )
        elif needs_gpu and not facts.nvidia_runtime:
            problems.append(
                "docker present but no NVIDIA runtime: install nvidia-container-toolkit or use RUNTIME=host"
            )
    if runtime == "host":
        if facts.python is None:
            problems.append(
                "no Python on the host (python3.13 … python3, /opt/conda, ~/miniconda3 probed): "
                "install Python ≥ 3.11 (apt-get install python3.11 python3.11-venv) or use RUNTIME=docker"
            )
        elif facts.python < MIN_PYTHON:
            found = ", ".join(f"{exe} {'.'.join(map(str, v))}" for exe, v, _ in facts.pythons)
            problems.append(
                f"no Python ≥ 3.11 on the host (found {found}): install one "
                "(apt-get install python3.11 python3.11-venv, or a conda prefix) or use RUNTIME=docker"
            )
        elif not facts.venv:
            problems.append(
                f"{facts.python_exe} has no venv/ensurepip: apt-get install python3-venv, or use "
                f"RUNTIME=docker"
            )
        if needs_gpu and not facts.nccl_tests:
            notes.append(
                "no nccl-tests on the host (PATH, the container's PATH, /opt/nccl-tests/bin): the nccl-tests "
                "verdicts will be skip; RUNTIME=docker has them, or put all_reduce_perf on PATH"
            )
        if needs_gpu and not facts.nsys:
            notes.append("no nsys on the host: the profile stage falls back to torch.profiler")
    if not facts.pythons and runtime == "docker":
        problems.append(
            "no python3 on the host (needed to list and checksum the run directory): install python3"
        )
    # the code then travels as a laptop-side archive of HEAD (codesync.ship_files, the image)
    if not facts.git:
        notes.append("no git on the host: the code is sent as an archive of HEAD's files")
    line = None
    if needs_gpu and facts.gpus:
        problems += gpu_host_problems(facts)
        if image:
            notes.append(
                f"IMAGE={image}: its CUDA line is the image's own; torch in it is checked before the run"
            )
        else:
            line, problem = choose_cuda_line(facts, cuda_line)
            if problem:
                problems.append(problem)
            elif line is not None:
                notes.append(
                    f"CUDA line {line.name} (CUDA {line.cuda}) for driver {facts.driver or 'unknown'}"
                )
    if runtime and facts.free_gib is not None:
        need = MIN_FREE_GIB[(runtime, needs_gpu)]
        # The image lands in Docker's root directory, not the remote directory: that is the disk to check.
        free, where = (
            (facts.docker_free_gib, "Docker's root directory (docker info: DockerRootDir)")
            if runtime == "docker" and facts.docker_free_gib is not None
            else (facts.free_gib, facts.base)
        )
        if free < need:
            fix = (
                "free space there or move Docker's data-root (/etc/docker/daemon.json) to a bigger disk"
                if runtime == "docker"
                else "free space or pass REMOTE_DIR= on a bigger disk"
            )
            problems.append(
                f"only {free:.1f} GiB free under {where}, want ≥ {need} GiB for RUNTIME={runtime}: {fix}"
            )
    return Decision(runtime if not problems else None, problems, notes, cuda_line=line)
