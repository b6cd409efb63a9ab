"""python -m suite plan: before renting, every stage's expected duration on the GPU profile, and its cost.

python -m suite plan --profile nccl-gpu --gpus 8 --rate 24
python -m suite plan --gpu "NVIDIA A100-SXM4-80GB" --alpha 8e-6 --json
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from suite import strict_json
from suite.commands import _numbers as numbers
from suite.commands import usage_error
from suite.config import ProfileError, get_profile


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help="expected duration of every stage on a profile, and the cost at a rate")
    p.add_argument("--profile", default="nccl-gpu", help="profile to plan (default nccl-gpu)")
    p.add_argument("--gpus", type=numbers.count, help="GPUs on the box (default: the profile's nproc)")
    p.add_argument("--gpu", default=None, help="GPU name, e.g. 'NVIDIA H100 80GB HBM3' (default H100)")
    p.add_argument("--rate", type=numbers.not_negative, help="price of the host, $/hour")
    p.add_argument("--alpha", type=numbers.not_negative, help="per-step latency α, s (default 5e-6)")
    p.add_argument(
        "--beta", type=numbers.positive, help="per-step bandwidth β, bytes/s (default: the GPU's NVLink peak)"
    )
    p.add_argument("--mfu", type=numbers.fraction, help="assumed model FLOPs utilisation (default 0.35)")
    p.add_argument(
        "--image",
        choices=("build", "pull"),
        default="build",
        help="the CUDA image built on the box (default) or pulled (make remote IMAGE=…)",
    )
    p.add_argument("--runtime", choices=("docker", "host"), default="docker", help="docker (default) or host")
    p.add_argument(
        "--download-rate",
        type=numbers.positive,
        metavar="MB/S",
        help="the box's download rate as preflight measured it (default: an assumed 25 MB/s)",
    )
    p.add_argument(
        "--nodes",
        default="",
        metavar="N|A,B",
        help="a multi-node run: the number of nodes, or the nodes themselves (make plan NODES=2 | HOSTS=a,b)",
    )
    p.add_argument(
        "--inter-node",
        type=numbers.positive,
        metavar="GB/S",
        help="inter-node bandwidth per GPU, GB/s: NIC rate × NICs per node ÷ GPUs per node (default 50)",
    )
    p.add_argument(
        "--tier", choices=("quick", "standard", "soak"), help="plan a tier's stages and burn-in (BURNIN_MIN=)"
    )
    p.add_argument(
        "--library",
        type=Path,
        default=None,
        help="α, β and the step time, unless given, are the medians of this library's runs of the GPU model "
        "(default runs/library.sqlite, or CARDTIME_LIBRARY; absent: the defaults)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=main)


def node_count(text: str) -> int:
    """--nodes 2 → 2; --nodes root@a,root@b → 2, each entry checked as `suite run --nodes` checks it."""
    from suite.cluster.multinode import parse_nodes

    text = (text or "").strip()
    if not text:
        return 1
    if text.isdigit():
        if int(text) < 1:
            raise ValueError(f"NODES={text}: a run has at least one node")
        return int(text)
    return len(parse_nodes(text))


def main(args) -> int:
    from suite.plan.hours import PlanAssumptions, estimate, render
    from suite.plan.setup import SetupAssumptions

    try:
        profile = get_profile(args.profile, args.gpus)
    except ProfileError as e:
        return usage_error(str(e))
    changes = {
        k: v
        for k, v in (
            ("gpu_name", args.gpu),
            ("alpha_s", args.alpha),
            ("beta_Bps", args.beta),
            ("mfu", args.mfu),
        )
        if v is not None
    }
    learned, said = learn(args, profile)
    if learned is not None:
        if learned.fits and args.alpha is None and args.beta is None:
            changes.update(alpha_s=learned.alpha_s, beta_Bps=learned.beta_Bps)
        if learned.step_s is not None and args.mfu is None:
            changes["step_s"] = learned.step_s
    try:
        changes["nodes"] = node_count(args.nodes)
    except ValueError as e:
        return usage_error(str(e))
    if args.inter_node is not None:
        changes["inter_node_Bps"] = args.inter_node * 1e9
    if args.rate is not None and args.rate < 0:
        return usage_error(f"--rate {args.rate}: a price per hour is not negative")
    setup = {"image": args.image, "runtime": args.runtime}
    if args.download_rate is not None:
        setup.update(download_Bps=args.download_rate * 1e6, download_basis="measured by preflight")
    try:
        only = None
        if args.tier:
            from suite.plan.tiers import apply

            profile, chosen = apply(profile, args.tier)
            only = tuple(chosen)
        plan = estimate(
            profile,
            PlanAssumptions(**changes),
            rate_per_hour=args.rate,
            setup=SetupAssumptions(**setup),
            only=only,
            tier=args.tier or "",
        )
    except ValueError as e:
        return usage_error(str(e))
    if args.json:
        data = dataclasses.asdict(plan)
        data["learned_from_library"] = said
        data.update(
            total_s=plan.total_s, billed_s=plan.billed_s, cost=plan.cost, fits_one_hour=plan.fits_one_hour
        )
        print(strict_json.dumps(data, indent=1))
    else:
        print(render(plan))
        if said:
            print(said)
    return 0


def learn(args, profile):
    """(what the library gives for this plan's GPU model, the line saying so), or (None, None); only for a
    single-node plan, and only what the command line did not give."""
    from suite.hardware.gpus import gpu_for
    from suite.library.index import default_path, learned
    from suite.plan.hours import PlanAssumptions

    entry = gpu_for(args.gpu or PlanAssumptions().gpu_name)
    if entry is None or (args.nodes or "").strip() not in ("", "1"):
        return None, None
    library = args.library or default_path()
    found = learned(library, entry.model, args.gpus or profile.nproc, profile.name)
    if found is None:
        return None, None
    found = dataclasses.replace(
        found,
        fits=found.fits if args.alpha is None and args.beta is None else 0,
        steps=found.steps if args.mfu is None else 0,
    )
    return (found, found.line(entry.model, library)) if found.fits or found.steps else (None, None)
