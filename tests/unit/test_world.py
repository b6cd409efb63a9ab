"""The run's processes come from the GPUs preflight counted, NPROC= chooses fewer, and the plan agrees
(suite/world.py)."""

import pytest

from provisioning.__main__ import build_parser as provisioning_parser
from provisioning.group import NodeRunSettings, node_world
from provisioning.job.lifecycle import suite_args
from provisioning.remote import options
from provisioning.session.hosts import parse_host
from provisioning.session.options import RemoteOptions, world_problem
from suite import stages
from suite.__main__ import build_parser as suite_parser
from suite.config import ProfileError, get_profile
from suite.plan.hours import PlanAssumptions, estimate, plan_inputs
from suite.world import host_profile, run_nproc


def run_profile(args: list[str]):
    """The profile `python -m suite run <args>` would build (what suite/commands/run.py does before any
    stage)."""
    parsed = suite_parser().parse_args(args)
    return get_profile(parsed.profile, parsed.nproc)


def remote_opts(**kw) -> RemoteOptions:
    return RemoteOptions(host=parse_host("root@203.0.113.7"), **kw)


GPU_COUNTS = range(1, 9)  # every box people rent: 3, 5, 6 and 7 GPUs too, and one
POWER_OF_TWO = {1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 4, 8: 8}
"""The largest power of two within each count: the ranks zero/pp/cp/ep/overlap/profile run on."""
PARALLEL = ("zero", "pp", "cp", "ep", "overlap", "profile")
EVERY_GPU = ("bandwidth", "crossover", "burnin")
"""Stages that run on every GPU the host lists, whatever their number (a ring and nccl-tests take any
world)."""


@pytest.mark.parametrize("gpus", GPU_COUNTS)
def test_the_run_on_a_counted_host_is_the_profile_its_plan_planned(gpus):
    planned = host_profile("nccl-gpu", gpus)
    run = run_profile(suite_args(remote_opts(), "/b", "/b/LAST", None, gpus=gpus))
    assert run == planned
    assert run.world == run.nproc == gpus  # the world is every GPU listed
    # The degrees are the powers of two up to the GPUs: a 2-GPU box measures TP/DP 1 and 2, never 8; 6 → 1, 2,
    # 4.
    assert run.degrees == tuple(d for d in (1, 2, 4, 8) if d <= gpus)
    assert run.parallel_ranks == POWER_OF_TWO[gpus] and run.zero_degrees == (POWER_OF_TWO[gpus],)
    plan = estimate(planned, PlanAssumptions())
    assert plan.gpus == gpus
    # the plan's inputs take the same ranks as the run (each stage's estimate reads them)
    assert plan_inputs(planned, PlanAssumptions()).parallel_ranks == run.parallel_ranks
    assert plan_inputs(planned, PlanAssumptions()).zero_degrees == run.zero_degrees


@pytest.mark.parametrize("gpus", GPU_COUNTS)
def test_every_gpu_stage_plans_its_degrees_within_the_counted_gpus(gpus):
    """Every expectation's world fits the GPUs; the parallel stages' worlds are powers of two within the
    largest one that fits, and where that is fewer than the GPUs an expectation says so; the others run on
    every GPU."""
    profile = host_profile("nccl-gpu", gpus)
    for name in stages.available(profile.name):
        want = stages.load(name).expect(profile, {})
        for e in want:
            assert (e.world or 0) <= gpus, (name, e)
        worlds = {e.world for e in want if e.world}
        if name in PARALLEL:
            assert worlds <= {d for d in (1, 2, 4, 8) if d <= POWER_OF_TWO[gpus]}, (name, worlds)
            said = [e for e in want if e.metric == "parallel_ranks"]
            if POWER_OF_TWO[gpus] < gpus and worlds:
                assert [e.value for e in said] == [POWER_OF_TWO[gpus]], name
                assert (
                    f"{gpus} ranks, one per GPU" in said[0].basis
                    and f"ranks 0–{POWER_OF_TWO[gpus] - 1}" in said[0].basis
                )
            else:
                assert said == [], name
        if name in EVERY_GPU and worlds:
            assert worlds == {gpus}, (name, worlds)


def test_nproc_chooses_fewer_never_more():
    assert run_nproc("nccl-gpu", 8, 4) == 4
    run = run_profile(suite_args(remote_opts(nproc=4), "/b", "/b/LAST", None, gpus=8))
    assert (run.nproc, run.degrees) == (4, (1, 2, 4))
    with pytest.raises(ProfileError, match="NPROC=8 at most"):
        run_nproc("nccl-gpu", 8, 16)
    assert "NPROC=4 at most" in world_problem(remote_opts(nproc=8), 4)
    assert world_problem(remote_opts(nproc=2), 4) is None
    assert world_problem(remote_opts(), 0) is None  # no GPU at all is preflight's own refusal


def test_profiles_of_their_own_size_keep_it():
    assert run_nproc("nccl-1gpu", 8) is None
    assert run_profile(suite_args(remote_opts(profile="nccl-1gpu"), "/b", "/b/LAST", None, gpus=8)).nproc == 1
    with pytest.raises(ProfileError, match="one process on one card"):
        run_nproc("nccl-1gpu", 8, 4)
    assert run_nproc("gloo-cpu", 0) is None and run_nproc("gloo-cpu", 0, 2) == 2


def test_a_resumed_run_keeps_its_manifests_processes():
    assert "--nproc" not in suite_args(remote_opts(), "/b", "/b/LAST", "/b/runs/r1", gpus=8)


def test_several_hosts_take_the_same_rule_per_node():
    opts = remote_opts(profile="nccl-gpu")
    args = suite_args(node_world(opts, NodeRunSettings()), "/b", "/b/LAST", None, gpus=4)
    assert args[args.index("--nproc") + 1] == "4"
    args = suite_args(node_world(opts, NodeRunSettings(nproc=2)), "/b", "/b/LAST", None, gpus=4)
    assert args[args.index("--nproc") + 1] == "2"


@pytest.mark.parametrize("command", ["remote", "plan"])
def test_make_passes_nproc_to_both_remote_and_plan(command):
    argv = [command, "--host", "root@203.0.113.7", "--nproc", "2"]
    assert options(provisioning_parser().parse_args(argv)).nproc == 2
    unset = [command, "--host", "root@203.0.113.7", "--nproc", ""]
    assert options(provisioning_parser().parse_args(unset)).nproc == 0
    with pytest.raises(ValueError, match="NPROC='x'"):
        options(provisioning_parser().parse_args([command, "--host", "root@h", "--nproc", "x"]))


def test_three_ranks_run_ep_and_cp_on_two_as_the_plan_says(tmp_path):
    """A real run on 3 processes (gloo, the rehearsal's launcher): 8 experts do not split over 3, CP = 2 does
    not divide 3 — both ran nothing or refused before; now each runs on ranks 0–1, every row at world 2, its
    golden checks pass, and the expectations say why 2 of the 3."""
    import csv
    import json
    import subprocess
    import sys
    from pathlib import Path

    last = tmp_path / "LAST"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite",
            "run",
            "--profile",
            "gloo-cpu",
            "--nproc",
            "3",
            "--stages",
            "ep,cp",
            "--out",
            str(tmp_path),
            "--record-last",
            str(last),
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "EP = 2 on 2 of the 3 ranks (the largest power of two)" in proc.stderr  # progress goes to stderr
    run = Path(last.read_text().strip())
    statuses = {v["id"]: v["status"] for v in json.loads((run / "verdicts.json").read_text())["verdicts"]}
    golden = {k: s for k, s in statuses.items() if ".golden." in k and "torch_cp" not in k}
    assert golden and set(golden.values()) == {"pass"}, statuses
    with open(run / "results.csv") as f:
        assert {r["world"] for r in csv.DictReader(f) if r["stage"] in ("ep", "cp")} == {"2"}
    with open(run / "expectations.csv") as f:
        said = [r for r in csv.DictReader(f) if r["metric"] == "parallel_ranks"]
    assert sorted(r["stage"] for r in said) == ["cp", "ep"] and all(float(r["value"]) == 2 for r in said)
