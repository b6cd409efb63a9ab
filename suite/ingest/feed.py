"""Captures → a run directory under the nccl-gpu profile, judged by the stages' own expect()/judge().

Each stage the captures can feed gets the rows its run() would have built from the same tool output
(topology/smi.py's rows_from_smi, _nccl_tests.rows_from_output + bandwidth.with_fit, crossover.analysis_rows,
profile.analysis_rows + trace_facts, health.published), handed to the runner in place of run(); the runner
then judges and records them exactly as in a live run.
"""

from __future__ import annotations

import shutil
import socket
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from suite import runner, stages
from suite.config import Profile, get_profile
from suite.ingest import condense
from suite.ingest.inputs import Capture, Unused
from suite.parsers import traces
from suite.path_names import shown
from suite.results import Row, RunDir
from suite.stages import _nccl_tests, bandwidth, crossover, health
from suite.stages import profile as profile_stage
from suite.stages.topology.rules import common_model
from suite.stages.topology.smi import p2p_pairs, rows_from_smi

PROFILE = "nccl-gpu"
SMI_SOURCES = {
    "nvidia-smi-topo-m": "nvidia-smi topo -m",
    "nvidia-smi-topo-p2p": "nvidia-smi topo -p2p",
    "nvidia-smi-q": "nvidia-smi -q",
    "nvidia-smi-L": "nvidia-smi -L",
}
BOX_STAGES = ("health", "topology", "bandwidth")
"""The stages whose captures judge a box (its health, its links, its bandwidth): an ingest without one of them
is INCONCLUSIVE (suite/box_verdict.py), never accepted on the others. crossover and profile judge NCCL and a
workload, not the box: they are judged when captured and not asked for."""
OUR_NAME = {program.removesuffix("_perf"): ours for ours, program in _nccl_tests.PROGRAMS.items()}
"""nccl-tests' collective names (alltoall) → the stages' (all_to_all)."""


@dataclass
class Plan:
    """What the captures feed: per stage, its captures; and the files left over."""

    feeds: dict[str, list[Capture]]
    unused: list[Unused]


def assign(captures: list[Capture]) -> Plan:
    """One box per ingest: one output per nvidia-smi tool, one run per collective (and NCCL_ALGO);
    NCCL_ALGO-pinned all_reduce runs feed crossover only when both Ring and Tree are there."""
    feeds: dict[str, list[Capture]] = {}
    unused: list[Unused] = []
    seen: set[tuple] = set()
    algos = {c.facts.get("algo") for c in captures if c.stage == "crossover"}
    for c in captures:
        if c.stage == "crossover" and not {"Ring", "Tree"} <= algos:
            unused.append(
                Unused(
                    c.path,
                    f"an NCCL_ALGO={c.facts['algo']} run without its "
                    f"{'Tree' if c.facts['algo'] == 'Ring' else 'Ring'} twin: the crossover "
                    f"needs both",
                )
            )
            continue
        if c.stage in ("bandwidth", "crossover"):
            ours = OUR_NAME.get(c.data["collective"])
            if ours is None:
                unused.append(Unused(c.path, f"{c.data['collective']}_perf is not one the stages measure"))
                continue
            if c.stage == "crossover" and ours != "all_reduce":
                unused.append(
                    Unused(
                        c.path,
                        f"{c.data['collective']}_perf pinned to NCCL_ALGO={c.facts['algo']}: "
                        f"the crossover compares all_reduce runs only",
                    )
                )
                continue
            c.facts["collective"] = ours
            key = (c.stage, ours, c.facts.get("algo"))
        else:
            # a profile takes one export per rank; health one `nvidia-smi nvlink -s` and one `-e`
            part = str(c.path) if c.stage == "profile" else c.facts.get("view", "")
            key = (c.stage, c.kind, part)
        if key in seen:
            unused.append(
                Unused(
                    c.path,
                    f"a second {c.kind} output for {c.stage} ({key[1]}): one box and one run "
                    f"each per ingest — ingest it separately",
                )
            )
            continue
        seen.add(key)
        feeds.setdefault(c.stage, []).append(c)
    return Plan(feeds, unused)


# ---------------------------------------------------------------- rows per stage (the stages' own functions)


def topology_rows(caps: list[Capture]) -> tuple[list[Row], dict[str, Any]]:
    outputs = {c.kind: c.data for c in caps}
    rows, facts, _ = rows_from_smi(outputs)  # each output parsed already in inputs.read
    # which pairs reach each other's memory directly, as live (topology.p2p)
    if "nvidia-smi-topo-p2p" in outputs:
        facts["p2p"] = p2p_pairs({"nvidia-smi-topo-p2p": outputs["nvidia-smi-topo-p2p"]})[0]
    for tool in outputs:  # the judge's `tools` check: these outputs were read, the others not given
        rows.append(
            Row(
                stage="topology",
                case=tool,
                metric="tool_status",
                value=0,
                unit="",
                text=f"ok: ingested from {next(c.path.name for c in caps if c.kind == tool)}",
            )
        )
    versions = facts.pop("smi_versions")
    return rows, {"topology": facts, "versions": {k: v for k, v in versions.items() if v}}


def health_facts(caps: list[Capture], nproc: int) -> dict[str, Any]:
    """What the health stage's run() would publish from the same tools' outputs (parsed in inputs.read). The
    runner's usable-GPU skip rule is left out: the other captures are judged whatever the box's state."""
    by_kind = {(c.kind, c.facts.get("view")): c.data for c in caps}
    smi_cap = next((c for c in caps if c.kind == "nvidia-smi-q"), None)
    # an excerpt of whole blocks
    if smi_cap and smi_cap.facts.get("partial") and smi_cap.data.get("complete", True):
        smi_cap.data = {**smi_cap.data, "complete": False, "reason": smi_cap.facts["partial"]}
        smi_cap.facts["why"] = f"{smi_cap.path.name}: {smi_cap.facts['partial']}"
    found = {
        "smi": by_kind.get(("nvidia-smi-q", None)) if not smi_cap else smi_cap.data,
        "smi_why": next((c.facts["why"] for c in caps if c.facts.get("why")), ""),
        "nvlink": health.merge_nvlink(
            by_kind.get(("nvidia-smi nvlink", "status")), by_kind.get(("nvidia-smi nvlink", "errors"))
        ),
        "network": by_kind.get(("ibstat", None)) or by_kind.get(("ibv_devinfo", None)),
        "dcgm": by_kind.get(("dcgmi diag", None)),
        "kernel_log": by_kind.get(("kernel log", None)),
        "fabric_manager": "",
        "partial": {
            PARTIAL_CHECK[c.kind]: f"{c.path.name}: {c.facts['partial']}"
            for c in caps
            if c.facts.get("partial") and c.kind in PARTIAL_CHECK
        },
    }
    return health.published(found, on_gpu=True, nproc=nproc, gate=False)


PARTIAL_CHECK = {
    "nvidia-smi nvlink": "nvlink",
    "ibstat": "network",
    "ibv_devinfo": "network",
    "dcgmi diag": "dcgm",
    "kernel log": "kernel_log",
}
"""The health check each tool's capture feeds: a partial capture's pass is not a pass (health.judge)."""


def partial_captures(plan: Plan) -> list[str]:
    """'FILE: why' for each capture that is not the whole output (an excerpt, a cut table, a -q short of
    blocks)."""
    seen = {}
    for c in (c for caps in plan.feeds.values() for c in caps):
        why = c.facts.get("partial") or (
            c.data.get("reason") if isinstance(c.data, dict) and c.data.get("complete") is False else None
        )
        if why:
            seen.setdefault(str(c.path), why)
    return [f"{path}: {why}" for path, why in seen.items()]


def nccl_rows(caps: list[Capture], stage: str) -> list[Row]:
    """The stage's rows from its nccl-tests captures; a table too long to judge row by row is judged by the
    rows suite/ingest/condense.py keeps, and its status row says so."""
    rows: list[Row] = []
    for c, (data, condensed) in zip(caps, condense.stage_tables([c.data for c in caps]), strict=True):
        what = f"ingested {c.path.name}" + (f" ({condensed.note()})" if condensed else "")
        if condensed:
            print(f"{shown(c.path)}: {condensed.note()}", file=sys.stderr)
        rows += _nccl_tests.rows_from_output(
            data, c.facts["collective"], stage, c.facts.get("algo"), what=what, pasted=True
        )
    return rows


def world_of(plan: Plan, box: dict[str, Any]) -> int:
    """Processes of the box: the topology's GPU count, else the largest nccl-tests world, else the traces'
    ranks."""
    if box.get("gpu_count"):
        return int(box["gpu_count"])
    smi = next((c.data for c in plan.feeds.get("health", []) if c.kind == "nvidia-smi-q"), None)
    if smi and smi["gpus"]:
        return len(smi["gpus"])
    worlds = [c.data.get("nranks") or 0 for s in ("bandwidth", "crossover") for c in plan.feeds.get(s, [])]
    if any(worlds):
        return max(worlds)
    return max(1, sum(len(c.data) for c in plan.feeds.get("profile", [])))


def ingest_profile(plan: Plan, world: int) -> Profile:
    """nccl-gpu with the box's process count and the captures' message sizes (the expectations' sweep)."""
    profile = get_profile(PROFILE, world)
    sizes = sorted(
        {
            r["size"]
            for s in ("bandwidth", "crossover")
            for c in plan.feeds.get(s, [])
            for r in c.data["rows"]
            if r.get("size")
        }
    )
    if not sizes:
        return profile
    factor = max(2, round(sizes[1] / sizes[0])) if len(sizes) > 1 else 2
    return profile.with_overrides(
        sweep=replace(profile.sweep, min_bytes=sizes[0], max_bytes=sizes[-1], factor=factor)
    )


def gpu_names(plan: Plan, topo_facts: dict[str, Any], gpu_model: str | None) -> list[str]:
    names = list(topo_facts.get("gpus") or [])
    for s in ("bandwidth", "crossover"):
        for c in plan.feeds.get(s, []):
            names = names or list(c.facts.get("gpus") or [])
    return names or ([gpu_model] if gpu_model else [])


def produce(plan: Plan, gpu_model: str | None) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """The box's process count, {stage: producer} for the runner, and the facts the run starts with."""
    out: dict[str, Any] = {}
    topo_rows, topo_published = (
        topology_rows(plan.feeds["topology"]) if "topology" in plan.feeds else ([], {})
    )
    box = dict(topo_published.get("topology") or {})
    world = world_of(plan, box)
    names = gpu_names(plan, box, gpu_model)
    if gpu_model:  # the user's word beats what the captures leave unsaid
        names = [gpu_model] * max(1, len(names) or world)
    box.update(gpus=names, gpu_model=common_model(names) or (names[0] if names else None))
    box.setdefault("gpu_count", world)
    if "health" in plan.feeds:
        out["health"] = runner.fed([], health_facts(plan.feeds["health"], world))
    if "topology" in plan.feeds:
        out["topology"] = runner.fed(topo_rows, {**topo_published, "topology": box})
    if "bandwidth" in plan.feeds:
        rows, published = bandwidth.with_fit(nccl_rows(plan.feeds["bandwidth"], "bandwidth"), world)
        out["bandwidth"] = runner.fed(rows, published)
    if "crossover" in plan.feeds:
        rows = nccl_rows(plan.feeds["crossover"], "crossover")
        out["crossover"] = runner.fed(rows + crossover.analysis_rows(rows, world))
    if "profile" in plan.feeds:
        caps = plan.feeds["profile"]
        timelines = [t for c in caps for t in c.data]
        tool = "nsys" if all(c.kind == traces.KIND for c in caps) else "torch.profiler"
        rows = profile_stage.analysis_rows(timelines, tool, world)
        facts = profile_stage.trace_facts(
            tool,
            [c.path for c in caps],
            False,
            timelines,
            profile_stage.profiled_steps(get_profile(PROFILE)) - 1,
        )
        out["profile"] = runner.fed(rows, facts)
    return world, out, {"topology": box}


def keep_raw(run: RunDir, plan: Plan) -> list[dict[str, Any]]:
    """Each input copied untouched into raw/<stage>/ (a second file of the same name gets a number)."""
    kept, taken = [], Counter()
    for stage, caps in plan.feeds.items():
        for path in dict.fromkeys(c.path for c in caps):
            name = path.name
            taken[(stage, name)] += 1
            if taken[(stage, name)] > 1:
                name = f"{taken[(stage, name)]}-{name}"
            target = run.raw_dir(stage) / name
            shutil.copyfile(path, target)
            kept.append(
                {
                    "path": str(path.resolve()),
                    "kind": next(c.kind for c in caps if c.path == path),
                    "stage": stage,
                    "kept_as": str(target.relative_to(run.path)),
                }
            )
    return kept


def sources(plan: Plan) -> list[str]:
    """What the captures measured, as the judges name it (a source not listed is skipped, not failed)."""
    out = set()
    for c in (c for caps in plan.feeds.values() for c in caps):
        out.add(SMI_SOURCES.get(c.kind, c.kind))
    return sorted(out)


def build(
    plan: Plan, out_base: Path, files: list[Path], gpu_model: str | None, stream=None
) -> runner.RunOutcome:
    world, producers, start_facts = produce(plan, gpu_model)
    profile = ingest_profile(plan, world)
    selected = [s for s in stages.ORDER if s in plan.feeds]
    run_id = f"{runner.utc_now():%Y%m%dT%H%MZ}-ingest-{PROFILE}"
    path = runner.unique_run_path(Path(out_base), run_id)
    manifest = runner.initial_manifest(profile, path.name, selected)
    manifest["host"]["hostname"] = box_host(plan) or "unknown (ingested captures)"
    manifest["host"]["ingested_on"] = socket.gethostname()
    # Marked ingested from the first write: an ingest cut short is resumed from its captures, never run here.
    manifest["ingested"] = {
        "files": [],
        "unused": [{"path": shown(u.path), "why": u.why} for u in plan.unused],
        "named": [str(f) for f in files],
        "planned": list(BOX_STAGES),
        "gpu_model": gpu_model,
    }
    run = RunDir.create(path, manifest)
    run.manifest["ingested"]["files"] = keep_raw(run, plan)
    run.facts().update(start_facts)
    run.facts()["ingest"] = {"sources": sources(plan)}
    run.save_manifest()
    return runner.execute(run, profile, stream=stream, produce=producers)


def box_host(plan: Plan) -> str | None:
    """The host nccl-tests names in its rank lines, where it does."""
    return next(
        (
            c.facts["host"]
            for s in ("bandwidth", "crossover")
            for c in plan.feeds.get(s, [])
            if c.facts.get("host")
        ),
        None,
    )
