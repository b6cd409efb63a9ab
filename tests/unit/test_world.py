"""The run's processes come from the GPUs preflight counted, NPROC= chooses fewer, and the plan agrees (suite/world.py)."""

import pytest

from provisioning.__main__ import build_parser as provisioning_parser
from provisioning.remote import options
from provisioning.cluster.driver import NodeRunSettings, node_world
from provisioning.session.hosts import parse_host
from provisioning.job.lifecycle import suite_args
from provisioning.session.options import RemoteOptions, world_problem
from suite import stages
from suite.__main__ import build_parser as suite_parser
from suite.config import ProfileError, get_profile
from suite.plan.hours import PlanAssumptions, estimate
from suite.world import host_profile, run_nproc


def run_profile(args: list[str]):
    """The profile `python -m suite run <args>` would build (what suite/commands/run.py does before any stage)."""
    parsed = suite_parser().parse_args(args)
    return get_profile(parsed.profile, parsed.nproc)


def remote_opts(**kw) -> RemoteOptions:
    return RemoteOptions(host=parse_host("root@203.0.113.7"), **kw)


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_the_run_on_a_counted_host_is_the_profile_its_plan_planned(gpus):
    planned = host_profile("nccl-gpu", gpus)
    run = run_profile(suite_args(remote_opts(), "/b", "/b/LAST", None, gpus=gpus))
    assert run == planned
    assert run.world == run.nproc == gpus
    # The degrees are the powers of two up to the GPUs: a 2-GPU box measures TP/DP 1 and 2, never 8.
    assert run.degrees == tuple(d for d in (1, 2, 4, 8) if d <= gpus)
    plan = estimate(planned, PlanAssumptions())
    assert plan.gpus == gpus


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_every_gpu_stage_plans_its_degrees_within_the_counted_gpus(gpus):
    profile = host_profile("nccl-gpu", gpus)
    for name in stages.available(profile.name):
        for e in stages.load(name).expect(profile, {}):
            assert (e.world or 0) <= gpus, (name, e)


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
