"""What one case of the torch sweep holds in memory, and which cases a memory budget drops: the
buffers are built on CPU exactly as on a GPU (no process group needed to build or check them)."""

from __future__ import annotations

import pytest
import torch

from suite.workloads import collective_sweep as sweep
from suite.workloads.collective_sweep import COLLECTIVES, Expected, count_wrong, filled, fit_to_memory

CPU = torch.device("cpu")


def held_bytes(buffers: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind the buffers (an in-place input is a view of the output)."""
    storages = {b.untyped_storage().data_ptr(): b.untyped_storage().nbytes() for b in buffers}
    return sum(storages.values())


@pytest.mark.parametrize("name, placement", [(n, p) for n, c in COLLECTIVES.items() for p in c.placements])
def test_a_case_holds_only_its_own_buffers_as_peak_bytes_says(name, placement):
    coll, n, rank = COLLECTIVES[name], 4, 1
    count, nbytes = coll.counts(4096 * 4, n, 4)
    case = coll.build(count, rank, n, torch.float32, CPU, placement)
    # no full-size expected result is kept beside the buffers: S for all_reduce, 2S for all_to_all, …
    assert held_bytes(case.buffers) == coll.peak_bytes(nbytes, n, placement)
    assert coll.peak_bytes(nbytes, n, placement) <= 2 * nbytes


def test_the_check_compares_slice_by_slice_and_counts_every_wrong_element(monkeypatch):
    monkeypatch.setattr(sweep, "CHECK_SLICE", 5)  # slices end mid-period and mid-chunk
    x = torch.cat([filled(13, j + 2, torch.float32, CPU, offset=3) for j in range(3)])
    assert count_wrong(x, 13, lambda j: Expected(j + 2, 1, 3)) == 0
    x[4] += 1
    x[38] -= 1
    assert count_wrong(x, 13, lambda j: Expected(j + 2, 1, 3)) == 2
    # expected one higher everywhere: every element wrong but x[4], which the +1 made right
    assert count_wrong(x, 13, lambda j: Expected(j + 3, 1, 3)) == 38


def test_a_budget_drops_exactly_the_cases_over_it():
    plan = [
        ("all_reduce", 1 << 30, "ip"),
        ("all_to_all", 1 << 30, "oop"),
        ("all_gather", 1 << 30, "oop"),
        ("all_gather", 1 << 30, "ip"),
        ("broadcast", 8, "ip"),
    ]
    # 24 GB card, 8 ranks: budget 1.5 GiB — all_to_all holds 2 GiB, all_gather out of place 1.125 GiB
    kept, dropped = fit_to_memory(plan, 8, 4, 3 << 29)
    assert [(c, p) for c, _, p in kept] == [
        ("all_reduce", "ip"),
        ("all_gather", "oop"),
        ("all_gather", "ip"),
        ("broadcast", "ip"),
    ]
    assert dropped == [("all_to_all", 1 << 30, "oop", 1 << 30, 2 << 30)]
    assert fit_to_memory(plan, 8, 4, None) == (plan, [])  # CPU: no budget, nothing dropped
