"""`cardtime`, the console script: the main job (testing a rented box) listed first, each word handed to the
command that does the work with its own options and exit codes, `--version`, and one line for a word it does
not know."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import tomllib

from cardtime.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def test_help_lists_the_main_job_first_and_every_command():
    code, out, _ = run("--help")
    commands = [
        line.split()[0] for line in out.splitlines() if line.startswith("  ") and not line.startswith("   ")
    ]
    assert code == 0 and commands[0] == "remote"
    assert {
        "remote",
        "plan",
        "slurm",
        "rehearse",
        "ingest",
        "check",
        "report",
        "compare",
        "--version",
    } <= set(commands)
    assert run()[0] == 2


def test_version_is_the_projects_and_the_console_script_is_installed():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run("--version")[1] == f"cardtime {version}\n"
    script = Path(sys.executable).parent / "cardtime"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"cardtime {version}\n"


def test_each_word_reaches_its_command_with_its_options_and_exit_codes(tmp_path):
    # HOST first, as a renter types it
    code, _, err = run("remote", "u@127.0.0.1:1", "--master-port", "99999")
    assert code == 2 and "MASTER_PORT='99999'" in err and "cannot connect" not in err
    code, out, _ = run("plan", "--tier", "quick", "--gpus", "8", "--rate", "24")
    assert code == 0 and "billed" in out and "$" in out
    code, _, err = run("check", str(tmp_path / "no-run"))
    assert code == 2 and err.startswith("error: ")
    code, _, err = run("ingest", str(tmp_path / "nothing"), "--out", str(tmp_path / "runs"))
    assert code == 2 and "no such file" in err


def test_an_unknown_word_is_one_line():
    code, out, err = run("rehears")
    assert code == 2 and out == "" and err.count("\n") == 1 and "'rehears' is not a cardtime command" in err


def test_suite_run_on_a_gpu_box_says_it_rehearses_on_cpu_and_how_to_test_the_gpus(tmp_path, monkeypatch):
    """`python -m suite run` with no --profile is the CPU rehearsal; where `nvidia-smi -L` lists GPUs (a
    stand-in printing a real 2-GPU listing here) the run says so before it starts, naming the profile that
    tests them."""
    from suite.commands.run import gpus_listed

    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        "#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5269b708-a8a1-4d8d-8bd1-0f1b5a8c7e01)'\n"
        "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-8e1a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8)'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    assert gpus_listed() == 2
    from suite.__main__ import main as suite_main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        suite_main(["run", "--stages", "topology", "--out", str(tmp_path / "runs")])
    err = err.getvalue()
    assert (
        "note: this machine lists 2 GPU(s) (nvidia-smi -L); running the CPU rehearsal (gloo-cpu): "
        "--profile nccl-gpu tests the GPUs" in err
    )
