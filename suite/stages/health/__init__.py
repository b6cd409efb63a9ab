"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage health — "is this the box I paid for?", answered before anything else runs (≤ 2 minutes on 8 GPUs).

    python -m suite run --stages health --profile nccl-gpu    # on the rented box
    python -m suite run --stages health --profile gloo-cpu    # the rehearsal: outlier rule on CPU ranks,
                                                              # kernel log

GPU face: `nvidia-smi -q` (PCIe link, ECC, remapped rows, clock brakes, power limit, modes, fabric, other
processes; taken once idle and once under GEMM load), `nvidia-smi nvlink -s`/`-e`, the kernel log (`dmesg`,
else `journalctl -k`), IB/RoCE ports (`ibstat`, else `ibv_devinfo`, else /sys/class/infiniband), `dcgmi diag
-r 1` when DCGM is installed — every output kept untouched under raw/health/ — and one torchrun launch
measuring per GPU a bf16 GEMM and pinned host↔device copies (suite/workloads/health_run.py). The rules are in
suite/stages/health/rules.py. Publishes facts["health"]: GPUs seen, usable GPUs (None on CPU), and the parsed
findings. Both faces: the kernel-log reader, the network ports, the measured outlier rule.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from suite.config import ConfigSection, Profile
from suite.context import StageContext
from suite.facts import Facts, gpu, ingested
from suite.facts import profile as profile_of
from suite.hardware.gpus import gpu_for
from suite.hardware.hostprobe import run_tool, torch_facts
from suite.launch.torchrun import LaunchError
from suite.parsers import ParseError, dcgm, ibstat, nvlink, smi_health, topo, xid
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages.health import host_log, nvlink_rules, rules
from suite.verdicts import judges_performance, not_captured

NAME = "health"
GPU_SKIP = (
    "profile {name} runs on CPU: GPU health is checked on nccl-gpu; the parsers and rules are proven on real "
    "captures in tests/unit/test_health_parsers.py"
)
SMI_Q, KERNEL_LOG, NVLINK, DCGM = ("nvidia-smi -q",), (xid.KIND,), (nvlink.KIND,), (dcgm.KIND,)
NETWORK = (ibstat.KIND, ibstat.IBV_KIND)
"""The tools each check reads, as `suite ingest` names its sources (a source not captured skips the check)."""
GPU_CHECKS = (
    "pcie_link",
    "ecc",
    "remapped_rows",
    "clock_brakes",
    "power_limit",
    "modes",
    "persistence",
    "temperature",
    "fabric",
    "processes",
    "driver",
    "nvlink",
    "dcgm",
)


@dataclass(frozen=True, kw_only=True)
class HealthConfig:
    gemm_n: int = 8192
    """Side of the square bf16 GEMM (8192: 1.1 TFLOP a call, ~2 ms on an H100)."""
    gemm_iters: int = 50
    copy_mib: int = 256
    """Pinned buffer copied host→device and back; large enough to reach the link's rate."""
    copy_iters: int = 4
    dcgm: bool = True
    """Run `dcgmi diag -r 1` (about a minute) when dcgmi is installed."""
    slow_rank: int = -1
    """A rank made slow on purpose (its work ×4 for the same count): the drill that proves the outlier
    rule."""


CONFIG = ConfigSection(
    "health",
    HealthConfig,
    {
        "gloo-cpu": HealthConfig(gemm_n=256, gemm_iters=10, copy_mib=16, copy_iters=2, dcgm=False),
        "nccl-gpu": HealthConfig(),
    },
)


def estimate(p) -> tuple[float, str]:
    """`make plan`'s seconds (p: suite.plan.hours.PlanInputs): tools, one launch, DCGM's short diagnostic."""
    dcgm_s = 60.0 if p.profile.section(CONFIG).dcgm else 0.0
    return 15.0 + p.assume.torchrun_launch_s + dcgm_s, (
        "nvidia-smi -q twice, nvlink, kernel log, IB ports; one launch: a bf16 GEMM and pinned copies per GPU"
        + ("; dcgmi diag -r 1 (~1 min) when installed" if dcgm_s else "")
    )


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    # the floors depend on the GPU model and each GPU's link, both read by run(): judge() applies them
    return []


# ---------------------------------------------------------------- run


def _parsed(run, parse: Callable[[str], dict], label: str) -> tuple[dict | None, str]:
    """A tool's parse, or None and why not (missing, failed, unreadable output)."""
    if not run.ok:
        kept = f"; what it printed is kept in raw/health/{run.name}.txt" if run.status == "timeout" else ""
        return None, f"{label}: {run.detail}{kept}"
    try:
        parsed = parse(run.stdout)
    except ParseError as e:
        return None, f"{label}: output unreadable ({e}); kept in raw/health/{run.name}.txt"
    if isinstance(parsed, dict) and parsed.get("complete") is False:  # judged as far as it is whole, and said
        return parsed, f"{label}: partial output ({parsed['reason']}); kept in raw/health/{run.name}.txt"
    return parsed, ""


def read_kernel_log(raw: Path) -> tuple[dict | None, str]:
    """`dmesg`, else `sudo -n dmesg` (where the login may, without a password), else `journalctl -k -b`: the
    first readable one, parsed; None and every reason when none is, or when it is a sandbox's own. In a
    container, the host's log the job read before it started (host_log.py)."""
    handed = host_log.handed_log()
    if handed is not None:  # read on the host by the job's set-up: this container cannot
        return host_log.read_handed(handed, raw, xid.parse)
    reasons = []
    for name, argv in (
        ("dmesg", ["dmesg"]),
        ("sudo-dmesg", ["sudo", "-n", "dmesg"]),
        ("journalctl-k", ["journalctl", "-k", "-b", "--no-pager", "-q"]),
    ):
        if argv[0] == "sudo" and not shutil.which("sudo"):
            continue
        found = run_tool(name, argv, raw, timeout_s=30)
        if found.ok and found.stdout.strip():
            if host_log.is_sandbox_log(found.stdout):
                return None, host_log.SANDBOX_WHY
            return _parsed(found, xid.parse, name)
        reasons.append(found.detail or f"{name}: empty output")
    return None, (
        "kernel log not readable (" + "; ".join(reasons) + "): XIDs unchecked; run as root or add the "
        "user to group adm/systemd-journal"
    )


def read_network(raw: Path) -> tuple[dict | None, str]:
    """IB/RoCE ports from ibstat, else ibv_devinfo, else sysfs (present on any host with the rdma modules)."""
    for name, argv, parse in (
        ("ibstat", ["ibstat"], ibstat.parse_ibstat),
        ("ibv_devinfo", ["ibv_devinfo"], ibstat.parse_ibv_devinfo),
    ):
        if shutil.which(argv[0]):
            found, why = _parsed(run_tool(name, argv, raw), parse, name)
            if found is not None:
                return found, ""
    ports = []
    for port_dir in sorted(Path("/sys/class/infiniband").glob("*/ports/*")):
        read = {
            f: (port_dir / f).read_text() if (port_dir / f).exists() else ""
            for f in ("state", "phys_state", "rate", "link_layer")
        }
        ports.append(ibstat.port_from_sysfs(port_dir.parent.parent.name, int(port_dir.name), **read))
    if ports:
        return {"tool": "sysfs", "ca_count": len({p["ca"] for p in ports}), "ports": ports, "errors": []}, ""
    return None, ""


def _gpu_tools(ctx: StageContext, cfg: HealthConfig) -> dict[str, Any]:
    raw = ctx.raw_dir
    ctx.say("nvidia-smi -q")
    smi, smi_why = _parsed(
        run_tool("nvidia-smi-q", ["nvidia-smi", "-q"], raw),
        lambda text: smi_health.parse(text, partial_ok=True),
        "nvidia-smi -q",
    )
    ctx.say("nvidia-smi nvlink -s / -e")
    links, links_why = _parsed(
        run_tool("nvidia-smi-nvlink-s", ["nvidia-smi", "nvlink", "-s"], raw),
        nvlink.parse,
        "nvidia-smi nvlink -s",
    )
    errors, _ = _parsed(
        run_tool("nvidia-smi-nvlink-e", ["nvidia-smi", "nvlink", "-e"], raw),
        nvlink.parse,
        "nvidia-smi nvlink -e",
    )
    links = merge_nvlink(links, errors)
    # which NVLinks must be up depends on the bridges topo -m shows (topology reads it again, after this
    # stage)
    matrix = run_tool("nvidia-smi-topo-m", ["nvidia-smi", "topo", "-m"], raw)
    try:
        topo_links = topo.parse(matrix.stdout).links if matrix.ok else None
    except ParseError:
        topo_links = None
    fabric_manager = ""
    if shutil.which("systemctl"):
        fabric_manager = run_tool(
            "fabricmanager", ["systemctl", "is-active", "nvidia-fabricmanager"], raw
        ).stdout
    dcgm_found, dcgm_why = (
        None,
        "dcgmi not installed: DCGM's diagnostic skipped (install datacenter-gpu-manager)",
    )
    if not cfg.dcgm:
        dcgm_why = "health.dcgm = false in the profile"
    elif shutil.which("dcgmi"):
        ctx.say("dcgmi diag -r 1")
        dcgm_found, dcgm_why = _parsed(
            run_tool("dcgmi-diag-r1", ["dcgmi", "diag", "-r", "1"], raw, timeout_s=180),
            dcgm.parse,
            "dcgmi diag -r 1",
        )
    return {
        "smi": smi,
        "smi_why": smi_why,
        "nvlink": links,
        "nvlink_why": links_why,
        "topo_links": topo_links,
        "dcgm": dcgm_found,
        "dcgm_why": dcgm_why,
        "fabric_manager": fabric_manager.strip(),
    }


def merge_nvlink(links: dict | None, errors: dict | None) -> dict | None:
    """One view: `-s` speeds and `-e` counters per GPU (either alone where the other is missing)."""
    if links and errors:
        by_gpu = {g["gpu"]: g for g in errors["gpus"]}
        for g in links["gpus"]:
            g["counters"] = by_gpu.get(g["gpu"], {}).get("counters", {})
    return links or errors


def published(found: dict[str, Any], *, on_gpu: bool, nproc: int, gate: bool = True) -> dict[str, Any]:
    """The tools' parsed outputs → the facts the stage publishes (what judge() reads), live or ingested:
    facts["health"] with the usable GPUs, and on GPUs (gate) the runner's `usable_gpus` skip rule."""
    usable = rules.usable_gpus(found.get("smi"), found.get("kernel_log"))
    seen = len(found["smi"]["gpus"]) if found.get("smi") else 0
    # the skip rule needs every GPU read: a -q that timed out, did not parse or was cut says nothing of the
    # GPUs it does not hold (health.nvidia_smi fails naming the file); the later stages count the GPUs
    # themselves
    whole = bool(found.get("smi")) and found["smi"].get("complete", True)
    found = dict(found)
    if found.get("kernel_log"):  # the manifest keeps the counts and the first events, not 600 repeats
        found["kernel_log"] = {**found["kernel_log"], "xid_events": found["kernel_log"]["xid_events"][:50]}
    out: dict[str, Any] = {
        "health": {
            "gpus_seen": seen,
            "usable_gpus": len(usable) if on_gpu else None,
            "usable": usable,
            **found,
        }
    }
    # the runner's skip rule: GPU stages after this one need the GPUs it found fit
    if on_gpu and gate and whole:
        out["usable_gpus"] = {
            "count": len(usable),
            "need": nproc,
            "by": NAME,
            "why": f"nvidia-smi shows {seen}, {seen - len(usable)} of them unfit (see the health verdicts)",
        }
    return out


def _measure(profile: Profile, ctx: StageContext, args: list[str], found: dict[str, Any]) -> list[Row]:
    """The one launch. Unlike other stages, a failed launch here becomes a `health.measured` fail (command,
    exit code and log tail kept) instead of the stage's `run` failure: a box whose GPU cannot run a kernel is
    the box this stage exists for, and its other findings (the XID, the remap, the fabric) say why; they must
    survive."""
    nproc = profile.nproc
    if found.get("smi") is not None:
        nproc = min(nproc, len(found["smi"]["gpus"]))
    if nproc < 1:
        return [
            Row(
                stage=NAME,
                case="launch",
                metric="launch_failed",
                value=float("nan"),
                unit="",
                text="not launched: nvidia-smi -q lists no GPU",
            )
        ]
    ctx.say("per-GPU GEMM and host↔device copies")
    try:
        # PCI bus order: rank r is then nvidia-smi's GPU r, so a slow rank names the GPU -q describes
        return ctx.torchrun(
            "suite.workloads.health_run",
            args,
            tag="measure",
            nproc=nproc,
            env={**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        ).rows()
    except LaunchError as e:
        return [
            Row(
                stage=NAME,
                case="launch",
                metric="launch_failed",
                unit="",
                value=float("nan") if e.exit_code is None else e.exit_code,
                text=f"{e}; last log lines: {' | '.join(e.log_tail.strip().splitlines()[-3:])[-400:]}",
            )
        ]


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    cfg: HealthConfig = profile.section(CONFIG)
    found: dict[str, Any] = {}
    if not profile.is_rehearsal:
        found.update(_gpu_tools(ctx, cfg))
    ctx.say("kernel log (dmesg / journalctl -k)")
    found["kernel_log"], found["kernel_log_why"] = read_kernel_log(ctx.raw_dir)
    ctx.say("InfiniBand / RoCE ports")
    found["network"], found["network_why"] = read_network(ctx.raw_dir)
    under_load = (ctx.raw_dir / "nvidia-smi-q-under-load.txt").resolve()  # the workers' cwd may differ
    args = [
        "--gemm-n",
        str(cfg.gemm_n),
        "--gemm-iters",
        str(cfg.gemm_iters),
        "--copy-bytes",
        str(cfg.copy_mib << 20),
        "--copy-iters",
        str(cfg.copy_iters),
        "--slow-rank",
        str(cfg.slow_rank),
    ]
    if not profile.is_rehearsal and shutil.which("nvidia-smi"):
        args += ["--smi-under-load", str(under_load)]
    rows = _measure(profile, ctx, args, found)
    if under_load.exists():
        try:
            found["smi_under_load"] = smi_health.parse(
                under_load.read_text(encoding="utf-8", errors="replace")
            )
        except ParseError as e:
            found["smi_under_load_why"] = f"nvidia-smi -q under load unreadable: {e}"
    # after the launch: this process then holds no CUDA context while the GPUs measure
    if not profile.is_rehearsal:
        found["torch_cuda"] = torch_facts(want_cuda=True).get("cuda")
    for key, value in published(found, on_gpu=not profile.is_rehearsal, nproc=profile.nproc).items():
        ctx.publish(key, value)
    return rows


# ---------------------------------------------------------------- judge


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    found = facts.get("health", {})
    prof = profile_of(facts)
    out = [
        _or_not_captured(
            facts,
            "kernel_log",
            KERNEL_LOG,
            lambda: rules.kernel_log_verdict(
                found.get("kernel_log"), found.get("kernel_log_why", "not read")
            ),
        ),
        _or_not_captured(
            facts,
            "network",
            NETWORK,
            lambda: rules.network_verdict(found.get("network"), found.get("network_why", "")),
            one_box=len(prof.nodes or ()) <= 1,
        ),
    ]
    smi = found.get("smi")
    if prof.is_rehearsal:
        out += [
            rules.V.skip(
                check,
                expected="a GPU box",
                observed=f"profile {prof.name}",
                reason=GPU_SKIP.format(name=prof.name),
            )
            for check in GPU_CHECKS
        ]
    elif smi is None and not_captured(facts, SMI_Q[0]):
        out += [
            rules.V.not_captured_skip(check, expected="`nvidia-smi -q`", what="`nvidia-smi -q` output")
            for check in GPU_CHECKS[:10]
        ]
    elif smi is None:  # one fail saying why, the checks it feeds skip pointing at it
        out.append(_unread_smi(facts, found))
        out += [
            rules.V.skip(
                check, expected="`nvidia-smi -q`", observed="not read", reason="see health.nvidia_smi"
            )
            for check in GPU_CHECKS[:10]
        ]
    else:
        if not smi.get("complete", True):  # judged as far as it is whole; the cut is said, naming the file
            out.append(_unread_smi(facts, found))
        loaded = found.get("smi_under_load")
        base = rules.smi_verdicts(smi, fabric_manager=found.get("fabric_manager", ""))
        if loaded:  # the link generation and the clock brakes as the GEMMs saw them
            live = {v.id: v for v in rules.smi_verdicts(loaded, under_load=True)}
            base = [live[v.id] if v.id in ("health.pcie_link", "health.clock_brakes") else v for v in base]
        out += base
    if not prof.is_rehearsal:
        out += [
            rules.driver_verdict((smi or {}).get("driver_version"), found.get("torch_cuda"))
            if found.get("torch_cuda") or not ingested(facts)
            else rules.V.live_only_skip(
                "driver", "a driver that runs the CUDA torch was built for", "CUDA line of torch"
            ),
            _or_not_captured(
                facts,
                "nvlink",
                NVLINK,
                lambda: nvlink_rules.nvlink_verdict(
                    found.get("nvlink"),
                    found.get("nvlink_why", ""),
                    links=_topo_links(facts, found),
                    model=next((g.get("product_name") for g in (smi or {}).get("gpus", [])), None)
                    or (facts.get("topology") or {}).get("gpu_model"),
                ),
                no_such=_without_nvlink(facts, smi),
            ),
            _or_not_captured(
                facts, "dcgm", DCGM, lambda: rules.dcgm_verdict(found.get("dcgm"), found.get("dcgm_why", ""))
            ),
        ]
    out = [_partial_pass(v, found.get("partial") or {}) for v in out]
    if ingested(facts) and not rows:  # captures hold tool outputs, never this stage's own measurement
        out.append(
            rules.V.live_only_skip(
                "measured",
                expected="the per-GPU GEMM and copies on every GPU",
                what="per-GPU GEMM/copy timing",
            )
        )
    out += [
        rules.V.fail(
            "measured",
            expected="the per-GPU GEMM and copies run on every GPU",
            observed=r.text or "",
            reason=f"the measurement did not run: {r.text}; the checks above say why (a GPU fallen off "
            f"the bus, a remap pending, a driver not loaded): {rules.RESET}, or {rules.NEW_NODE}",
        )
        for r in rows
        if r.metric == "launch_failed"
    ]
    values: dict[str, dict[int, float]] = {}
    for r in rows:
        if r.metric in ("gemm_tflops", "h2d_GBps", "d2h_GBps") and r.rank is not None:
            values.setdefault(r.metric, {})[int(r.rank)] = r.value
    model = gpu(facts) or gpu_for_rows(rows)
    out += rules.measured_verdicts(
        values,
        on_gpu=judges_performance(facts),
        gemm_peak_tflops=model.bf16_dense_tflops if model else None,
        link_GBps=rules.link_rate_GBps(smi["gpus"]) if smi else {},
        peak_source=model.peak_source if model else "",
    )
    return out


def _without_nvlink(facts: dict, smi: dict | None) -> str:
    """Why an NVLink check has nothing to judge: the GPU model has no NVLink (suite/hardware/gpus.py); ''
    otherwise."""
    name = next((g.get("product_name") for g in (smi or {}).get("gpus", [])), None) or (
        facts.get("topology") or {}
    ).get("gpu_model")
    model = gpu_for(name) if name else None
    return f"{model.model} has no NVLink" if model is not None and model.nvlink is None else ""


def _topo_links(facts: dict, found: dict) -> dict | None:
    """topo -m's GPU pairs: health's own read on a live run (it runs before topology), the ingested matrix
    else."""
    links = found.get("topo_links")
    return links if links is not None else (facts.get("topology") or {}).get("links")


def _partial_pass(v: Verdict, partial: dict[str, str]) -> Verdict:
    """A pass read from a partial capture (an excerpt, a table cut before its end) is a skip saying so: what
    the capture lacks is undecided. A fail or warn it holds stands: what was seen was seen."""
    check = v.id.removeprefix(f"{NAME}.")
    if v.status != "pass" or check not in partial:
        return v
    return rules.V.skip(
        check,
        expected=v.expected,
        observed=f"{v.observed} (in a partial capture)",
        reason=f"partial capture {partial[check]}: what it holds passed; capture the whole output",
    )


def _unread_smi(facts: dict, found: dict) -> Verdict:
    """health.nvidia_smi for a -q that could not be read whole: live, a fail naming the file (a GPU that hangs
    nvidia-smi is a box problem); ingested, a skip (the capture was cut, not the box): its GPUs are not
    decided."""
    why = found.get("smi_why") or "nvidia-smi -q not run"
    smi = found.get("smi")
    held = f"read {len(smi['gpus'])} whole GPU block(s)" if smi else "not read"
    if ingested(facts):
        return rules.V.skip(
            "nvidia_smi",
            expected="`nvidia-smi -q` whole",
            observed=f"partial capture: {held}",
            reason=f"{why}: ingest the whole `nvidia-smi -q` output (the GPUs it lacks are undecided)",
        )
    return rules.V.fail(
        "nvidia_smi",
        expected="`nvidia-smi -q` readable",
        observed=held,
        reason=f"{why}: the driver is not loaded, a GPU hangs nvidia-smi, or the container lacks "
        "`--gpus all`; fix it or ask the provider for another node",
    )


def _or_not_captured(
    facts: dict,
    check: str,
    sources: tuple[str, ...],
    verdict: Callable[[], Verdict],
    one_box: bool = False,
    no_such: str = "",
) -> Verdict:
    """An ingested run whose captures hold none of the check's tools skips it saying so; otherwise the rule.
    one_box: the check has nothing to judge on a single node (InfiniBand ports): not captured, it does not
    apply."""
    if all(not_captured(facts, source) for source in sources):
        if one_box or no_such:
            return rules.V.not_applicable(
                check,
                expected=verdict().expected,
                observed="not captured",
                why=no_such or "a single-node run needs no InfiniBand/RoCE port",
            )
        return rules.V.not_captured_skip(
            check, expected=verdict().expected, what=" or ".join(sources) + " output"
        )
    return verdict()


def gpu_for_rows(rows: list[Row]):
    """The GPU model from the workers' device names (health runs before topology names it)."""
    names = {r.text for r in rows if r.text and r.text != "cpu"}
    return gpu_for(names.pop()) if len(names) == 1 else None


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """The per-GPU (per-rank) GEMM speed: its median and the slowest one against its peers' mark; copies
    beside."""
    import re

    from suite import headlines as hl

    gemm = {r.rank: r.value for r in hl.matching(rows, "gemm", "gemm_tflops") if r.rank is not None}
    if len(gemm) < 2:
        return None
    worst = min(v / hl.median(u for k, u in gemm.items() if k != rank) for rank, v in gemm.items())
    mark = re.search(r"(\d+)%", getattr(hl.verdict(verdicts, "health.measured.gemm_tflops"), "expected", ""))
    expected = f" · expected ≥ {mark[1]}%" if mark else ""
    dtypes = sorted({r.dtype for r in hl.matching(rows, "gemm", "gemm_tflops") if r.dtype})
    text = (
        f"{'/'.join(dtypes) + ' ' if dtypes else ''}GEMM {hl.number(hl.median(gemm.values()))} TFLOP/s "
        f"median of "
        f"{len(gemm)}, slowest at {worst:.0%} of its peers'{expected}"
    )
    copies = [
        f"{name} {hl.number(hl.median(r.value for r in hl.matching(rows, 'copy', metric)))}"
        for metric, name in (("h2d_GBps", "h2d"), ("d2h_GBps", "d2h"))
        if hl.matching(rows, "copy", metric)
    ]
    return text + (f" · copies {' / '.join(copies)} GB/s" if copies else "")


STAGE = Stage(
    row=15,
    after=(),
    before=("topology",),  # runs first: a broken box is named before anything is measured on it
    profiles=("gloo-cpu", "nccl-gpu", "nccl-1gpu"),  # one rented card is worth checking too
    title="`nvidia-smi -q` health, kernel-log XIDs, NVLink/fabric, IB ports, per-GPU GEMM and copy speed",
    measures="per-GPU health from nvidia-smi -q, the kernel log, NVLink, IB ports, DCGM; per-GPU GEMM and "
    "copy speed",
    wrong="a downtrained link, pending remaps or uncorrectable ECC, XIDs, a power/thermal brake under load, "
    "fabric "
    "manager down, a port down or slow, one GPU < 90 % of its peers",
    rehearsal="the GEMM/copy outlier rule on CPU ranks, the kernel-log reader; every parser on real captures "
    "(tests)",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
