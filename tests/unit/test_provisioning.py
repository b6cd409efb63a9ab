"""Pure parts of provisioning/: quoting (run through a real sh), HOST parsing, the preflight probe's
parser and decisions, the detached job's script, and the job status rules."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from provisioning.job import jobs
from provisioning.session import preflight
from provisioning.session.hosts import HostSpecError, parse_host
from provisioning.session.shell import join, sh_command

DATA = Path(__file__).resolve().parents[1] / "data"
HOSTILE = [
    "plain",
    "with space",
    "it's",
    'say "hi"',
    "a;b",
    "$(touch {marker})",
    "`touch {marker}`",
    "x && touch {marker}",
    "$HOME",
    "new\nline",
    "-starts-with-dash",
    "",
    "back\\slash",
    "glob*?[",
]


def test_hostile_values_reach_sh_as_literal_arguments(tmp_path):
    marker = tmp_path / "pwned"
    values = [v.format(marker=marker) for v in HOSTILE]
    printer = "import json, sys; print(json.dumps(sys.argv[1:]))"
    # The quoted line goes through two shells: `sh -c` as the login shell would run it, then sh_command's own.
    line = sh_command(["python3", "-c", printer, *values])
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == values
    assert not marker.exists()


def test_join_quotes_every_word():
    assert join(["git", "-C", "my dir", "x;y"]) == "git -C 'my dir' 'x;y'"


@pytest.mark.parametrize(
    "text, user, host, port",
    [
        ("root@203.0.113.7:2222", "root", "203.0.113.7", 2222),
        ("ubuntu@gpu-box.example.com", "ubuntu", "gpu-box.example.com", None),
        ("box", None, "box", None),
        ("me@[2001:db8::1]:22", "me", "2001:db8::1", 22),
    ],
)
def test_parse_host(text, user, host, port):
    spec = parse_host(text)
    assert (spec.user, spec.host, spec.port) == (user, host, port)


def test_known_hosts_name_brackets_non_default_ports():
    assert parse_host("root@127.0.0.1:2222").known_hosts_name == "[127.0.0.1]:2222"
    assert parse_host("root@127.0.0.1:22").known_hosts_name == "127.0.0.1"


@pytest.mark.parametrize(
    "bad", ["", "root@", "root@host:99999", "root@ho st", "root@host;id", "a@b@c", "root@$(id)"]
)
def test_parse_host_refuses(bad):
    with pytest.raises(HostSpecError, match="user@host"):
        parse_host(bad)


# ---------------------------------------------------------------- preflight


def loopback_probe() -> str:
    return (DATA / "remote" / "probe-loopback-container-docker-no-gpu.txt").read_text()


def gpu_probe(
    docker_runtimes: str = '{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}',
    python: str = "3.10.12",
    gpus_file: str = "quadro-rtx4000-2gpu-L.txt",
) -> str:
    """The loopback capture with the GPU sections of a GPU host (real `nvidia-smi -L` lines)."""
    gpus = "\n".join(l for l in (DATA / "smi" / gpus_file).read_text().splitlines() if l.startswith("GPU "))
    text = loopback_probe()
    sections = preflight.split_sections(text)
    sections["gpus"] = preflight.Section(gpus, 0)
    sections["driver"] = preflight.Section("550.54.15", 0)
    sections["docker_runtimes"] = preflight.Section(docker_runtimes, 0)
    sections["python"] = preflight.Section(python, 0)
    return "\n".join(f"@@{k}\n{v.text}\n@@rc {v.rc}" for k, v in sections.items()) + "\n"


def test_parse_the_loopback_capture():
    f = preflight.parse_probe(loopback_probe())
    assert f.hostname == "vm" and f.base == "/tmp/cardtime-probe-capture"
    assert f.gpus == [] and "nvidia-smi: not found" in f.gpu_error
    assert f.driver is None
    assert f.docker and f.docker_usable and not f.nvidia_runtime
    assert f.python == (3, 11, 7) and f.venv
    assert f.git == "2.39.5" and f.tmux and f.setsid and f.in_container
    assert 70 < f.free_gib < 80  # 76,719,692 KiB available = 73.2 GiB


def test_loopback_capture_runs_gloo_on_the_host_runtime():
    f = preflight.parse_probe(loopback_probe())
    assert preflight.decide(f, runtime="host", needs_gpu=False).runtime == "host"
    # No RUNTIME: a CPU profile runs in the host's Python even where Docker answers.
    assert preflight.decide(f, runtime=None, needs_gpu=False).runtime == "host"


def test_gpu_profile_on_a_host_without_gpus_is_refused_in_one_line_each():
    d = preflight.decide(preflight.parse_probe(loopback_probe()), runtime=None, needs_gpu=True)
    assert d.runtime is None
    assert any(p.startswith("no NVIDIA GPU visible") and "PROFILE=gloo-cpu" in p for p in d.problems)
    assert (
        "docker present but no NVIDIA runtime: install nvidia-container-toolkit or use RUNTIME=host"
        in d.problems
    )
    assert all("\n" not in p for p in d.problems)


def test_gpu_host_with_nvidia_runtime_defaults_to_docker():
    f = preflight.parse_probe(gpu_probe())
    assert f.gpus == [
        "GPU 0: Quadro RTX 4000 (UUID: GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43)",
        "GPU 1: Quadro RTX 4000 (UUID: GPU-d6de6afc-bdfe-75c4-5273-0544439153fc)",
    ]
    assert f.driver == "550.54.15" and f.nvidia_runtime
    d = preflight.decide(f, runtime=None, needs_gpu=True)
    assert (d.runtime, d.problems) == ("docker", [])
    assert "2 GPU(s): GPU 0: Quadro RTX 4000 (+1 more)" in "\n".join(f.summary())


def test_gpu_host_without_nvidia_runtime_names_the_fix():
    f = preflight.parse_probe(gpu_probe(docker_runtimes='{"runc":{"path":"runc"}}'))
    d = preflight.decide(f, runtime=None, needs_gpu=True)
    assert d.problems == [
        "docker present but no NVIDIA runtime: install nvidia-container-toolkit or use RUNTIME=host"
    ]


def test_host_runtime_needs_python_3_11():
    f = preflight.parse_probe(gpu_probe(python="3.10.12"))
    d = preflight.decide(f, runtime="host", needs_gpu=True)
    assert d.runtime is None and any(
        "no Python ≥ 3.11 on the host (found python3 3.10.12)" in p and "RUNTIME=docker" in p
        for p in d.problems
    )


def test_too_little_disk_is_refused():
    f = preflight.parse_probe(loopback_probe())
    f.free_gib = 2.0
    d = preflight.decide(f, runtime="host", needs_gpu=False)
    assert d.runtime is None and any("only 2.0 GiB free" in p for p in d.problems)


def test_unknown_runtime_is_refused():
    f = preflight.parse_probe(loopback_probe())
    assert preflight.decide(f, runtime="podman", needs_gpu=False).problems == [
        "RUNTIME=podman unknown: use RUNTIME=docker or RUNTIME=host"
    ]


def test_probe_runs_in_a_real_shell_and_quotes_its_directory(tmp_path):
    marker = tmp_path / "pwned"
    base = tmp_path / f"dir with 'quote' ;$(touch {marker})"
    out = subprocess.run(
        ["sh", "-c", sh_command(preflight.probe_command(str(base)))], capture_output=True, text=True
    ).stdout
    f = preflight.parse_probe(out)
    assert f.base == str(base) and base.is_dir()
    assert not marker.exists()


# ---------------------------------------------------------------- the detached job


def test_job_script_runs_the_argv_and_records_pid_log_and_exit(tmp_path):
    # Folder names cannot hold "/", so the injected commands touch a relative name: sh runs in tmp_path.
    job_dir = tmp_path / "job ;$(touch pwned) 'x'"
    code_dir = tmp_path / 'code `touch pwned` "q"'
    job_dir.mkdir()
    code_dir.mkdir()
    argv = [
        "python3",
        "-c",
        "import os, sys; print(os.getcwd()); print(sys.argv[1:]); print(os.environ['X']); sys.exit(1)",
        "a;b",
        "$(touch pwned)",
    ]
    script = jobs.job_script(str(job_dir), str(code_dir), argv, {"X": "v w; $(touch pwned)"})
    (job_dir / "job.sh").write_text(script)
    subprocess.run(["sh", str(job_dir / "job.sh")], check=False, timeout=60, cwd=tmp_path)
    log = (job_dir / "log").read_text()
    assert str(code_dir) in log and "['a;b', '$(touch pwned)']" in log and "v w; $(touch pwned)" in log
    assert (job_dir / "exit").read_text().strip() == "1"
    assert (job_dir / "pid").read_text().strip().isdigit()
    assert not list(tmp_path.rglob("pwned"))


def test_status_program_on_a_real_job_folder(tmp_path):
    base = tmp_path / "base"
    job = base / "jobs" / "J1"
    job.mkdir(parents=True)
    run_dir = base / "runs" / "R1"
    run_dir.mkdir(parents=True)
    (base / "jobs" / "current").write_text("J1\n")
    (job / "job.json").write_text(
        json.dumps(
            {
                "job_id": "J1",
                "commit": "c" * 40,
                "profile": "gloo-cpu",
                "stages": "",
                "runtime": "host",
                "started_epoch": time.time(),
            }
        )
    )
    (job / "LAST").write_text(str(run_dir) + "\n")
    (job / "log").write_text("line one\nline two\n")
    (run_dir / "progress.json").write_text(
        json.dumps(
            {
                "stage": "bandwidth",
                "index": 2,
                "total": 10,
                "stage_elapsed_s": 4.0,
                "message": "all_reduce 4 MiB",
                "done": 3,
                "of": 9,
            }
        )
    )

    def run(offset: int) -> jobs.JobStatus:
        out = subprocess.run(
            ["python3", "-c", jobs.STATUS_PROGRAM, str(base), str(offset)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return jobs.JobStatus(**json.loads(out))

    st = run(0)
    assert st.state == "starting" and st.log == "line one\nline two\n" and st.log_offset == 18
    assert "stage 2/10 bandwidth (4 s): all_reduce 4 MiB [3/9]" in st.describe()
    # A pid of a live process that is not a job.sh counts as dead (a reused pid).
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (job / "pid").write_text(f"{sleeper.pid}\n")
        assert run(18).state == "died" and run(18).log == ""
    finally:
        sleeper.kill()
        sleeper.wait()
    (job / "exit").write_text("0\n")
    st = run(5)
    assert st.state == "finished" and st.exit_code == 0 and st.log == "one\nline two\n"


def test_job_key_matches_only_the_same_run():
    key = jobs.JobKey(commit="a" * 40, profile="nccl-gpu", stages="", runtime="docker")
    job = {"commit": "a" * 40, "profile": "nccl-gpu", "stages": "", "runtime": "docker", "job_id": "x"}
    assert key.matches(job)
    assert not key.matches({**job, "stages": "topology"})
    assert not key.matches({**job, "commit": "b" * 40})


def test_docker_run_line_gives_gpus_and_same_path_mounts():
    from provisioning.runtime.remote_docker import run_argv

    argv = run_argv(
        "cardtime:abc",
        job_id="J",
        job_dir="/b/jobs/J",
        runs_dir="/b/runs",
        suite_args=["run", "--profile", "nccl-gpu", "--out", "/b/runs"],
        gpus=True,
    )
    assert argv[:3] == ["docker", "run", "--rm"]
    assert argv[argv.index("--gpus") + 1] == "all"
    assert "/b/runs:/b/runs:rw" in argv and "/b/jobs/J:/b/jobs/J:rw" in argv
    assert argv[argv.index("cardtime:abc") :] == [
        "cardtime:abc",
        "run",
        "--profile",
        "nccl-gpu",
        "--out",
        "/b/runs",
    ]
    assert not any("AWS" in a for a in argv)
    assert argv[argv.index("memlock=-1") - 1] == "--ulimit"
    cpu = run_argv("img", job_id="J", job_dir="/j", runs_dir="/r", suite_args=["run"], gpus=False)
    assert "--gpus" not in cpu and "memlock=-1" not in cpu


def test_gpu_model_from_nvidia_smi_l():
    from provisioning.job.remote_status import gpu_model

    line = (DATA / "smi" / "rtx4070-laptop-L.txt").read_text().splitlines()[0]
    assert gpu_model(line) == "NVIDIA GeForce RTX 4070 Laptop GPU"
