"""Scripts cardtime writes, built from hostile values and run for real by bash or sh: the batch script of
`make slurm`, the login-node command that submits it and the job-status poll. A value is either refused in one
line before anything is written, or it arrives as one argument, verbatim — and no marker file appears."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from provisioning.session.hosts import parse_host
from provisioning.slurm.driver import SlurmOptions, submit_command
from suite.cluster.slurm import sbatch_script
from suite.cluster.slurm_job import status_command

# Each would create the marker if any shell along the way read it as code.
HOSTILE = [
    "$(touch {m})",
    "`touch {m}`",
    "x; touch {m}",
    "x' ; touch {m} ; '",
    'x" ; touch {m} ; "',
    "x\ntouch {m}\n#",
    "x && touch {m}",
    "${{IFS}}$(touch {m})",
]


def _stub(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _argv_recorder(path: Path, log: Path) -> Path:
    """A stand-in program that writes each argument it got on a line of its own (NUL-separated) and exits
    0."""
    return _stub(path, f'for a in "$@"; do printf "%s\\0" "$a"; done > "{log}"\nexit 0\n')


@pytest.mark.parametrize("pattern", HOSTILE)
def test_the_batch_script_runs_hostile_paths_as_plain_words(tmp_path, pattern):
    marker = tmp_path / "MARKER"
    hostile = pattern.format(m=marker)
    checkout = tmp_path / f"co{hostile}" / "repo"
    checkout.mkdir(parents=True)
    got = tmp_path / "python-argv"
    python = _argv_recorder(tmp_path / f"py{hostile}" / "python", got)
    runs = tmp_path / "runs"
    runs.mkdir()
    text = sbatch_script(
        checkout=str(checkout),
        python=str(python),
        nodes=2,
        gpus_per_node=8,
        partition="debug",
        out=str(runs),
        profile="nccl-gpu",
        env_file=str(tmp_path / f"env{hostile}.env"),
    )
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    bin_dir = tmp_path / "bin"
    # A long allocation's host list, longer than a pipe holds: a reader that stops at the first line would
    # SIGPIPE scontrol, and under `set -o pipefail` end the job before it starts.
    _stub(bin_dir / "scontrol", "echo node-a\nseq 1 20000 | sed 's/^/node-/'\n")
    _stub(bin_dir / "srun", "exit 0\n")  # the GPU check on every node: passes
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_JOB_NUM_NODES": "2",
    }
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), f"the batch script ran a word of {hostile!r}"
    argv = got.read_text().split("\0")[:-1]
    assert argv[:4] == ["-m", "suite", "run", "--profile"]
    assert argv[argv.index("--record-last") + 1] == f"{runs}/slurm-42.last"
    assert argv[argv.index("--env-file") + 1] == str(tmp_path / f"env{hostile}.env")
    assert (runs / "slurm-42.exit").read_text() == "0\n"


SETTING = {
    "partition": "PARTITION",
    "account": "ACCOUNT",
    "time_limit": "TIME",
    "socket_ifname": "SOCKET_IFNAME",
    "node_addrs": "NODE_ADDRS",
    "container_image": "IMAGE",
    "out": "--out",
}


@pytest.mark.parametrize("field", sorted(SETTING))
def test_a_value_an_sbatch_line_cannot_carry_is_refused_in_one_line(tmp_path, field):
    marker = tmp_path / "MARKER"
    values = dict(
        checkout=str(tmp_path),
        python="python3",
        nodes=2,
        gpus_per_node=8,
        partition="debug",
        out=str(tmp_path / "runs"),
    )
    values[field] = f"ok\ntouch {marker}"
    with pytest.raises(ValueError) as refused:
        sbatch_script(**values)
    message = str(refused.value)
    assert "\n" not in message and "cannot go into the batch script" in message
    assert message.startswith(f"{SETTING[field]}=")


def test_the_cli_refuses_a_runs_folder_with_a_newline_before_writing_anything(tmp_path):
    marker = tmp_path / "MARKER"
    out = tmp_path / f"runs\ntouch {marker}\n#"
    done = subprocess.run(
        [
            os.sys.executable,
            "-m",
            "suite",
            "slurm",
            "--partition",
            "debug",
            "--profile",
            "gloo-cpu",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "runs\\x0atouch" in done.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("pattern", HOSTILE)
def test_the_login_node_command_passes_hostile_values_as_single_arguments(tmp_path, pattern):
    marker = tmp_path / "MARKER"
    hostile = pattern.format(m=marker)
    base = tmp_path / f"base{hostile}"
    venv = base / "venv"
    got = tmp_path / "argv"
    _argv_recorder(venv / "bin" / "python", got)
    code = base / "code"
    code.mkdir(parents=True)
    opts = SlurmOptions(
        host=parse_host("user@login"),
        partition=hostile,
        account=hostile,
        stages=hostile,
        container_image=hostile,
        socket_ifname=hostile,
        node_addrs=hostile,
        time_limit=hostile,
    )
    command = submit_command(opts, str(base), str(code), str(venv), "abc123")
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), f"the login-node command ran a word of {hostile!r}"
    argv = got.read_text().split("\0")[:-1]
    for flag in ("--partition", "--account", "--stages", "--container-image", "--socket-ifname", "--time"):
        assert argv[argv.index(flag) + 1] == hostile
    assert argv[argv.index("--out") + 1] == f"{base}/runs"


@pytest.mark.parametrize("pattern", HOSTILE)
def test_the_status_poll_reads_a_hostile_runs_folder_as_a_path(tmp_path, pattern):
    marker = tmp_path / "MARKER"
    runs = tmp_path / f"runs{pattern.format(m=marker)}"
    runs.mkdir(parents=True)
    (runs / "slurm-7.out").write_text("hello\n")
    bin_dir = tmp_path / "bin"
    _stub(bin_dir / "scontrol", "exit 1\n")  # the controller knows no such job
    done = subprocess.run(
        ["sh", "-c", status_command("7", str(runs), 0)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        timeout=30,
    )
    assert not marker.exists()
    assert "hello" in done.stdout
