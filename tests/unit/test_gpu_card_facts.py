"""tests/gpu/card_facts.py: the GPU tests get the card's facts the way a live run does (the topology stage's
own nvidia-smi capture), here from a stand-in nvidia-smi replaying a real A10 `-q` (23028 MiB,
tests/data/health)."""

from __future__ import annotations

import os

from suite.config import NCCL_GPU
from suite.hardware.card_fit import card_bytes, nccl_tests_max_bytes, usable_bytes
from suite.hardware.stage_fit import pp_footprint
from suite.stages import cp, ep, pp
from tests.gpu.card_facts import live_facts, stage_context
from tests.unit.test_topology_stage import DATA, fake_smi

A10_Q = DATA / "health" / "nvsmi-q-02-a10-remapped-rows-pending-535.txt"
PROFILE = NCCL_GPU.with_overrides(nproc=2, degrees=(1, 2))


def replayed_facts(tmp_path, monkeypatch):
    fake_smi(
        tmp_path / "bin",
        DATA / "topo" / "23-rtx5090-2gpu-phb-gpu-numa-id.txt",
        A10_Q,
        DATA / "smi" / "quadro-rtx4000-2gpu-L.txt",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return live_facts(PROFILE, tmp_path / "run")


def test_the_card_comes_from_the_topology_stages_nvidia_smi_q(tmp_path, monkeypatch):
    facts = replayed_facts(tmp_path, monkeypatch)
    assert card_bytes(facts) == 23028 << 20  # the -q's FB Memory Usage / Total
    assert (tmp_path / "run" / "raw" / "topology" / "nvidia-smi-q.txt").read_bytes() == A10_Q.read_bytes()
    assert facts["profile"] == PROFILE.to_dict() and facts["topology"]["gpu_count"] == 2
    ctx = stage_context(PROFILE, "bandwidth", tmp_path / "run", facts)
    assert ctx.facts is facts and ctx.raw_dir.is_dir()


def test_the_stages_size_themselves_to_that_card_as_in_a_run(tmp_path, monkeypatch):
    """On the 24 GB card the stages shrink what the profile asks (unsized, the GPU tests used to run the
    80 GB sizes): nccl-tests' -e, pp's model (within the card), cp's lengths, ep's tokens."""
    facts = replayed_facts(tmp_path, monkeypatch)
    top, basis = nccl_tests_max_bytes(PROFILE.sweep, card_bytes(facts))
    assert top < PROFILE.sweep.max_bytes and "23028" not in basis and "22.5 GiB" in basis
    sized, unsized = pp.pp_model(PROFILE, facts), pp.pp_model(PROFILE, {})
    assert sized != unsized
    assert max(
        pp_footprint(
            sized, 2, PROFILE.section("pp").timed_microbatches, PROFILE.section("pp").micro_batch
        ).values()
    ) <= usable_bytes(card_bytes(facts))
    assert cp.timed_lengths(PROFILE, facts)[0] != cp.timed_lengths(PROFILE, {})[0]
    assert ep.timed_tokens(PROFILE, facts)[0] <= ep.timed_tokens(PROFILE, {})[0]


def test_without_nvidia_smi_no_card_is_known_and_nothing_is_resized(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    facts = live_facts(PROFILE, tmp_path / "run")
    assert card_bytes(facts) is None
    assert pp.pp_model(PROFILE, facts) == pp.pp_model(PROFILE, {})
