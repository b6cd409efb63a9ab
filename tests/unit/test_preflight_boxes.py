"""Preflight on the boxes people rent (issue 20): the CUDA line from the driver, Pythons beyond
`python3`, the container's own environment, NCCL's prerequisites, Docker's disk, git and uid.

The probe runs for real in this machine's shell; GPU-side outputs are real captures
(tests/data/smi, tests/data/remote: sources in their READMEs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provisioning import cuda_check_host
from provisioning.runtime import cuda_check, hostruntime
from provisioning.session import preflight
from provisioning.session.shell import sh_command
from suite.hardware import cuda_lines, gpu_host_checks

DATA = Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_provisioning import gpu_probe, loopback_probe  # noqa: E402

H200_Q = DATA / "smi" / "h200-550-q.txt"


def test_probe_in_a_real_shell_finds_pythons_ids_and_shm(tmp_path):
    out = subprocess.run(
        ["sh", "-c", sh_command(preflight.probe_command(str(tmp_path / "base")))],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    f = preflight.parse_probe(out)
    assert f.pythons, out[-2000:]
    assert all(exe.startswith("/") for exe, _, _ in f.pythons)
    assert f.python == max(v for _, v, ok in f.pythons if ok) and f.python >= (3, 11)
    assert (f.uid, f.gid) == (os.getuid(), os.getgid())
    assert f.shm_bytes == os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize


def test_newest_usable_python_wins_over_python3():
    pythons = [
        ("/usr/bin/python3", (3, 10, 12), True),
        ("/usr/bin/python3.11", (3, 11, 0), False),
        ("/opt/conda/bin/python3", (3, 11, 9), True),
    ]
    assert preflight.best_python(pythons) == ("/opt/conda/bin/python3", (3, 11, 9), True)
    assert preflight.best_python(pythons[:1]) == pythons[0]  # only 3.10: kept, for the refusal to name it


def test_driver_too_old_for_a_forced_line_is_one_line_naming_the_fix():
    f = preflight.parse_probe(gpu_probe())  # driver 550.54.15
    d = preflight.decide(f, runtime=None, needs_gpu=True, cuda_line="cu130")
    assert d.runtime is None
    (problem,) = [p for p in d.problems if "driver" in p]
    assert problem.startswith(
        "driver 550.54.15 is too old for CUDA 13.0.3 (cu130 needs ≥ 580): use CUDA_LINE=cu126"
    )
    auto = preflight.decide(f, runtime=None, needs_gpu=True)
    assert auto.problems == [] and auto.cuda_line.name == "cu126"


def test_a_cpu_profile_chooses_no_cuda_line():
    assert (
        preflight.decide(preflight.parse_probe(loopback_probe()), runtime="host", needs_gpu=False).cuda_line
        is None
    )


def test_git_is_needed_by_neither_runtime():
    """No git on a container pod: RUNTIME=docker builds from a laptop-side archive, RUNTIME=host gets one
    (codesync.ship_files); tests/e2e/test_remote_pod.py runs the host path end to end."""
    f = preflight.parse_probe(gpu_probe())
    f.git = None
    for runtime in ("docker", "host"):
        d = preflight.decide(f, runtime=runtime, needs_gpu=True)
        assert not [p for p in d.problems if "git" in p], d.problems
        assert "no git on the host: the code is sent as an archive of HEAD's files" in d.notes


def test_docker_free_space_is_measured_where_docker_stores_images():
    f = preflight.parse_probe(gpu_probe())
    f.free_gib, f.docker_free_gib = 500.0, 12.0
    d = preflight.decide(f, runtime="docker", needs_gpu=True)
    assert any(p.startswith("only 12.0 GiB free under Docker's root directory") for p in d.problems), (
        d.problems
    )


def test_healthy_h200_capture_has_nothing_that_stops_nccl():
    text = H200_Q.read_text()
    assert gpu_host_checks.fabric_problem(text) is None  # State Completed, Status Success
    assert gpu_host_checks.gpu_processes(text) == [] and gpu_host_checks.processes_problem(text) is None
    laptop = (DATA / "smi" / "rtx4070-laptop-q.txt").read_text()  # Fabric N/A: no NVSwitch, nothing to check
    assert gpu_host_checks.fabric_problem(laptop) is None


def test_small_shm_on_a_multi_gpu_box_is_refused_with_the_flag():
    assert gpu_host_checks.shm_problem(64 << 20, 8).startswith(
        "/dev/shm is 64 MiB, NCCL needs ≥ 1024 MiB for 8 GPUs"
    )
    assert "--shm-size" in gpu_host_checks.shm_problem(64 << 20, 8)
    assert (
        gpu_host_checks.shm_problem(64 << 20, 1) is None and gpu_host_checks.shm_problem(16 << 30, 8) is None
    )


def test_host_runtime_takes_the_containers_environment():
    f = preflight.HostFacts(
        session_path="/usr/local/bin:/usr/bin:/bin",
        container_env={
            "PATH": "/opt/conda/bin:/usr/bin",
            "NCCL_SOCKET_IFNAME": "eth0",
            "CARDTIME_NCCL_TESTS_DIR": "/opt/nccl-tests/bin",
            "HOME": "/root",
        },
        nccl_tests="/opt/nccl-tests/bin",
        nsys="/opt/nvidia/nsight-systems/2025.3.1/bin/nsys",
    )
    env = hostruntime.host_job_environment(f)
    assert env == {
        "NCCL_SOCKET_IFNAME": "eth0",
        "CARDTIME_NCCL_TESTS_DIR": "/opt/nccl-tests/bin",
        "PATH": "/usr/local/bin:/usr/bin:/bin:/opt/conda/bin:/opt/nccl-tests/bin:"
        "/opt/nvidia/nsight-systems/2025.3.1/bin",
    }
    plain = preflight.HostFacts(session_path="/usr/bin:/bin", nccl_tests="/usr/bin", nsys="/usr/bin/nsys")
    # PATH left alone
    assert hostruntime.host_job_environment(plain) == {"CARDTIME_NCCL_TESTS_DIR": "/usr/bin"}


def test_host_runtime_without_nccl_tests_says_so():
    f = preflight.parse_probe(gpu_probe(python="3.11.7"))
    notes = preflight.decide(f, runtime="host", needs_gpu=True).notes
    assert any(n.startswith("no nccl-tests on the host") for n in notes) and any(
        n.startswith("no nsys") for n in notes
    )


def test_torch_cuda_check_refuses_in_one_line():
    def answer(**kw):
        return json.dumps(kw)

    def judge(text, **kw):  # the host program's judgement, with the table the laptop sends it
        return cuda_check_host.judge(text, min_drivers=cuda_check.min_drivers(), **kw)

    ok = answer(torch="2.13.0+cu126", cuda="12.6", available=True, devices=8)
    assert judge(ok, gpus_seen=8, driver="550.54.15", where="the host venv") is None
    no_gpu = judge(
        answer(torch="2.13.0", cuda="13.0", available=False, devices=0),
        gpus_seen=8,
        driver="550.54.15",
        where="the host venv",
    )
    assert (
        "CUDA 13.0 (needs ≥ 580)" in no_gpu and "driver 550.54.15" in no_gpu and "CUDA_LINE=cu126" in no_gpu
    )
    fewer = judge(
        answer(torch="2.13.0", cuda="13.0", available=True, devices=4),
        gpus_seen=8,
        driver="580.65.06",
        where="the image x",
    )
    assert "sees 4 GPU(s) where nvidia-smi lists 8" in fewer
    cpu = judge(
        answer(torch="2.13.0+cpu", cuda=None, available=False, devices=0),
        gpus_seen=8,
        driver="580.65.06",
        where="the host venv",
    )
    assert "CPU build" in cpu
    # is_available() and the count are right, but the matmul on the GPU fails (a build without the
    # architecture).
    no_kernel = judge(
        answer(
            torch="2.13.0",
            cuda="13.0",
            available=True,
            devices=8,
            kernel_errors=[
                "GPU 0: AcceleratorError: CUDA error: no kernel image is available for execution on the "
                "device"
            ]
            * 8,
        ),
        gpus_seen=8,
        driver="580.65.06",
        where="the image x",
    )
    assert (
        no_kernel.startswith(
            "torch 2.13.0 (CUDA 13.0) in the image x sees the GPUs but cannot run a kernel on them: "
            "GPU 0: AcceleratorError: CUDA error: no kernel image"
        )
        and "(and 7 more GPU(s))" in no_kernel
    )
    assert all("\n" not in t for t in (no_gpu, fewer, cpu, no_kernel))
    assert "nothing readable" in judge("Traceback ...", gpus_seen=1, driver=None, where="w")


def test_preflight_chooses_the_line_from_the_captured_compute_cap_query():
    """The real answer of a TITAN V (sm_70) + RTX 5880 Ada box on driver 570.86.15
    (tests/data/nvidia-smi-query): R570 runs CUDA 12 only, and 12.6 has both architectures. With
    CUDA_LINE=cu130 the refusal names the GPU."""
    query = (DATA / "nvidia-smi-query" / "titanv-rtx5880ada-570-query.csv").read_text()
    sections = preflight.split_sections(gpu_probe())
    sections["gpu_query"] = preflight.Section(query.strip(), 0)
    f = preflight.parse_probe("\n".join(f"@@{k}\n{v.text}\n@@rc {v.rc}" for k, v in sections.items()) + "\n")
    d = preflight.decide(f, runtime=None, needs_gpu=True)
    assert d.problems == [] and d.cuda_line.name == "cu126"
    refused = preflight.decide(f, runtime=None, needs_gpu=True, cuda_line="cu130")
    assert refused.runtime is None and refused.problems == [
        "NVIDIA TITAN V (sm_70) on driver 570.86.15: cu130 (CUDA 13.0.3) has no sm_70 (Turing to Blackwell "
        "(sm_75–sm_121)): use CUDA_LINE=cu126 (CUDA 12.6.3)"
    ]
    assert f"section gpu_query; {cuda_lines.GPU_QUERY} 2>&1; ran" in preflight.PROBE_SCRIPT


def real_interpreter(version: str) -> str | None:
    """A real pythonX.Y on this machine (system or pyenv), or None."""
    import glob
    import shutil

    found = shutil.which(f"python{version}", path="/usr/bin:/usr/local/bin")
    return found or next(
        iter(sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))), None
    )


def test_ubuntu_2204_shape_python3_is_310_and_python311_is_elsewhere_on_path(tmp_path):
    """python3 first on PATH is a real 3.10; a real 3.11 sits in another PATH folder, and a real 3.12 in a
    conda-style prefix under HOME (~/miniconda3/bin): the probe finds all three and preflight takes 3.12."""
    import shutil

    py310, py311, py312 = (real_interpreter(v) for v in ("3.10", "3.11", "3.12"))
    if not (py310 and py311 and py312):
        pytest.skip("needs real Python 3.10, 3.11 and 3.12 interpreters (pyenv on the test machine)")
    first, second = tmp_path / "first", tmp_path / "second"
    conda = tmp_path / "home" / "miniconda3" / "bin"
    for folder, name, target in (
        (first, "python3", py310),
        (second, "python3.11", py311),
        (conda, "python3", py312),
    ):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).symlink_to(target)
    tools = tmp_path / "tools"  # the shell tools the probe uses, and no other python3 than the ones above
    tools.mkdir()
    for tool in ("sh", "df", "tail", "hostname", "uname", "mkdir", "id", "tr", "sed", "grep", "head"):
        where = shutil.which(tool)
        if where:
            (tools / tool).symlink_to(where)
    env = {"PATH": f"{first}:{second}:{tools}", "HOME": str(tmp_path / "home")}
    out = subprocess.run(
        ["/bin/sh", "-c", sh_command(preflight.probe_command(str(tmp_path / "base")))],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    ).stdout
    f = preflight.parse_probe(out)
    assert sorted(v[:2] for _, v, _ in f.pythons) == [(3, 10), (3, 11), (3, 12)], f.pythons
    assert f.python[:2] == (3, 12) and f.venv
    assert [p for p in preflight.decide(f, runtime="host", needs_gpu=False).problems if "Python" in p] == []
    only_old = preflight.parse_probe(out.replace("3.11.", "3.9.").replace("3.12.", "3.9."))
    (problem,) = [
        p for p in preflight.decide(only_old, runtime="host", needs_gpu=False).problems if "Python" in p
    ]
    assert problem.startswith("no Python ≥ 3.11 on the host (found ") and "python3.11-venv" in problem


def remote_dir_by_rule(given: str, *volumes: str) -> str:
    script = (
        "set -- "
        + " ".join([repr(given) if given else "''"])
        + "\n"
        + preflight.REMOTE_DIR_RULE
        + 'remote_dir "$1" /proc/mounts '
        + " ".join(volumes)
    )
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout.strip()


def test_remote_dir_defaults_to_a_mounted_volume_read_from_this_machines_mounts():
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    writable = [
        m
        for m in mounts
        if m.startswith("/")
        and m not in ("/", "/proc", "/sys")
        and os.access(m, os.W_OK)
        and " " not in m
        and Path(m).is_dir()
    ]
    assert writable, "this machine mounts no writable folder to stand in for /workspace"
    volume = writable[0]
    assert remote_dir_by_rule("", "/no-such-volume", volume) == f"{volume}/cardtime"
    assert remote_dir_by_rule("", "/no-such-volume") == "cardtime"  # no volume: ~/cardtime (relative to home)
    assert remote_dir_by_rule("/srv/x", volume) == "/srv/x"  # REMOTE_DIR= always wins
    assert preflight.PERSISTENT_VOLUMES[0] == "/workspace"


def test_status_and_fetch_find_the_remote_dir_by_the_same_rule(tmp_path):
    """remote.resolve_base (make remote-status, FETCH=) runs resolve_dir_command: REMOTE_DIR='' is
    the folder `make remote` chose (here no /workspace is mounted: cardtime/ under the login's
    directory), '' when it does not exist, and never created by looking."""
    if any(
        line.split()[1] == preflight.PERSISTENT_VOLUMES[0]
        for line in Path("/proc/mounts").read_text().splitlines()
    ):
        pytest.skip("this machine mounts /workspace: the rule picks it (the test above)")
    home = tmp_path / "home"
    home.mkdir()

    def resolve(given: str) -> str:
        return subprocess.run(
            ["sh", "-c", sh_command(preflight.resolve_dir_command(given))],
            cwd=home,
            capture_output=True,
            text=True,
        ).stdout.strip()

    assert resolve("") == "" and not (home / "cardtime").exists()
    (home / "cardtime").mkdir()
    (home / "elsewhere").symlink_to(home / "cardtime")
    assert resolve("") == str((home / "cardtime").resolve())
    assert resolve("elsewhere") == str((home / "cardtime").resolve())  # physical path, as jobs record it
    assert resolve(str(tmp_path / "missing")) == ""


def test_a_process_already_on_the_gpu_is_refused_naming_it():
    """A real capture of a node whose GPU 0 a hung training rank still held."""
    text = (DATA / "smi" / "a100-sxm4-525-q-one-process.txt").read_text()
    (proc,) = gpu_host_checks.gpu_processes(text)
    assert proc == {
        "gpu": "00000000:07:00.0",
        "pid": "280058",
        "type": "C",
        "name": "/gpfswork/rech/cnw/commun/conda/shared-m4-2023-02-28/bin/python",
        "memory": "22374 MiB",
    }
    problem = gpu_host_checks.processes_problem(text)
    assert problem.startswith("1 process(es) already use the GPUs: pid 280058 ") and "22374 MiB" in problem
    assert problem.endswith("stop them (kill PID) before measuring") and "\n" not in problem
    f = preflight.parse_probe(gpu_probe())
    f.smi_q = text
    assert problem in preflight.decide(f, runtime=None, needs_gpu=True).problems


def test_unknown_cuda_line_is_refused_before_any_ssh():
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "provisioning",
            "remote",
            "--host",
            "root@192.0.2.1:22",
            "--cuda-line",
            "cu999",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "error: CUDA_LINE=cu999 unknown: use one of cu130, cu126"
