"""Who, where and with what a run was made: host, GPUs, versions, profile, commit, duration — as label/value
pairs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from reports import fmt
from reports.runview import RunView
from suite.hardware.hostprobe import nccl_versions_differ

# Versions a reader looks for first, in this order; any others the stages published follow, sorted.
KEY_VERSIONS = ("driver", "cuda", "nccl", "torch", "cardtime")
REHEARSAL_WARNING = (
    "Rehearsal run on CPU: the performance figures in this report come from a CPU and mean "
    "nothing about GPUs. Only the correctness verdicts and the plumbing count."
)


def gpus(view: RunView) -> str:
    """'8 × NVIDIA H100 80GB HBM3' from the topology facts; on a CPU profile, says there are none."""
    facts = view.manifest.get("facts") or {}
    names = gpu_names(facts)
    count = (
        (facts.get("topology") or {}).get("gpu_count") if isinstance(facts.get("topology"), dict) else None
    )
    if names and len(set(names)) == 1 and isinstance(count, int) and count > len(names):
        names = names * count  # one model named (e.g. ingest's --gpu-model) for a matrix of `count` GPUs
    if names:
        counted = Counter(names)
        return ", ".join(f"{n} × {name}" for name, n in counted.items())
    if view.profile.get("device") == "cpu":
        return "none (CPU profile)"
    return "not recorded (the topology stage did not publish them)"


def gpu_names(facts: dict[str, Any]) -> list[str]:
    """GPU names from whichever shape the topology stage published: a list of names or of dicts with a
    name."""
    for key in ("gpus", "gpu_names", "gpu"):
        value = facts.get(key)
        if isinstance(value, dict):
            value = value.get("names") or value.get("gpus") or list(value.values())
        if isinstance(value, list) and value:
            names = []
            for item in value:
                if isinstance(item, dict):
                    item = item.get("name") or item.get("product_name") or item.get("model")
                if item:
                    names.append(str(item))
            if names:
                return names
    topology = facts.get("topology")
    if isinstance(topology, dict):
        return gpu_names({k: v for k, v in topology.items() if k != "topology"})
    return []


def versions(view: RunView) -> str:
    recorded = {k: v for k, v in (view.manifest.get("versions") or {}).items() if v not in (None, "")}
    ordered = [k for k in KEY_VERSIONS if k in recorded] + sorted(
        k for k in recorded if k not in KEY_VERSIONS
    )
    missing = [k for k in KEY_VERSIONS[:3] if k not in recorded]
    text = ", ".join(f"{k} {recorded[k]}" for k in ordered) or "none recorded"
    if missing and not view.is_rehearsal:
        text += f" ({', '.join(missing)} not recorded)"
    return text


def profile(view: RunView) -> str:
    p = view.profile
    name = view.manifest.get("profile_name") or p.get("name") or "unknown"
    details = ", ".join(f"{k} {p[k]}" for k in ("backend", "device", "nproc") if k in p)
    return f"{name} ({details})" if details else str(name)


def commit(view: RunView) -> str:
    git = view.manifest.get("git") or {}
    sha = str(git.get("commit") or "unknown")
    dirty = git.get("dirty")
    return sha + (
        " with uncommitted changes" if dirty else "" if dirty is False else " (clean state unknown)"
    )


def host(view: RunView) -> str:
    h = view.manifest.get("host") or {}
    return str(h.get("hostname") or "unknown")


def machine(view: RunView) -> str:
    h = view.manifest.get("host") or {}
    topology = (view.manifest.get("facts") or {}).get("topology") or {}
    parts = [str(topology["cpu_model"])] if isinstance(topology, dict) and topology.get("cpu_model") else []
    parts += [str(h[k]) for k in ("platform",) if h.get(k)]
    if h.get("cpus"):
        parts.append(f"{h['cpus']} CPUs")
    if h.get("python"):
        parts.append(f"Python {h['python']}")
    return ", ".join(parts)


def one_line(view: RunView) -> list[tuple[str, str]]:
    """The first screen's identity, short enough for one line: host, GPUs, profile, commit, date."""
    m = view.manifest
    git = m.get("git") or {}
    sha = str(git.get("commit") or "unknown")[:10] + ("+dirty" if git.get("dirty") else "")
    start = fmt.parse_time(m.get("started"))
    end = fmt.parse_time(m.get("finished"))
    when = utc(start).strftime("%Y-%m-%d %H:%M UTC") if start else "date unknown"
    if start and end:
        when += f" ({fmt.duration((end - start).total_seconds())})"
    name = m.get("profile_name") or view.profile.get("name") or "unknown"
    return [
        ("host", host(view)),
        ("GPUs", gpus(view)),
        ("profile", str(name)),
        ("commit", sha),
        ("date", when),
    ]


def identity(view: RunView) -> list[tuple[str, str]]:
    m = view.manifest
    return [
        ("run", view.run_id),
        ("host", host(view)),
        ("GPUs", gpus(view)),
        ("versions", versions(view)),
        ("profile", profile(view)),
        ("commit", commit(view)),
        ("schema", f"version {m.get('schema_version')}"),
        ("time", fmt.span(m.get("started"), m.get("finished"))),
        ("machine", machine(view)),
    ]


def banners(view: RunView) -> list[str]:
    """Warnings a reader must see before anything else: what could not be read comes first."""
    out = [f"Incomplete run directory — {problem}" for problem in view.problems]
    if view.is_rehearsal:
        out.append(REHEARSAL_WARNING)
    ingested = view.manifest.get("ingested")
    if isinstance(ingested, dict):
        # a capture that feeds two stages (nvidia-smi -q: health and topology) is kept twice, counted once
        paths = dict.fromkeys(str(f.get("path", "?")) for f in ingested.get("files", []))
        used = [Path(p).name for p in paths]
        out.append(
            f"Judged from {len(used)} captured file(s) by `python -m suite ingest`, not measured by this "
            f"suite: {', '.join(used)} (kept in raw/); {len(ingested.get('unused', []))} file(s) not used "
            f"(see the manifest's `ingested`). Checks the captures hold no data for are skipped."
        )
    if view.manifest_read and not view.manifest.get("finished"):
        out.append(
            "This run has not finished (or was interrupted): stages without verdicts below did not run. "
            f"Resume it with `python -m suite run --resume {view.path}`."
        )
    return out + nccl_banners(view)


def nccl_banners(view: RunView) -> list[str]:
    """A GPU run without nccl-tests, or whose nccl-tests linked another NCCL than torch: said on the first
    screen."""
    out = []
    recorded = view.manifest.get("versions") or {}
    if not view.is_rehearsal and "nccl_tests" in recorded and recorded["nccl_tests"] is None:
        out.append(
            "No nccl-tests on this host (not on PATH nor in CARDTIME_NCCL_TESTS_DIR): the nccl-tests "
            "verdicts are skip and every comparison with NCCL's own benchmark is missing. RUNTIME=docker "
            "(the image has them) or nccl-tests' *_perf on PATH brings them back."
        )
    if nccl_versions_differ(recorded.get("nccl"), recorded.get("nccl_tests_nccl")):
        out.append(
            f"torch's NCCL ({recorded['nccl']}) and the NCCL nccl-tests was built against "
            f"({recorded['nccl_tests_nccl']}) differ: the torch-vs-nccl-tests comparisons compare two "
            "libraries, not two programs on one (build nccl-tests with NCCL_HOME at torch's NCCL, as the "
            "image does)."
        )
    return out


def utc(t):
    """A recorded time in UTC (a naive one is taken as UTC already, as the runner writes them)."""
    from datetime import timezone

    return t.astimezone(timezone.utc) if t.tzinfo else t
