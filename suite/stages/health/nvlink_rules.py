"""health.nvlink: which NVLinks must be up, from the board and the topology, not from the link list alone.

An NVLink-capable PCIe card (A100 PCIe, H100 NVL, RTX A6000) lists its links `<inactive>` when no bridge is
fitted, and `nvidia-smi nvlink -s` then says so per link, or only `NVML: Unable to retrieve NVLink information
as all links are inActive`; `dcgmi nvlink --link-status` prints D for them. That is a fault only where the box
should have them:

- an SXM module (its board wires every link) or a part sold only on NVLink boards: every link up;
- a GPU whose pairs `nvidia-smi topo -m` shows as NV# (a bridge is fitted): at least that many links up;
- a GPU with every link down and no topology read to tell: a warning (the renter may have paid for a bridge:
  `topo -m` says whether the pair is bridged — NV#, a fault — or not — SYS/PHB, fine);
- otherwise (an unbridged PCIe card): the inactive links pass with a note saying so.

Active links must run at one speed, and error counters (`-e`) stay zero, wherever links are up.
Not a stage: the underscore keeps it out of discovery.
"""

from __future__ import annotations

from typing import Any, Mapping

from suite.hardware.gpus import gpu_for
from suite.parsers.topo import nvlink_count
from suite.results import Verdict
from suite.stages.topology.rules import expects_full_nvlink
from suite.verdicts import verdicts_for

V = verdicts_for("health")
EXPECTED = "every NVLink the board or the topology calls for up at one speed, error counters zero"
NEW_NODE = "ask the provider for another node"
RESTART = (
    "an NVLink is down or slow: restart the fabric manager (`systemctl restart nvidia-fabricmanager`) and "
    "reset the GPUs; if it stays, " + NEW_NODE
)


def sxm_part(model: str | None) -> bool:
    """An SXM module or a part sold only on NVLink boards: every NVLink it has is wired on its board."""
    gpu = gpu_for(model)
    return expects_full_nvlink(model) or bool(gpu and "SXM" in gpu.model.split()[-1])


def wanted_links(links: Mapping[str, str] | None) -> dict[int, int]:
    """Per GPU index, the NVLinks its NV# pairs in `topo -m` use (NV12 to one peer: 12)."""
    out: dict[int, int] = {}
    for pair, link in (links or {}).items():
        count = nvlink_count(link)
        if not count:
            continue
        for gpu in pair.split("-"):
            if gpu.startswith("GPU") and gpu[3:].isdigit():
                out[int(gpu[3:])] = out.get(int(gpu[3:]), 0) + count
    return out


def nvlink_verdict(
    parsed: dict[str, Any] | None,
    why_not: str = "",
    *,
    links: Mapping[str, str] | None = None,
    model: str | None = None,
) -> Verdict:
    """`parsed`: nvidia-smi nvlink -s/-e or dcgmi nvlink --link-status (suite/parsers/nvlink.py's shape);
    `links`: topo -m's GPU pairs, None when not read; `model`: the GPU's name where the output lacks it."""
    names = [g.get("name") for g in (parsed or {}).get("gpus", []) if g.get("name")]
    model = names[0] if names else model
    switched = sxm_part(model)
    want = wanted_links(links)
    if parsed is not None and parsed.get("all_inactive") and not any(g["links"] for g in parsed["gpus"]):
        return _all_inactive(parsed, switched, want, model, links is not None)
    if parsed is None or not any(g["links"] or g["counters"] for g in parsed["gpus"]):
        if switched or want:
            return V.skip(
                "nvlink",
                expected=EXPECTED,
                observed="no NVLink listed",
                reason=why_not
                or f"{model or 'this board'} should have NVLinks and the output lists none: "
                "capture `nvidia-smi nvlink -s` again",
            )
        return V.not_applicable(
            "nvlink",
            expected=EXPECTED,
            observed="no NVLink listed",
            why=why_not or "no NVLink on these GPUs (nvidia-smi nvlink -s lists none)",
        )
    up = {g["gpu"]: [s for s in g["speeds_GBps"].values() if s is not None] for g in parsed["gpus"]}
    speeds = [s for ss in up.values() for s in ss]
    top = max(speeds) if speeds else 0
    slow = [
        f"GPU {g['gpu']} link {n} at {s:g} GB/s of {top:g}"
        for g in parsed["gpus"]
        for n, s in g["speeds_GBps"].items()
        if s is not None and s < top
    ]
    down = {g["gpu"]: [n for n, s in g["speeds_GBps"].items() if s is None] for g in parsed["gpus"]}
    missing = []
    for g in parsed["gpus"]:
        gpu, off = g["gpu"], down[g["gpu"]]
        if not off:
            continue
        if switched:
            missing += [f"GPU {gpu} link {n} {g['links'][n]}" for n in off]
        elif len(up[gpu]) < want.get(gpu, 0):
            missing.append(
                f"GPU {gpu}: {len(up[gpu])} links up, its NV{want[gpu]} pair(s) in topo -m need "
                f"{want[gpu]} ({len(off)} {g['links'][off[0]]})"
            )
    errors = [
        f"GPU {g['gpu']} link {n} {k} {v}"
        for g in parsed["gpus"]
        for n, c in g["counters"].items()
        for k, v in c.items()
        if v > 0
    ]
    if missing or slow:
        return V.fail(
            "nvlink",
            expected=EXPECTED,
            observed=_shown(missing + slow),
            reason=f"{_shown(missing + slow)}: " + RESTART,
        )
    idle = sum(len(off) for off in down.values())
    note = ""
    if idle:
        note = f"; {idle} link(s) inactive on {sum(1 for off in down.values() if off)} GPU(s): " + (
            "beyond what topo -m's NV# pairs use"
            if want
            else "no bridge fitted (an NVLink-capable PCIe card; no NV# pair in topo -m)"
            if links is not None
            else "no topo -m read to say a bridge is expected: an unbridged PCIe card reads so"
        )
    dark = [g["gpu"] for g in parsed["gpus"] if g["links"] and not up[g["gpu"]]]
    if dark and links is None:
        return _unknown_bridge(f"every NVLink of GPU {', '.join(map(str, dark))} down ({idle} link(s))")
    if errors:
        return V.warn(
            "nvlink",
            expected=EXPECTED,
            observed=_shown(errors),
            reason=f"{_shown(errors)}: NVLink errors counted since the last reset: watch them; if they "
            f"grow, {NEW_NODE}",
        )
    rate = " up (dcgmi gives no rate)" if parsed.get("tool") else f" at {top:g} GB/s"
    observed = f"{len(speeds)} links{rate}{note}" if speeds else f"no link up{note}"
    return V.passed(
        "nvlink",
        expected=EXPECTED,
        observed=observed,
        reason=f"every NVLink the board calls for is up{note}" if speeds else f"no NVLink in use{note}",
    )


def _all_inactive(
    parsed: dict[str, Any], switched: bool, want: dict[int, int], model: str | None, topology_read: bool
) -> Verdict:
    """`NVML: Unable to retrieve NVLink information as all links are inActive`: every link of the GPU(s)
    down."""
    note = parsed["notes"][0] if parsed.get("notes") else "all links inactive"
    if switched or want:
        why = (
            f"{model} ships only on NVLink boards"
            if switched
            else f"topo -m shows NV# pairs ({', '.join(f'GPU {g}: NV{n}' for g, n in sorted(want.items()))})"
        )
        return V.fail(
            "nvlink",
            expected=EXPECTED,
            observed=f"every NVLink down ({note})",
            reason=f"every NVLink is down and {why}: " + RESTART,
        )
    if not topology_read:
        return _unknown_bridge(f"every NVLink down ({note})")
    return V.passed(
        "nvlink",
        expected=EXPECTED,
        observed=f"no link up ({note})",
        reason="no NVLink in use: an NVLink-capable PCIe card without a bridge (no NV# pair in topo -m, "
        "or no topo -m read to say one is expected)",
    )


def _unknown_bridge(observed: str) -> Verdict:
    """Every link of a GPU down and no `topo -m` to say whether a bridge is fitted: said, not passed."""
    return V.warn(
        "nvlink",
        expected=EXPECTED,
        observed=observed,
        reason=f"{observed} and no `nvidia-smi topo -m` read to say whether a bridge is fitted: capture it "
        "(NV# between the GPUs: a bridge that is down, a fault; SYS/PHB/NODE: no bridge, fine) and "
        "ask the provider whether the box was sold with NVLink bridges",
    )


def _shown(items: list[str], limit: int = 6) -> str:
    more = f"; and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more
