"""NCCL_ENV= / `suite run --env-file` (suite/run_env.py): the communication libraries' settings read and
checked in full before anything starts, recorded in the manifest, set again on --resume, and carried across
nodes by the environment every launch inherits (torchrun's forwarded env, mpirun's -x). The multi-node lab
run (tests/e2e/test_two_nodes.py) checks that node-b's ranks are started with them."""

from __future__ import annotations

import contextlib
import io
import json
import os

import pytest

from provisioning.__main__ import main as provisioning_main
from suite import run_env
from suite.__main__ import main as suite_main
from suite.cluster.mpirun import exported_names
from suite.cluster.multinode import forwarded_env

GOOD = """\
# the cluster's fabric
export NCCL_IB_HCA=mlx5_0,mlx5_3
FI_PROVIDER="efa"
NCCL_SOCKET_IFNAME='^docker,lo'
LD_LIBRARY_PATH=/opt/amazon/efa/lib:/opt/aws-ofi-nccl/lib

UCX_TLS=rc,sm
"""


def test_a_settings_file_is_read_as_written(tmp_path):
    path = tmp_path / "nccl.env"
    path.write_text(GOOD)
    settings = run_env.read(path)
    assert settings == {
        "NCCL_IB_HCA": "mlx5_0,mlx5_3",
        "FI_PROVIDER": "efa",
        "NCCL_SOCKET_IFNAME": "^docker,lo",
        "LD_LIBRARY_PATH": "/opt/amazon/efa/lib:/opt/aws-ofi-nccl/lib",
        "UCX_TLS": "rc,sm",
    }
    quoted = {"NCCL_X": "'kept'", "NCCL_Y": '"kept"', "NCCL_Z": "a=b"}
    assert run_env.parse(run_env.text_of(quoted), "x") == quoted  # what the job's folder gets reads back
    # across nodes: torchrun's forwarded environment and mpirun's -x carry every one of them
    assert settings.items() <= forwarded_env(settings).items()
    assert exported_names(settings) == sorted(settings)
    assert run_env.digest(settings) == run_env.digest(dict(settings)) != run_env.digest({"NCCL_IB_HCA": "x"})


@pytest.mark.parametrize(
    "text, said",
    [
        ("NCCL_IB_HCA=mlx5_0\nPATH=/tmp/evil\n", "nccl.env:2: PATH is not a communication library's setting"),
        ("LD_PRELOAD=/tmp/x.so\n", "nccl.env:1: LD_PRELOAD is not"),
        ("NCCL_IB_HCA mlx5_0\n", "nccl.env:1: 'NCCL_IB_HCA mlx5_0' is not NAME=value"),
        ("nccl_ib_hca=mlx5_0\n", "is not NAME=value"),
        ("NCCL_IB_HCA=a\x1b[2Jb\n", "nccl.env:1: NCCL_IB_HCA's value holds a control character"),
        ("NCCL_IB_HCA=a\nNCCL_IB_HCA=b\n", "nccl.env:2: NCCL_IB_HCA is set twice"),
        ("NCCL_IB_HCA=" + "x" * 5000 + "\n", "longer than 4096 characters"),
    ],
)
def test_a_bad_line_is_named(tmp_path, text, said):
    path = tmp_path / "nccl.env"
    path.write_text(text)
    with pytest.raises(run_env.EnvFileError) as e:
        run_env.read(path)
    assert said in str(e.value) and "\x1b" not in str(e.value)


def test_a_missing_huge_or_binary_file_is_named(tmp_path):
    for path, content, said in (
        (tmp_path / "none.env", None, "no such file"),
        (tmp_path / "big.env", b"#" * (run_env.MAX_BYTES + 1), "larger than 64 KiB"),
        (tmp_path / "bin.env", b"NCCL_A=\xff\n", "not UTF-8"),
    ):
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(run_env.EnvFileError, match=said):
            run_env.read(path)


def test_a_manifest_cannot_smuggle_a_setting_into_a_resume():
    assert run_env.recorded({"env_file": {"vars": {"NCCL_IB_HCA": "mlx5_0"}}}) == {"NCCL_IB_HCA": "mlx5_0"}
    assert run_env.recorded({}) == {}
    for vars_ in ({"LD_PRELOAD": "/tmp/x.so"}, {"NCCL_A": "x\nLD_PRELOAD=/tmp/x.so"}, {"NCCL_A": 3}):
        with pytest.raises(run_env.EnvFileError):
            run_env.recorded({"env_file": {"vars": vars_}})


def test_suite_run_refuses_a_bad_file_before_any_run_and_records_a_good_one(tmp_path, monkeypatch):
    bad = tmp_path / "bad.env"
    bad.write_text("PATH=/tmp\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = suite_main(
            ["run", "--stages", "topology", "--out", str(tmp_path / "runs"), "--env-file", str(bad)]
        )
    assert code == 2 and "bad.env:1: PATH is not" in err.getvalue() and not (tmp_path / "runs").exists()
    good = tmp_path / "nccl.env"
    good.write_text(GOOD)
    for name in run_env.read(good):  # the run sets them in this process: recorded, so undone after the test
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    with contextlib.redirect_stderr(io.StringIO()):
        code = suite_main(
            ["run", "--stages", "topology", "--out", str(tmp_path / "runs"), "--env-file", str(good)]
        )
    assert code == 0
    (run,) = (tmp_path / "runs").glob("*-gloo-cpu")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["env_file"] == {"path": str(good), "vars": run_env.read(good)}
    assert os.environ["FI_PROVIDER"] == "efa"  # what every launch of the run inherits
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = suite_main(["run", "--resume", str(run), "--env-file", str(good)])
    assert code == 2 and "drop --env-file" in err.getvalue()


def test_make_remote_reads_nccl_env_before_the_first_connection(tmp_path):
    bad = tmp_path / "nccl.env"
    bad.write_text("NCCL_IB_HCA=mlx5_0\nLD_PRELOAD=/tmp/x.so\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = provisioning_main(["remote", "--host", "nobody@192.0.2.1", "--nccl-env", str(bad)])
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1
    assert (
        lines[0].startswith(f"error: NCCL_ENV={bad}: {bad}:2: LD_PRELOAD is not")
        and "connect" not in lines[0]
    )


def test_another_nccl_env_is_another_job():
    from provisioning.job import jobs

    class Opts:
        nproc, tier, burnin_min = 0, "", ""
        nccl_env = {"NCCL_IB_HCA": "mlx5_0"}

    with_env = jobs.run_settings(Opts)
    Opts.nccl_env = {}
    assert with_env["nccl_env"] == run_env.digest({"NCCL_IB_HCA": "mlx5_0"})
    assert jobs.run_settings(Opts)["nccl_env"] == ""
