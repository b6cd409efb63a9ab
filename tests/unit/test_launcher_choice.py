"""Which launcher starts a stage's ranks: the profile's, chosen on the command line, refused where it cannot
serve."""

from __future__ import annotations

import sys
import types

import pytest

from suite.config import GLOO_CPU, NCCL_GPU, ProfileError, profile_from_dict
from suite.launch import forklaunch
from suite.launch.torchrun import torchrun_command
from tests.conftest import run_suite


def test_the_rehearsal_forks_and_the_gpu_profile_launches_as_users_do():
    assert GLOO_CPU.launcher == "fork"
    assert NCCL_GPU.launcher == "torchrun"
    assert GLOO_CPU.with_overrides(launcher="torchrun").launcher == "torchrun"


def test_fork_on_gpus_and_unknown_launchers_are_refused_with_the_flag_to_use():
    with pytest.raises(ProfileError, match="use --launcher torchrun"):
        NCCL_GPU.with_overrides(launcher="fork")
    with pytest.raises(ProfileError, match="launcher 'mpirun' unknown"):
        GLOO_CPU.with_overrides(launcher="mpirun")


def test_the_launcher_is_recorded_and_an_older_manifest_resumes_under_torchrun():
    assert profile_from_dict(GLOO_CPU.to_dict()).launcher == "fork"
    recorded = GLOO_CPU.to_dict()
    del recorded["launcher"]  # a run started before the field existed ran under torchrun
    assert profile_from_dict(recorded).launcher == "torchrun"


@pytest.mark.parametrize(
    "launcher, kwargs, expected",
    [
        ("fork", {}, "fork"),
        # restarts are torchrun's own behaviour (the fault drill): the real torchrun, under the fork launcher
        # with torchrun and its workers forked warm (suite/launch/warm_python.py)
        ("fork", {"max_restarts": 1}, "warm torchrun"),
        ("torchrun", {"max_restarts": 1}, "torchrun"),
        ("fork", {"extra_torchrun_args": ["--monitor-interval=1"]}, "torchrun"),
    ],
)
def test_a_launch_asking_for_torchruns_behaviour_gets_torchrun(
    monkeypatch, tmp_path, launcher, kwargs, expected
):
    used = []
    # no torch import here
    zygote = types.SimpleNamespace(pid=4321, socket_path="/tmp/z/sock", ping=lambda: {})
    monkeypatch.setattr(forklaunch, "warm_zygote", lambda *a: zygote)
    monkeypatch.setattr(forklaunch, "run_forked", lambda *a, **k: used.append("fork"))
    monkeypatch.setattr(
        forklaunch,
        "run_torchrun",
        lambda *a, run_module=None, **k: (
            used.append("warm torchrun" if run_module else "torchrun") or used.append(run_module)
        ),
    )
    forklaunch.launch(
        GLOO_CPU.with_overrides(launcher=launcher), "suite.stages.dp.worker", raw_dir=tmp_path, **kwargs
    )
    assert used[0] == expected
    if expected == "warm torchrun":
        assert used[1] == [sys.executable, "-S", str(forklaunch.WARM_PYTHON), "/tmp/z/sock"]
        assert "-m torch.distributed.run" in (tmp_path / "torchrun.log").read_text()  # the command users run


def test_the_warm_torchrun_command_is_torchruns_own_with_no_python_workers():
    warm = ["python", "-S", "warm_python.py", "SOCK"]
    plain = torchrun_command(
        GLOO_CPU, "suite.stages.fault.drill_worker", ["--steps", "6"], nproc=2, port=29500, max_restarts=1
    )
    cmd = torchrun_command(
        GLOO_CPU,
        "suite.stages.fault.drill_worker",
        ["--steps", "6"],
        nproc=2,
        port=29500,
        max_restarts=1,
        run_module=warm,
    )
    flags = plain[3 : plain.index("-m", 3)]
    assert flags == [
        "--nproc-per-node=2",
        "--nnodes=1",
        "--master-addr=127.0.0.1",
        "--master-port=29500",
        "--max-restarts=1",
    ]
    assert cmd == [
        *warm,
        "torch.distributed.run",
        *flags,
        "--no-python",
        *warm,
        "suite.stages.fault.drill_worker",
        "--steps",
        "6",
    ]


def test_the_command_line_refuses_fork_on_the_gpu_profile_in_one_line(tmp_path):
    result = run_suite(
        "run", "--profile", "nccl-gpu", "--launcher", "fork", "--stages", "topology", "--out", str(tmp_path)
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--launcher torchrun" in lines[0]
    assert not list(tmp_path.iterdir())  # refused before a run directory was made
