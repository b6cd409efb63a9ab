"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 1 — topology: how the GPUs are linked, the CPU/NUMA layout they sit on, which versions run.

    python -m suite run --stages topology --profile nccl-gpu    # on the rented box
    python -m suite run --stages topology --profile gloo-cpu    # the rehearsal: CPU/NUMA facts only

GPU face: `nvidia-smi topo -m`, `-q`, `-L`, `topo -p2p r` and `-p2p w` (kept untouched in raw/topology/;
suite/stages/topology/smi.py), one row per GPU pair (metric `link`, text NV18/SYS…, value = bonded NVLink
count) and per GPU–NIC pair, GPU names, PCIe link and fabric state per GPU, which pairs lack P2P (facts
topology.p2p, as `suite ingest` reads a captured `-p2p`), driver/CUDA/NCCL/torch versions. Both faces: lscpu,
NUMA nodes (sysfs, `numactl -H` when present), CPU model and counts. The verdict rules live in
suite/stages/topology/rules.py (`python -m suite parse topo` adds them to its parse).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from suite import headlines as hl
from suite.cluster import node_nics as _node_nics
from suite.config import Profile
from suite.context import StageContext
from suite.facts import Facts, ingested, profile_or_none
from suite.hardware.hostprobe import (
    cpu_model_procfs,
    nccl_tests_versions,
    numa_nodes_sysfs,
    run_tool,
    torch_facts,
    usable_cpus,
)
from suite.parsers.cpu import cpulist_count, parse_lscpu, parse_numactl_hardware
from suite.results import Expectation, Row, Verdict, atomic_write_text, dumps
from suite.stage_contract import Stage
from suite.stages.topology.rules import judge_fabric, judge_links, judge_numa, judge_p2p, numa_groups
from suite.stages.topology.smi import OPTIONAL_TOOLS, capture_gpu
from suite.values import is_missing
from suite.verdicts import judges_performance, not_captured, verdicts_for

NAME = "topology"

CONFIG = None


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs)."""
    nics = _node_nics.estimate_s(p)  # across nodes: one launch reading every node's NICs
    return p.assume.topology_s + nics, "nvidia-smi -q, topo -m, NUMA facts: a fixed cost" + (
        "; every node's NICs: a probe on each" if nics else ""
    )


GPU_CHECKS = ("tools", "links", "numa", "gpu_count", "torch_cuda_devices", "fabric")
CPU_SKIP_REASON = (
    "profile {name} runs on CPU: GPU topology is checked on nccl-gpu; the parser is proven "
    "on captured real outputs in tests/unit/test_topo_parser.py"
)


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    out = [
        Expectation(
            stage=NAME,
            case="cpu",
            metric="usable_cpus",
            value=profile.nproc * profile.omp_threads,
            unit="count",
            basis=f"nproc × OMP_NUM_THREADS = {profile.nproc} × {profile.omp_threads}: "
            f"fewer CPUs oversubscribes them",
        )
    ]
    if not profile.is_rehearsal:
        basis = f"one GPU per process: profile {profile.name} launches {profile.nproc}"
        out += [
            Expectation(
                stage=NAME,
                case="gpus",
                metric="gpu_count",
                value=profile.nproc,
                unit="count",
                basis=basis,
                source="nvidia-smi",
            ),
            Expectation(
                stage=NAME,
                case="gpus",
                metric="torch_cuda_devices",
                value=profile.nproc,
                unit="count",
                basis=basis,
                source="torch",
            ),
        ]
    return out


# ---------------------------------------------------------------- run


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    rows: list[Row] = []
    tools: dict[str, Any] = {}
    ctx.say("CPU and NUMA facts")
    cpu = _cpu_facts(ctx, rows, tools)
    if len(profile.nodes) > 1:  # a multi-node run: every node's NICs, compared in judge
        nic_rows = _node_nics.measure(ctx)
        rows += nic_rows
        ctx.publish("node_line_gbps", _node_nics.line_rates(nic_rows))  # what bandwidth holds node pairs to
        # and the inter-node sweep (NICs × line rate)
        ctx.publish("node_nics", _node_nics.nic_totals(nic_rows))
        ctx.publish("node_rdma", _node_nics.rdma_ports(nic_rows))  # sockets across them fails (bandwidth)
    gpu: dict[str, Any] = {}
    if not profile.is_rehearsal:
        ctx.say("nvidia-smi topo -m, -q, -L, -p2p r/w")
        gpu = capture_gpu(ctx, rows, tools)
    ctx.say("versions (torch, CUDA, NCCL)")
    versions = torch_facts(want_cuda=not profile.is_rehearsal)
    versions.update({k: v for k, v in gpu.get("smi_versions", {}).items() if v})
    # the NCCL nccl-tests links, beside torch's own (reports compare them)
    versions.update(nccl_tests_versions())
    rows += _version_rows(versions)
    if not profile.is_rehearsal:
        rows.append(
            Row(
                stage=NAME,
                case="gpus",
                metric="torch_cuda_devices",
                value=versions["cuda_devices"],
                unit="count",
                source="torch",
                text=versions.get("cuda_error") or ", ".join(versions["cuda_names"]) or None,
            )
        )
    for name, record in tools.items():
        rows.append(
            Row(
                stage=NAME,
                case=name,
                metric="tool_status",
                unit="",
                value=float("nan") if record["exit_code"] is None else record["exit_code"],
                text=record["status"] + (f": {record['detail']}" if record["detail"] else ""),
            )
        )
    atomic_write_text(ctx.raw_dir / "commands.json", dumps(tools))
    if not profile.is_rehearsal:  # the runner skips the GPU stages after this one when too few are usable
        ctx.publish(
            "usable_gpus",
            usable_gpus(
                gpu.get("gpu_count", 0), versions["cuda_devices"], profile.nproc, versions.get("cuda_error")
            ),
        )
    ctx.publish("topology", {**cpu, **{k: v for k, v in gpu.items() if k != "smi_versions"}})
    ctx.publish(
        "versions",
        {
            k: versions.get(k)
            for k in (
                "driver",
                "cuda",
                "cuda_driver",
                "nccl",
                "torch",
                "python",
                "nccl_tests",
                "nccl_tests_nccl",
            )
        },
    )
    return rows


def usable_gpus(
    smi_count: int, torch_count: int, need: int, torch_error: str | None = None
) -> dict[str, Any]:
    """The GPUs both nvidia-smi and torch see (every GPU stage needs both), for the runner's skip rule."""
    count = min(smi_count or 0, torch_count or 0)
    why = f"nvidia-smi shows {smi_count or 0}, torch sees {torch_count or 0}"
    return {
        "count": count,
        "need": need,
        "by": NAME,
        "why": why + (f": {torch_error}" if torch_error else ""),
    }


def _cpu_facts(ctx: StageContext, rows: list[Row], tools: dict) -> dict[str, Any]:
    lscpu = run_tool("lscpu", ["lscpu"], ctx.raw_dir)
    tools["lscpu"] = lscpu.record()
    info = parse_lscpu(lscpu.stdout) if lscpu.ok else {}
    nodes = numa_nodes_sysfs()
    if nodes:
        atomic_write_text(ctx.raw_dir / "numa-sysfs.txt", "".join(f"{n} {c}\n" for n, c in nodes.items()))
    if shutil.which("numactl"):
        numactl = run_tool("numactl-H", ["numactl", "-H"], ctx.raw_dir)
        tools["numactl-H"] = numactl.record()
        if not nodes and numactl.ok:
            nodes = {n: d["cpus"] for n, d in parse_numactl_hardware(numactl.stdout).items() if "cpus" in d}
    nodes = nodes or info.get("numa_cpus") or {}
    model = info.get("model") or cpu_model_procfs()
    logical, logical_source = (
        (info["cpus"], "lscpu") if info.get("cpus") else (os.cpu_count(), "os.cpu_count")
    )
    usable = usable_cpus()
    add = rows.append
    add(Row(stage=NAME, case="cpu", metric="cpu_model", value=float("nan"), unit="", text=model))
    add(
        Row(stage=NAME, case="cpu", metric="logical_cpus", value=logical, unit="count", source=logical_source)
    )
    add(
        Row(
            stage=NAME,
            case="cpu",
            metric="usable_cpus",
            value=usable,
            unit="count",
            source="sched_getaffinity",
        )
    )
    for key in ("sockets", "cores_per_socket", "threads_per_core"):
        if info.get(key) is not None:
            add(Row(stage=NAME, case="cpu", metric=key, value=info[key], unit="count", source="lscpu"))
    add(Row(stage=NAME, case="cpu", metric="numa_nodes", value=len(nodes), unit="count"))
    for node, cpus in nodes.items():
        count = cpulist_count(cpus)
        add(
            Row(
                stage=NAME,
                case=node,
                metric="numa_cpus",
                value=float("nan") if count is None else count,
                unit="count",
                text=cpus,
            )
        )
    return {"cpu_model": model, "logical_cpus": logical, "usable_cpus": usable, "numa_nodes": nodes}


def _version_rows(versions: dict[str, Any]) -> list[Row]:
    out = []
    for key in ("driver", "cuda_driver", "cuda", "nccl", "torch", "python"):
        error = versions.get("nccl_error") if key == "nccl" else None
        text = versions.get(key) or (f"unavailable ({error})" if error else None)
        if text:
            out.append(
                Row(stage=NAME, case=key, metric="version", value=float("nan"), unit="", text=str(text))
            )
    return out


# ---------------------------------------------------------------- judge

VERDICTS = verdicts_for(NAME)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    prof = profile_or_none(facts)
    on_gpu = prof is not None and prof.device == "cuda"
    out = [_judge_cpu(rows, expectations, facts), _judge_threads(_index(rows), expectations, facts)]
    out += _node_nics.judge(rows, prof.nodes if prof else ())  # a port down is down on CPU too
    if not on_gpu:
        reason = CPU_SKIP_REASON.format(name=prof.name if prof else "gloo-cpu")
        out += [
            VERDICTS.skip(
                check, expected="a GPU box", observed=f"profile {prof.name if prof else '?'}", reason=reason
            )
            for check in GPU_CHECKS
        ]
        return out
    by = _index(rows)
    out.append(_judge_tools(by, facts))
    gpus, links = _links_from_rows(rows)
    names = [
        r.text for r in sorted((r for r in rows if r.metric == "gpu_name"), key=lambda r: int(r.case[3:]))
    ]
    if gpus:
        groups = numa_groups(
            gpus,
            {g: by[(g, "numa_node")].text for g in gpus if (g, "numa_node") in by},
            {g: by[(g, "cpu_affinity")].text for g in gpus if (g, "cpu_affinity") in by},
        )
        out += [judge_links(gpus, links, names), judge_numa(gpus, links, groups)]
    else:
        out += [
            VERDICTS.skip(
                check,
                expected="a topology matrix",
                observed="none",
                reason="no topology matrix was read: see topology.tools",
            )
            for check in ("links", "numa")
        ]
    out.append(
        _judge_count(
            by,
            expectations,
            "gpu_count",
            "nvidia-smi shows",
            "rent the box the profile names, or pass --nproc with the number of GPUs it has",
        )
    )
    # torch ran nowhere: the captured box's tools are judged, not this machine's torch
    if ingested(facts):
        out.append(
            VERDICTS.live_only_skip(
                "torch_cuda_devices", "torch sees the profile's GPUs", "torch device count"
            )
        )
    else:
        out.append(
            _judge_count(
                by,
                expectations,
                "torch_cuda_devices",
                "torch sees",
                "torch in this environment is a CPU build, CUDA_VISIBLE_DEVICES hides GPUs, or the "
                "container lacks `--gpus all`: fix it before any measurement",
            )
        )
    out.append(judge_fabric(rows, facts))
    topo = facts.get("topology") or {}
    return out + judge_p2p(topo.get("p2p"), topo.get("p2p_why", ""))


def _judge_tools(by: dict, facts: dict) -> Verdict:
    tools = {
        case: row
        for (case, metric), row in by.items()  # `-p2p` is topology.p2p's, optional to this check
        if metric == "tool_status" and case.startswith("nvidia-smi") and case not in OPTIONAL_TOOLS
    }
    if ingested(facts):  # the tools ran on the captured box, not here: say which outputs were read
        read = ", ".join(sorted(tools)) or "none"
        if "nvidia-smi-topo-m" in tools and {"nvidia-smi-q", "nvidia-smi-L"} & set(tools):  # names and matrix
            return VERDICTS.not_applicable(
                "tools",
                expected="`nvidia-smi topo -m`, `-q` and `-L` run",
                observed=f"read from captures: {read}",
                why="the tools ran on the captured box",
            )
        return VERDICTS.skip(
            "tools",
            expected="`nvidia-smi topo -m`, `-q` and `-L` run",
            observed=f"read from captures: {read}",
            reason="ingested outputs: ingest `nvidia-smi topo -m` and `-q` (or `-L`) together",
        )
    broken = {case: row.text for case, row in tools.items() if not (row.text or "").startswith("ok")}
    expected = "`nvidia-smi topo -m`, `-q` and `-L` run"
    if tools and not broken:
        return VERDICTS.passed(
            "tools", expected=expected, observed="all ran", reason="raw outputs kept in raw/topology/"
        )
    observed = "; ".join(f"{c}: {t}" for c, t in broken.items()) or "not run"
    return VERDICTS.fail(
        "tools",
        expected=expected,
        observed=observed,
        reason="without nvidia-smi the GPUs cannot be checked: run inside the CUDA image with the "
        "GPUs passed in (`docker run --gpus all`) or install the NVIDIA driver utilities; "
        "whatever the tools printed is in raw/topology/",
    )


def _judge_cpu(rows: list[Row], expectations: list[Expectation], facts: dict) -> Verdict:
    if not_captured(facts, "lscpu"):
        return VERDICTS.live_only_skip("cpu", "CPU count and NUMA layout recorded", "lscpu")
    by = _index(rows)
    logical, nodes = by.get(("cpu", "logical_cpus")), by.get(("cpu", "numa_nodes"))
    model = by.get(("cpu", "cpu_model"))
    ok = logical is not None and not is_missing(logical.value) and nodes is not None and nodes.value >= 1
    observed = (
        f"{model.text if model and model.text else 'unknown CPU'}, "
        f"{_fmt(logical)} logical CPUs, {_fmt(nodes)} NUMA node(s)"
    )
    return VERDICTS.check(
        "cpu",
        ok,
        bad="warn",
        expected="CPU count and NUMA layout recorded",
        observed=observed,
        reason_ok="recorded in raw/topology/ and the manifest's facts",
        reason_bad="lscpu and /sys/devices/system/node were unreadable: NUMA placement cannot be checked; "
        "install util-linux (lscpu) in the image",
    )


def _judge_count(by: dict, expectations: list[Expectation], metric: str, who: str, fix: str) -> Verdict:
    want = next((e for e in expectations if e.metric == metric), None)
    row = by.get(("gpus", metric))
    if want is None or row is None:
        return VERDICTS.skip(
            metric,
            expected="an expectation and a measurement",
            observed="missing",
            reason=f"{metric} was not recorded (see raw/topology/commands.json)",
        )
    have, need = int(row.value), int(want.value)
    observed = f"{who} {have} GPU(s)" + (f" ({row.text})" if row.text else "")
    return VERDICTS.check(
        metric,
        have >= need,
        expected=f"≥ {need} ({want.basis})",
        observed=observed,
        reason_ok="enough GPUs for every stage's process count",
        reason_bad=f"{need} processes need {need} GPUs but {who.split()[0]} reports {have}: {fix}",
    )


def _judge_threads(by: dict, expectations: list[Expectation], facts: dict) -> Verdict:
    want = next((e for e in expectations if e.metric == "usable_cpus"), None)
    row = by.get(("cpu", "usable_cpus"))
    expected = f"≥ {int(want.value)} usable CPUs ({want.basis})" if want else "enough CPUs"
    observed = f"{_fmt(row)} usable CPUs"
    if not_captured(facts, "lscpu"):
        return VERDICTS.live_only_skip("cpu_threads", expected, "lscpu")
    if not judges_performance(facts):
        return VERDICTS.cpu_skip("cpu_threads", expected, observed)
    ok = want is None or row is None or row.value >= want.value
    return VERDICTS.check(
        "cpu_threads",
        ok,
        bad="warn",
        expected=expected,
        observed=observed,
        reason_ok="no CPU oversubscription",
        reason_bad="more worker threads than usable CPUs: data loading and NCCL proxy threads will contend; "
        "lower omp_threads in the profile or give the container more CPUs",
    )


def _links_from_rows(rows: list[Row]) -> tuple[list[str], dict[str, str]]:
    links = {r.case: r.text for r in rows if r.metric == "link" and r.text}
    gpus = {r.case for r in rows if r.metric in ("cpu_affinity", "numa_node")}
    for pair in links:
        gpus.update(pair.split("-"))
    return sorted(gpus, key=lambda g: int(g[3:])), links


def _index(rows: list[Row]) -> dict[tuple[str, str], Row]:
    return {(r.case, r.metric): r for r in rows}


def _fmt(row: Row | None) -> str:
    if row is None or is_missing(row.value):
        return "?"
    return f"{row.value:g}"


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """The GPUs and how they are linked; on a CPU box, the CPU."""
    links, count = hl.verdict(verdicts, "topology.links"), hl.verdict(verdicts, "topology.gpu_count")
    if links is not None and links.status != "skip":
        return f"{count.observed if count else 'GPUs'} · links {links.observed}"
    cpu = hl.verdict(verdicts, "topology.cpu")
    return f"CPU: {cpu.observed}" if cpu is not None and cpu.status != "skip" else None


STAGE = Stage(
    row=1,
    after=(),
    profiles=("gloo-cpu", "nccl-gpu", "nccl-1gpu"),  # one card has a PCIe link, versions and NUMA facts too
    title="`nvidia-smi topo -m`/`-q`/`-L`, versions, NUMA",
    measures="link type of every GPU pair, GPU–NIC paths, CPU/NUMA layout, driver/CUDA/NCCL/torch versions",
    wrong="SYS/PHB/NODE between GPUs where the GPU model ships NVLink (slot or virtualisation problem); "
    "NVLink count differing between pairs of a switched box",
    rehearsal="CPU/NUMA facts and versions; the topology parser is proven on captured real outputs (tests)",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
