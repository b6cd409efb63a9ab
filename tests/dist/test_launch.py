"""Real launches on gloo under both launchers (torchrun, and the warm fork launcher): rows through files, logs
per rank, the same worker environment, failures with their log tail, no process left behind."""

from __future__ import annotations

import time

import pytest

from suite.config import GLOO_CPU
from suite.launch import forklaunch, procs
from suite.launch.forklaunch import launch, warm_zygote
from suite.launch.torchrun import LaunchError
from suite.results import read_rows_jsonl

pytestmark = pytest.mark.dist

LAUNCHERS = ("torchrun", "fork")
WORKER = "tests.dist.workers.report_env"
LAUNCHER_LOG = {"torchrun": "torchrun.log", "fork": "launcher.log"}


def profile(launcher: str):
    return GLOO_CPU.with_overrides(launcher=launcher)


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    """One good 3-rank launch per launcher, the same worker and arguments: launcher → (raw folder, result)."""
    out = {}
    for launcher in LAUNCHERS:
        raw = tmp_path_factory.mktemp(f"raw-{launcher}")
        out[launcher] = (
            raw,
            launch(
                profile(launcher),
                WORKER,
                ["--fail-rank", "-1"],
                raw_dir=raw,
                nproc=3,
                tag="env",
                timeout_s=120,
            ),
        )
    return out


def reported(result, case: str) -> dict:
    return {
        (r.rank, r.metric): (r.text if r.unit == "" else r.value) for r in result.rows() if r.case == case
    }


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_rows_come_back_from_every_rank(launches, launcher):
    _, result = launches[launcher]
    sums = {r.rank: r.value for r in result.rows() if r.case == "sum_of_ranks"}
    assert sums == {0: 3.0, 1: 3.0, 2: 3.0}  # 0 + 1 + 2 on every rank
    assert result.exit_code == 0


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_workers_run_with_the_profiles_environment(launches, launcher):
    _, result = launches[launcher]
    env = reported(result, "env")
    assert len(env) == 3 * 24
    for rank in range(3):
        assert env[(rank, "OMP_NUM_THREADS")] == "1"
        assert env[(rank, "GLOO_SOCKET_IFNAME")] == "lo"
        assert env[(rank, "MASTER_ADDR")] == "127.0.0.1"
        assert env[(rank, "CARDTIME_BACKEND")] == "gloo"
        assert env[(rank, "RANK")] == env[(rank, "LOCAL_RANK")] == str(rank)
        assert env[(rank, "WORLD_SIZE")] == "3"
    process = reported(result, "process")
    assert [process[(rank, "threads")] for rank in range(3)] == [1.0, 1.0, 1.0]
    assert [process[(rank, "argv")] for rank in range(3)] == ["--fail-rank -1"] * 3


def test_both_launchers_give_the_workers_the_same_environment(launches):
    """Every variable torchrun's agent and the suite set, equal under both launchers but for what names the
    launch."""
    per_launch = {"MASTER_PORT", "CARDTIME_OUT_DIR", "CARDTIME_RAW_DIR"}
    torchrun, fork = (reported(launches[name][1], "env") for name in LAUNCHERS)
    assert len(torchrun) == len(fork) == 3 * 24
    differ = {key: (torchrun[key], fork[key]) for key in torchrun if torchrun[key] != fork[key]}
    assert {var for _, var in differ} == per_launch, differ
    assert all(value is not None for value in torchrun.values())


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_each_rank_logs_to_its_own_file(launches, launcher):
    raw, _ = launches[launcher]
    for rank in range(3):
        log = (raw / f"env.rank{rank}.log").read_text()
        assert f"rank {rank}/3 up" in log and f"rank {rank} emitted" in log
    # torchrun's own output, or the fork launcher's, which names the torchrun command running the same workers
    assert "torch.distributed.run" in (raw / f"env.{LAUNCHER_LOG[launcher]}").read_text()


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_failing_rank_fails_the_launch_with_its_log_tail(tmp_path, launcher):
    with pytest.raises(LaunchError) as caught:
        launch(profile(launcher), WORKER, ["--fail-rank", "1"], raw_dir=tmp_path, nproc=2, timeout_s=120)
    error = caught.value
    assert error.exit_code not in (0, None)
    assert "rank 1 failing on purpose" in error.log_tail
    assert "--nproc-per-node=2" in error.describe()


def rank_pids(folder) -> list[int]:
    pids = [
        int(r.value)
        for path in sorted(folder.glob("out/rows.rank*.jsonl"))
        for r in read_rows_jsonl(path)
        if r.metric == "pid"
    ]
    assert pids, f"no rank wrote its pid under {folder}"
    return pids


def gone(pids: list[int], within_s: float = 10.0) -> bool:
    return procs.wait_gone(pids, within_s, poll_s=0.1)


def test_warm_ranks_killed_or_hung_fail_the_launch_and_leave_no_process(tmp_path):
    """The fork launcher: a SIGKILLed rank fails its launch, its peers are stopped; a hung rank is killed at
    the launch's timeout with every peer; the zygote forks from one thread and serves the next launch."""
    fork = profile("fork")
    zygote = warm_zygote()
    assert zygote.ping()["threads"] == 1  # no OpenMP pool or store thread exists when ranks are forked
    with pytest.raises(LaunchError) as killed:
        launch(fork, WORKER, ["--kill-rank", "2"], raw_dir=tmp_path / "kill", nproc=3, timeout_s=120)
    assert killed.value.exit_code == -9 and "rank 2 killing itself" in killed.value.log_tail
    assert gone(rank_pids(tmp_path / "kill"))
    start = time.monotonic()
    with pytest.raises(LaunchError) as hung:
        launch(fork, WORKER, ["--hang-rank", "0"], raw_dir=tmp_path / "hang", nproc=3, timeout_s=8)
    assert "timed out after 8 s" in str(hung.value) and time.monotonic() - start < 30
    assert gone(rank_pids(tmp_path / "hang"))
    again = launch(fork, WORKER, raw_dir=tmp_path / "again", nproc=2, timeout_s=120)
    assert {r.rank: r.value for r in again.rows() if r.case == "sum_of_ranks"} == {0: 1.0, 1: 1.0}
    assert warm_zygote().pid == zygote.pid  # the failures cost the zygote nothing


def test_a_launch_whose_stage_was_killed_leaves_no_rank_once_the_zygote_settles(tmp_path):
    """The runner's kill at a stage's timeout: the stage's child dies with its launch in flight, the zygote's
    agent kills the ranks on its own time; settle_warm_zygote returns only once none of them runs (else a
    rank could write rows after the runner salvaged them)."""
    fork = profile("fork")
    zygote = warm_zygote()
    folder = tmp_path / "killed"

    def stage() -> dict:
        launch(fork, WORKER, ["--hang-rank", "0"], raw_dir=folder, nproc=3, timeout_s=120)
        return {}

    child = procs.fork_call(stage, tmp_path / "result.json", on_error=lambda error: {"error": str(error)})
    deadline = time.monotonic() + 120
    while len(list(folder.glob("out/rows.rank*.jsonl"))) < 3 or not all(
        read_rows_jsonl(p) for p in folder.glob("out/rows.rank*.jsonl")
    ):
        assert time.monotonic() < deadline and not child.poll(), "the launch never started its ranks"
        time.sleep(0.05)
    pids = rank_pids(folder)
    assert procs.alive(pids[0])  # rank 0 sleeps
    assert not child.wait(deadline=0.0)  # the stage killed as the runner kills it
    forklaunch.settle_warm_zygote()
    assert not any(procs.alive(p) for p in pids)  # at once: no waiting here
    assert not procs.descendants(zygote.pid)
    again = launch(fork, WORKER, raw_dir=tmp_path / "again", nproc=2, timeout_s=120)
    assert {r.rank: r.value for r in again.rows() if r.case == "sum_of_ranks"} == {0: 1.0, 1: 1.0}


FORKED_ZYGOTE = """
import json, sys
from pathlib import Path
from suite import runner
from suite.launch import forklaunch
from suite.config import GLOO_CPU
runner.preload_torch(1)
assert forklaunch.can_fork_zygote_here()
zygote = forklaunch.warm_zygote(fork_here=True)
ping = zygote.ping()
result = forklaunch.launch(GLOO_CPU, "tests.dist.workers.report_env", [], raw_dir=Path(sys.argv[1]), nproc=2,
                           timeout_s=120)
sums = {r.rank: r.value for r in result.rows() if r.case == "sum_of_ranks"}
forklaunch.stop_warm_zygote()
print(json.dumps({"kind": type(zygote.proc).__name__, "threads": ping["threads"], "zygote": zygote.pid,
                  "sums": sums, "exit": zygote.proc.returncode}))
"""


def test_a_zygote_forked_from_the_warm_runner_serves_launches_from_one_thread(tmp_path):
    """The runner's way (Zygote.fork_here): the zygote is a fork of a process that imported the warm set
    itself; it forks ranks from one thread, serves a launch, and stops with its parent's stop()."""
    import json
    import subprocess
    import sys

    from suite.launch.torchrun import worker_env

    done = subprocess.run(
        [sys.executable, "-c", FORKED_ZYGOTE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=worker_env(GLOO_CPU),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["kind"] == "_ForkedChild" and got["threads"] == 1
    assert got["sums"] == {"0": 1.0, "1": 1.0}
    assert not procs.alive(got["zygote"])
