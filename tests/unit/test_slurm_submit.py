"""make slurm's pieces without a cluster: the refusals before anything is submitted, the commands the laptop
sends the login node, the job-status poll (its script run for real by sh, scontrol's answers replayed from
real captures in tests/data/slurm/) and the follower's decisions; the one refusal that needs no Slurm at all —
an unreachable login node — through the real CLI. The whole path against a real Slurm:
tests/e2e/test_slurm_host.py."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from provisioning.session.hosts import parse_host
from provisioning.slurm.driver import (
    SlurmOptions,
    env_file_path,
    login_decision,
    login_probe_command,
    submit_command,
)
from suite.cluster.slurm import submission_problem
from suite.cluster.slurm_job import GONE_POLLS, JobPoll, follow, parse_poll, status_command

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
ROOT = Path(__file__).resolve().parents[2]
SINFO_DEBUG = (DATA / "sinfo-N-p-debug.txt").read_text()


def test_refusals_name_what_is_missing_in_one_line():
    ok = dict(sbatch="/usr/bin/sbatch", partition="debug", nodes=2, sinfo_nodes=SINFO_DEBUG)
    assert submission_problem(**ok) is None
    problems = [
        submission_problem(**{**ok, **change})
        for change in (
            {"sbatch": ""},
            {"sinfo_nodes": ""},
            {"nodes": 3},
            {"sinfo_error": "Unable to contact slurm controller"},
        )
    ]
    assert problems[0].startswith("no sbatch on the login node") and "SLURM_HOST=" in problems[0]
    assert problems[1].startswith("PARTITION=debug is unknown to Slurm") and "sinfo -s" in problems[1]
    assert problems[2] == (
        "NODES=3 but PARTITION=debug has 2 node(s) (node-a, node-b): ask for NODES=2 at most, "
        "or another partition"
    )
    assert "Unable to contact slurm controller" in problems[3] and "SLURM_CONF=" in problems[3]
    assert all("\n" not in p for p in problems)
    # sinfo -N lists a node once per state it is in (idle in one partition row, mixed in another): counted
    # once.
    twice = submission_problem(**{**ok, "nodes": 3, "sinfo_nodes": "n1\nn1\nn2\n"})
    assert twice.startswith("NODES=3 but PARTITION=debug has 2 node(s) (n1, n2)")


def options(**kw) -> SlurmOptions:
    return SlurmOptions(
        **{
            "host": parse_host("alice@login"),
            "partition": "gpu",
            "nodes": 2,
            "gpus_per_node": 8,
            "profile": "nccl-gpu",
            **kw,
        }
    )


PROBE_OUTPUT = """@@hostname
login1
@@rc 0
@@base
/shared/alice/cardtime
@@rc 0
@@pythons
/usr/bin/python3.11 3.11.2 1
@@rc 0
@@git
git version 2.39.5
@@rc 0
@@sbatch
{sbatch}
@@rc {sbatch_rc}
@@partition
{nodes}
@@rc {sinfo_rc}
@@queue
{queue}
@@rc 0
"""


def probe(sbatch="/usr/bin/sbatch", sbatch_rc=0, nodes="gpu-01\ngpu-02\ngpu-03", sinfo_rc=0, queue="") -> str:
    return PROBE_OUTPUT.format(
        sbatch=sbatch, sbatch_rc=sbatch_rc, nodes=nodes, sinfo_rc=sinfo_rc, queue=queue
    )


def test_the_login_node_probe_decides_before_anything_is_shipped():
    facts, problems, summary = login_decision(probe(), options())
    assert problems == [] and facts.base == "/shared/alice/cardtime" and facts.python == (3, 11, 2)
    assert summary[0] == "login     login1; sbatch /usr/bin/sbatch; PARTITION=gpu: 3 node(s)"
    assert login_decision(probe(sbatch="", sbatch_rc=1), options())[1][0].startswith(
        "no sbatch on the login node"
    )
    assert login_decision(probe(nodes=""), options())[1][0].startswith("PARTITION=gpu is unknown")
    assert login_decision(probe(), options(nodes=4))[1][0].startswith(
        "NODES=4 but PARTITION=gpu has 3 node(s)"
    )
    error = login_decision(
        probe(nodes="sinfo: error: Unable to contact slurm controller", sinfo_rc=1), options()
    )[1]
    assert error[0].startswith(
        "sinfo failed on the login node (sinfo: error: Unable to contact slurm controller)"
    )
    # A job of ours still queued (a laptop dropped, the same make slurm again): come back to it, not a second
    # one.
    queued = login_decision(probe(queue="4242 RUNNING"), options())[1]
    assert queued == [
        "your cardtime job 4242 (RUNNING) is still in the queue: make slurm SLURM_HOST=alice@login "
        "FETCH=4242 follows it to its report; NEW_RUN=1 submits another anyway"
    ]
    assert login_decision(probe(queue="4242 RUNNING"), options(new_run=True))[1] == []
    no_python = probe().replace("/usr/bin/python3.11 3.11.2 1", "")
    assert "no Python on the host" in login_decision(no_python, options())[1][0]


def test_the_probe_and_the_submission_name_slurm_conf_only_when_given():
    plain, named = (
        login_probe_command(options()),
        login_probe_command(options(slurm_conf="/opt/slurm/etc/slurm.conf")),
    )
    assert "SLURM_CONF" not in plain and "export SLURM_CONF=/opt/slurm/etc/slurm.conf\n" in named
    assert "section partition; sinfo -h -N -p gpu -o %N 2>&1; ran" in plain
    assert """section queue; squeue -h -u "$(id -un)" -n cardtime -o '%i %T' 2>&1; ran""" in plain
    for script in (plain, named):  # both parse as POSIX sh
        assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
    line = submit_command(
        options(stages="topology,bandwidth", account="proj 1"),
        "/shared/c",
        "/shared/c/code/abc",
        "/shared/c/venvs/v",
        "abc",
    )
    assert "SLURM_CONF" not in line
    cd, _, command = line.partition(" && ")
    assert cd == "cd /shared/c/code/abc"
    words = shlex.split(command)
    assert words[:4] == ["env", "PYTHONPATH=/shared/c/code/abc", "CARDTIME_COMMIT=abc", "PYTHONUNBUFFERED=1"]
    argv = words[4:]
    assert argv[:4] == ["/shared/c/venvs/v/bin/python", "-m", "suite", "slurm"] and argv[-2:] == [
        "--submit",
        "--no-follow",
    ]
    flags = dict(zip(argv[4:-2:2], argv[5:-2:2]))
    assert flags == {
        "--partition": "gpu",
        "--nodes": "2",
        "--gpus-per-node": "8",
        "--account": "proj 1",
        "--time": "",
        "--profile": "nccl-gpu",
        "--stages": "topology,bandwidth",
        "--container-image": "",
        "--socket-ifname": "",
        "--node-addrs": "",
        "--out": "/shared/c/runs",
    }
    with_env = shlex.split(
        submit_command(
            options(nccl_env={"NCCL_IB_HCA": "mlx5_0"}), "/shared/c", "/shared/c/code/abc", "v", "a"
        ).partition(" && ")[2]
    )  # NCCL_ENV=: the file submit() puts on the login node, named by its digest
    assert with_env[with_env.index("--env-file") + 1] == env_file_path("/shared/c", {"NCCL_IB_HCA": "mlx5_0"})
    assert env_file_path("/shared/c", {"NCCL_IB_HCA": "mlx5_0"}).startswith("/shared/c/nccl-")
    # And the login node's command line parses them as the login node's make slurm would.
    from suite.__main__ import build_parser

    args = build_parser().parse_args(argv[3:])
    assert (args.partition, args.nodes, args.account, args.submit, args.no_follow) == (
        "gpu",
        2,
        "proj 1",
        True,
        True,
    )


def test_the_status_poll_run_by_sh_reads_the_jobs_files_and_scontrols_answer(tmp_path):
    """STATUS_SCRIPT for real under sh; scontrol on its PATH replays the real capture of a finished job."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\ncat {DATA / 'scontrol-show-job-completed.txt'}\n")
    (bin_dir / "scontrol").chmod(0o755)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "slurm-1.out").write_text("cardtime: 2 nodes\nsummary: 22 passed\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def poll(offset: int) -> JobPoll:
        return parse_poll(
            subprocess.run(
                ["sh", "-c", status_command("1", str(runs), offset)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )

    p = poll(0)
    assert (p.state, p.nodes, p.exit_code, p.run_dir, p.output_size) == (
        "COMPLETED",
        "node-a,node-b",
        None,
        "",
        37,
    )
    assert p.output == "cardtime: 2 nodes\nsummary: 22 passed\n" and p.job["Partition"] == "debug"
    assert poll(18).output == "summary: 22 passed\n"  # from the byte offset on
    (runs / "slurm-1.last").write_text("/shared/runs/20261201T1532Z-node-a-gloo-cpu\n")
    (runs / "slurm-1.exit").write_text("1\n")
    p = poll(37)
    assert (p.exit_code, p.run_dir, p.output) == (1, "/shared/runs/20261201T1532Z-node-a-gloo-cpu", "")
    missing = parse_poll(
        subprocess.run(
            ["sh", "-c", status_command("7", str(runs), 0)], env=env, capture_output=True, text=True
        ).stdout
    )
    assert (missing.output_size, missing.run_dir, missing.exit_code) == (-1, "", None)


def test_scontrol_captures_parse_to_state_reason_and_nodes():
    def parsed(name: str) -> JobPoll:
        return parse_poll(
            f"scontrol={(DATA / name).read_text().strip()}\nexit=\nrun_dir=\nsize=-1\n@@output\n"
        )

    pending, completed, failed = (
        parsed(f"scontrol-show-job-{s}.txt") for s in ("pending", "completed", "failed")
    )
    assert (pending.describe(), pending.ended) == ("PENDING (Priority)", False)
    assert (completed.describe(), completed.ended) == ("COMPLETED on node-a,node-b", True)
    assert (failed.state, failed.reason, failed.ended) == ("FAILED", "NonZeroExitCode", True)
    # after MinJobAge: the exit file
    forgotten = parse_poll("scontrol=\nexit=0\nrun_dir=/r\nsize=10\n@@output\n")
    assert forgotten.state == "" and forgotten.ended and forgotten.exit_code == 0


def scripted(polls: list[JobPoll]):
    """A poll that answers from `polls` in turn (the last one for ever), recording the offsets asked for."""
    asked: list[int] = []

    def poll(offset: int) -> JobPoll:
        asked.append(offset)
        return polls[min(len(asked) - 1, len(polls) - 1)]

    return poll, asked


def test_the_follower_says_each_state_once_holds_partial_lines_and_waits_for_the_final_state():
    polls = [
        JobPoll("PENDING", reason="Resources", output_size=-1),
        JobPoll("RUNNING", nodes="n[1-2]", output_size=11, output="line one\nli"),
        JobPoll("RUNNING", nodes="n[1-2]", output_size=18, output="line two\n", exit_code=0, run_dir="/r"),
        JobPoll("COMPLETED", nodes="n[1-2]", output_size=18, output="", exit_code=0, run_dir="/r"),
    ]
    poll, asked = scripted(polls)
    said, slept = [], []
    final = follow(poll, "42", said.append, interval_s=7, sleep=slept.append)
    assert said == [
        "job 42: PENDING (Resources)",
        "job 42: RUNNING on n[1-2]",
        "  │ line one",
        "  │ line two",
        "job 42: COMPLETED on n[1-2]",
    ]
    # the partial "li" is asked for again from its line's start; the backlog at once, without a sleep
    assert asked == [0, 0, 9, 18] and final.state == "COMPLETED" and final.run_dir == "/r"
    # after it, an exit file beside a RUNNING job: one more poll for the state that follows
    assert slept == [
        7,
        7,
    ]


def test_the_follower_reads_a_backlog_without_sleeping_and_gives_up_on_a_job_slurm_never_knew():
    backlog = JobPoll("COMPLETED", output_size=100, output="a\n" * 10, exit_code=0)
    drained = JobPoll("COMPLETED", output_size=100, output="b\n" * 40, exit_code=0)
    poll, asked = scripted([backlog, drained])
    slept = []
    follow(poll, "1", lambda _: None, sleep=slept.append)
    assert asked == [0, 20] and slept == []
    poll, asked = scripted([JobPoll("")])
    gone = follow(poll, "9", lambda _: None, sleep=lambda _: None)
    assert len(asked) == GONE_POLLS and not gone.state
    poll, asked = scripted([JobPoll("COMPLETED", output_size=10_000, exit_code=0)])
    # a re-attach: the last 4000 bytes only
    follow(poll, "3", lambda _: None, tail_only=True, sleep=lambda _: None)
    assert asked[:2] == [1 << 62, 6000]


def test_an_unreachable_login_node_is_refused_in_one_line(tmp_path):
    from tests.e2e.remote_loopback import clean_env, free_port, git_repo

    laptop = git_repo(tmp_path / "laptop")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "provisioning",
            "slurm",
            "--host",
            f"root@127.0.0.1:{free_port()}",
            "--partition",
            "gpu",
            "--known-hosts",
            str(tmp_path / "known_hosts"),
        ],
        cwd=laptop,
        env=clean_env(PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and "cannot connect" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_the_login_node_command_refuses_before_writing_anything(tmp_path):
    """On the login node: no sbatch on PATH (here: PATH holds nothing) is refused in one line, no script
    written; --attach takes a job id only."""

    def suite_slurm(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "suite", "slurm", *args, "--out", str(tmp_path / "runs")],
            cwd=ROOT,
            env={**os.environ, "PATH": str(tmp_path), "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = suite_slurm("--partition", "gpu", "--submit")
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "error: no sbatch on the login node: run make slurm on the cluster's login node, or give "
        "SLURM_HOST=user@login"
    ]
    attach = suite_slurm("--attach", "12; rm -rf ~")
    assert (
        attach.returncode == 2
        and len(attach.stderr.splitlines()) == 1
        and "not a Slurm job id" in attach.stderr
    )
    assert not (tmp_path / "runs").exists()
    # NCCL_ENV= on the login node: a bad file is one line and nothing written; a good one is copied beside
    # the batch script (on the shared storage every node reads) and the script's `suite run` is given it
    bad = tmp_path / "bad.env"
    bad.write_text("LD_PRELOAD=/tmp/x.so\n")
    refused = suite_slurm("--partition", "gpu", "--env-file", str(bad))
    assert refused.returncode == 2 and "bad.env:1: LD_PRELOAD is not" in refused.stderr
    assert not (tmp_path / "runs").exists()
    good = tmp_path / "nccl.env"
    good.write_text("NCCL_IB_HCA=mlx5_0\n")
    written = suite_slurm("--partition", "gpu", "--env-file", str(good))
    assert written.returncode == 0, written.stderr
    (script,) = (tmp_path / "runs").glob("*.sbatch")
    (copied,) = (tmp_path / "runs").glob("*.nccl.env")
    assert (
        copied.read_text() == "NCCL_IB_HCA=mlx5_0\n"
        and f"--env-file {copied.resolve()}" in script.read_text()
    )
