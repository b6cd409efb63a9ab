"""`python -m suite.stages.bandwidth.nodesweep --profile-json JSON [--timeout-s S] -- SWEEP ARGS…`: the
bandwidth stage's intra-node sweep on this node alone, during a multi-node run. Started on every node at once
(multilaunch.run_on_each_node, from suite/stages/bandwidth/intra_node.py), it finds its node's folder in
$CARDTIME_RAW_DIR (raw/bandwidth/<node>/), runs the torch sweep as a one-node run would (its nproc ranks, the
profile's launcher, no rendezvous across nodes), then on GPUs nccl-tests in the single-node form, and leaves
the rows in <node>/intra-rows.jsonl; a failed launch is a row there too, so the first node judges what
happened here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from suite.config import ProfileError, profile_from_dict
from suite.results import write_rows_jsonl
from suite.stages.bandwidth.intra_node import ROWS_FILE, NodeContext, on_this_node


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="the bandwidth stage's intra-node sweep on this node of a multi-node run"
    )
    p.add_argument("--profile-json", required=True, help="the profile as this node runs it (Profile.to_dict)")
    p.add_argument("--timeout-s", type=float, default=None, help="the stage's time left, seconds")
    p.add_argument(
        "sweep_args", nargs=argparse.REMAINDER, help="after --: suite.workloads.collective_sweep's arguments"
    )
    args = p.parse_args(argv)
    try:
        profile = profile_from_dict(json.loads(args.profile_json))
    except (ValueError, TypeError, ProfileError) as e:
        print(
            f"suite.stages.bandwidth.nodesweep: --profile-json is not a profile ({e}): "
            "pass Profile.to_dict() as JSON",
            file=sys.stderr,
        )
        return 2
    raw = Path(os.environ.get("CARDTIME_RAW_DIR", "."))
    raw.mkdir(parents=True, exist_ok=True)
    sweep = args.sweep_args[1:] if args.sweep_args[:1] == ["--"] else args.sweep_args
    deadline = time.monotonic() + args.timeout_s if args.timeout_s else None
    rows = on_this_node(NodeContext(profile, raw, deadline), sweep)
    write_rows_jsonl(raw / ROWS_FILE, rows)
    print(f"{len(rows)} rows → {raw / ROWS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())  # a warm launcher the sweep started here is stopped at exit (forklaunch's atexit)
