"""The bandwidth stage's split on a multi-node run: every node's own intra-node sweep beside the sweep across
nodes.

    rows += _intra_node.measure(ctx, sweep_args)     # bandwidth.run, only when profile.nodes has 2+ nodes

Every node at once runs `python -m suite.stages.bandwidth.nodesweep` (multilaunch.run_on_each_node: here on
the first node, over ssh or one srun on the others), which is a single-node launch of the torch sweep with the
node's nproc ranks (the launcher a one-node run uses; no rendezvous across nodes) and, on GPUs, nccl-tests in
its single-node form (`mpirun -np <nproc>` on that node, or one process `-g <nproc>`: no hostfile, no other
node).
Each node's raw output stays in raw/bandwidth/<node>/ (intra.*.log, the *_perf.out files) and its rows in
<node>/intra-rows.jsonl, read back here and renamed so that nothing that reads the cross-node rows sees them:
case `intra.<case>@<node>` (`intra.all_reduce@gpu-a`, `intra.nccl-tests.all_reduce@gpu-a`,
`intra.fit.all_reduce@gpu-a`), and a failed launch `launch.intra@<node>` (bandwidth's launch verdicts name
it). The cross-node rows keep their plain cases: on a multi-node run they are the inter-node measurement.

The floors and verdicts of both halves are suite/stages/bandwidth/intra_judges.py's.
facts['alpha_beta_intra'] is the α-β fit of the slowest node's intra all_reduce (the one a hierarchical
collective waits for), shaped as facts['alpha_beta'], which stays the fit across every node.
Not a stage: the underscore keeps it out of discovery.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from suite.cluster.multinode import parse_nodes
from suite.config import Profile
from suite.facts import FittedAlphaBeta
from suite.launch.rows import CASE_PREFIX, launch_rows
from suite.results import Row, read_rows_jsonl
from suite.stages import _nccl_tests
from suite.stages._alphabeta_fit import fit_and_pick

STAGE = "bandwidth"
TAG = "intra"
PREFIX = "intra."
ROWS_FILE = "intra-rows.jsonl"
LOG_NAME = "intra.log"
COLLECTIVES = tuple(_nccl_tests.PROGRAMS)


# ---------------------------------------------------------------- names


def node_names(profile: Profile) -> list[str]:
    """The nodes that run an intra-node sweep: every node of a multi-node run with a link inside it (2+ ranks
    per node); none on one node (the stage's own sweep is the intra-node one there)."""
    if profile.nproc < 2 or len(profile.nodes) < 2:
        return []
    return [n.name for n in parse_nodes(profile.nodes)]


def intra_case(case: str, node: str) -> str:
    """A node's row case: `intra.all_reduce@gpu-a`; a failed launch stays a launch, `launch.intra@gpu-a`."""
    return f"{case}@{node}" if case.startswith(CASE_PREFIX) else f"{PREFIX}{case}@{node}"


def split_case(case: str) -> tuple[str, str] | None:
    """`intra.all_reduce@gpu-a` → ('all_reduce', 'gpu-a'); None for a case that is not a node's (a host name
    never holds '@')."""
    if not case.startswith(PREFIX) or "@" not in case:
        return None
    inner, _, node = case[len(PREFIX) :].rpartition("@")
    return inner, node


def relabel(rows: Sequence[Row], node: str) -> list[Row]:
    out = []
    for r in rows:
        text = r.text.replace(f"raw/{STAGE}/", f"raw/{STAGE}/{node}/") if r.text else r.text
        out.append(Row(**{**r.to_dict(), "case": intra_case(r.case, node), "text": text}))
    return out


# ---------------------------------------------------------------- on each node (nodesweep.py)


def node_argv(
    profile: Profile, sweep_args: Sequence[str], timeout_s: float | None = None, python: str = sys.executable
) -> list[str]:
    """What every node runs: the suite's per-node sweep, given the profile as one node sees it (its own
    ranks)."""
    single = profile.with_overrides(nodes=())
    return [
        python,
        "-m",
        "suite.stages.bandwidth.nodesweep",
        "--profile-json",
        json.dumps(single.to_dict(), separators=(",", ":")),
        *(["--timeout-s", f"{timeout_s:.0f}"] if timeout_s else []),
        "--",
        *sweep_args,
    ]


class NodeContext:
    """The part of a StageContext that launch_rows and the nccl-tests adapter use, on a node that is not the
    suite's: this node's raw folder, a single-node launch, progress to the node's log."""

    stage = STAGE

    def __init__(self, profile: Profile, raw_dir: Path, deadline: float | None) -> None:
        self.profile, self.raw_dir, self.deadline = profile, Path(raw_dir), deadline

    def say(self, message: str, done: int | None = None, of: int | None = None) -> None:
        print(message + (f" ({done}/{of})" if of else ""), flush=True)

    def time_left(self) -> float | None:
        return None if self.deadline is None else max(1.0, self.deadline - time.monotonic())

    def torchrun(self, module: str, args: Sequence[str] = (), *, tag: str = "", **kwargs):
        from suite.launch.forklaunch import launch

        kwargs.setdefault("timeout_s", self.time_left())
        return launch(self.profile, module, args, raw_dir=self.raw_dir, tag=tag, **kwargs)


def on_this_node(ctx: NodeContext, sweep_args: Sequence[str]) -> list[Row]:
    """This node's torch sweep, then (on GPUs) its nccl-tests in the single-node form, whatever became of the
    other."""
    ctx.say(f"intra-node torch sweep: {ctx.profile.nproc} ranks")
    rows = launch_rows(ctx, "suite.workloads.collective_sweep", list(sweep_args), tag=TAG)
    if ctx.profile.device == "cuda":
        rows += _nccl_tests.sweep(ctx.profile, ctx, list(COLLECTIVES))
    return rows


# ---------------------------------------------------------------- on the first node


def measure(ctx, sweep_args: Sequence[str]) -> list[Row]:
    """Every node's intra-node sweep at once; its rows renamed for its node, a node that wrote none a failed
    launch."""
    from suite.cluster.multilaunch import run_on_each_node

    names = node_names(ctx.profile)
    if not names:
        return []
    for name in names:  # a resumed stage: an earlier attempt's rows are not this one's
        (ctx.raw_dir / name / ROWS_FILE).unlink(missing_ok=True)
    ctx.say(f"intra-node sweep on each of {len(names)} nodes at once ({ctx.profile.nproc} ranks each)")
    left = ctx.time_left()
    # the nodes stop their own sweep a little before the stage's deadline, so their rows are written and
    # fetched
    argv = node_argv(
        ctx.profile, sweep_args, timeout_s=None if left is None else max(left - 20.0, 0.8 * left)
    )
    run_on_each_node(
        ctx.profile,
        argv,
        raw_dir=ctx.raw_dir,
        log_name=LOG_NAME,
        timeout_s=left if left is not None else 3600.0,
    )
    rows: list[Row] = []
    for name in names:
        path = ctx.raw_dir / name / ROWS_FILE
        if path.is_file():
            rows += relabel(read_rows_jsonl(path), name)
        else:
            rows.append(
                Row(
                    stage=STAGE,
                    case=f"{CASE_PREFIX}{TAG}@{name}",
                    metric="status",
                    value=0.0,
                    unit="count",
                    source="torchrun",
                    text=f"the intra-node sweep on node {name} wrote no rows: see "
                    f"raw/{STAGE}/{name}/{LOG_NAME}",
                )
            )
    return rows


def by_node(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Each node's intra rows under their plain cases (as the node measured them)."""
    out: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        split = split_case(r.case)
        if split:
            out[split[1]].append(Row(**{**r.to_dict(), "case": split[0]}))
    return dict(out)


def with_fit(rows: list[Row], nccl_tests_form: str | None = None) -> tuple[list[Row], dict[str, Any]]:
    """Each node's α-β fit rows (`intra.fit.all_reduce@<node>`), and facts['alpha_beta_intra']: the slowest
    node's fit (smallest β), shaped as facts['alpha_beta']; nothing when no node gave a usable fit."""
    fits: list[Row] = []
    best: dict[str, FittedAlphaBeta] = {}
    for node, mine in sorted(by_node(rows).items()):
        world = max((r.world or 0 for r in mine if r.case == "all_reduce"), default=0)
        node_fits, picked = fit_and_pick(mine, world, nccl_tests_form)
        fits += relabel(node_fits, node)
        if picked is not None:
            best[node] = picked
    if not best:
        return rows + fits, {}
    slowest = min(best, key=lambda n: best[n].beta_Bps)
    return rows + fits, {"alpha_beta_intra": best[slowest]}


def estimate_s(p) -> float:
    """`make plan`'s seconds (p: suite.plan.hours.PlanInputs): each node's single-node launch and nccl-tests
    sweep at once, at the link's β within a node (not the NIC's); 0 on one node."""
    from suite.hardware.gpus import gpu_for
    from suite.plan.hours import sweep_time_s

    nodes = p.assume.nodes
    if nodes < 2:
        return 0.0
    per_node = p.gpus // nodes
    if per_node < 2:
        return 0.0
    gpu = gpu_for(p.assume.gpu_name)
    link = p.assume.beta_Bps or ((gpu.nvlink_full_GBps or gpu.pcie_x16_GBps) * 1e9 if gpu else p.beta_Bps)
    bus = sum(sweep_time_s(c, p.sizes, per_node, p.alpha_s, link, p.repeats) for c in COLLECTIVES)
    torch_bus = sum(
        sweep_time_s(c, p.sizes, per_node, p.alpha_s, link, p.repeats, placements=1) for c in COLLECTIVES
    )
    launch = p.assume.torchrun_launch_s - p.assume.rendezvous_s  # one node's own launch: no rendezvous
    return launch + torch_bus + len(COLLECTIVES) * p.assume.nccl_tests_launch_s + bus
