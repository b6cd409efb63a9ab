"""Real torchrun launches on gloo: rows through files, logs per rank, failures with their log tail."""

from __future__ import annotations

import pytest

from suite.config import GLOO_CPU
from suite.launch import LaunchError, run_torchrun

pytestmark = pytest.mark.dist


@pytest.fixture(scope="module")
def good_launch(tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw")
    return raw, run_torchrun(GLOO_CPU, "tests.dist.workers.report_env", raw_dir=raw, nproc=3, tag="env",
                             timeout_s=120)


def test_rows_come_back_from_every_rank(good_launch):
    _, result = good_launch
    sums = {r.rank: r.value for r in result.rows() if r.case == "sum_of_ranks"}
    assert sums == {0: 3.0, 1: 3.0, 2: 3.0}  # 0 + 1 + 2 on every rank
    assert result.exit_code == 0


def test_workers_run_with_the_profiles_environment(good_launch):
    _, result = good_launch
    env = {(r.rank, r.metric): r.text for r in result.rows() if r.case == "env"}
    for rank in range(3):
        assert env[(rank, "OMP_NUM_THREADS")] == "1"
        assert env[(rank, "GLOO_SOCKET_IFNAME")] == "lo"
        assert env[(rank, "MASTER_ADDR")] == "127.0.0.1"
        assert env[(rank, "CARDTIME_BACKEND")] == "gloo"


def test_each_rank_logs_to_its_own_file(good_launch):
    raw, _ = good_launch
    for rank in range(3):
        log = (raw / f"env.rank{rank}.log").read_text()
        assert f"rank {rank}/3 up" in log and f"rank {rank} emitted" in log
    assert "torch.distributed.run" in (raw / "env.torchrun.log").read_text()


def test_a_failing_rank_fails_the_launch_with_its_log_tail(tmp_path):
    with pytest.raises(LaunchError) as caught:
        run_torchrun(GLOO_CPU, "tests.dist.workers.report_env", ["--fail-rank", "1"], raw_dir=tmp_path, nproc=2,
                     timeout_s=120)
    error = caught.value
    assert error.exit_code not in (0, None)
    assert "rank 1 failing on purpose" in error.log_tail
    assert "--nproc-per-node=2" in error.describe()
