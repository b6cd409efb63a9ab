"""A run's summary: what the library indexes and `suite share` writes. Built from the run directory alone.

    summary = summarize(Path("runs/20261208T0133Z-box-nccl-gpu"), labels={"provider": "lambda"})

Holds the GPU model and count, versions, the topology's shape (link kinds and counts, never names), the box
verdict, the verdict counts and the failed ids, the headline figures, the day of the run and the user's
labels (provider, region, price per hour). Nothing in it names a host, an address or a serial: the figures
are numbers, the texts come from fixed vocabularies, and `key` is a digest of the run's identity.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from reports.runview import load_run
from suite.box_verdict import box_verdict
from suite.facts import FittedAlphaBeta, TopologyFacts, baseline_step_s, gpu
from suite.hardware import public_references

SCHEMA = "cardtime.summary/1"
LABELS = ("provider", "region", "price_per_hour")
VERSION_KEYS = ("driver", "cuda_driver", "cuda", "nccl", "torch", "cardtime")
HEADLINES = {
    **public_references.UNITS,
    "alpha": "us",
    "beta": "GB/s",
    "baseline.step": "s",
}
"""Every figure a summary may hold, with its unit: the public references' kinds, and the bandwidth stage's
fitted α and β and the baseline's step time (what `make plan` can learn from)."""


def figures(facts: Mapping[str, Any], rows) -> dict[str, float]:
    """The run's headline figures (HEADLINES), those it measured."""
    model, count = public_references.box_of(facts)
    if not count and not rows.empty and rows["world"].notna().any():
        count = int(rows["world"].max())  # no topology read: the widest launch's ranks
    out = {m: round(found.value, 4) for m, found in public_references.measure(rows, model, count).items()}
    fit = FittedAlphaBeta.from_facts(facts)
    if fit is not None:
        out["alpha"], out["beta"] = round(fit.alpha_s * 1e6, 4), round(fit.beta_Bps / 1e9, 4)
    if (step := baseline_step_s(facts)) is not None and step > 0:
        out["baseline.step"] = round(step, 6)
    return out


def summarize(run_dir: Path, labels: Mapping[str, Any] | None = None, view=None) -> dict[str, Any]:
    """The summary of a run directory (or of its `view`, reports.runview's, when it is already read)."""
    view = view or load_run(Path(run_dir))
    facts, manifest = view.facts, view.manifest
    topo = TopologyFacts.from_facts(facts)
    entry = gpu(facts)
    box = box_verdict(manifest, view.verdicts)
    # an ingested run's torch is the ingesting machine's, not the box's
    kept = [k for k in VERSION_KEYS if not (k == "torch" and manifest.get("ingested"))]
    versions = {k: str(v) for k, v in (manifest.get("versions") or {}).items() if k in kept and v}
    summary = {
        "schema": SCHEMA,
        "key": run_key(manifest),
        "date": str(manifest.get("started") or "")[:10],
        "profile": str(manifest.get("profile_name") or ""),
        "ingested": bool(manifest.get("ingested")),
        "gpu_model": entry.model if entry else None,
        "gpu_count": len(topo.matrix_gpus or topo.gpu_names),
        "versions": versions,
        "topology": {"box": topo.box, "links": dict(sorted(Counter(topo.links.values()).items()))},
        "box_verdict": box.word,
        "verdicts": dict(sorted(Counter(v.status for v in view.verdicts).items())),
        "failed": sorted(v.id for v in view.verdicts if v.status == "fail"),
        "figures": figures(facts, view.rows),
        "labels": {k: v for k, v in (labels or {}).items() if k in LABELS and v not in (None, "")},
    }
    summary["digest"] = digest(summary)
    return summary


def run_key(manifest: Mapping[str, Any]) -> str:
    """The run's identity in the library: a digest of its id, start time and host, naming none of them."""
    host = (manifest.get("host") or {}).get("hostname")
    identity = "|".join(str(x) for x in (manifest.get("run_id"), manifest.get("started"), host))
    return hashlib.sha256(identity.encode()).hexdigest()[:24]


def digest(summary: Mapping[str, Any]) -> str:
    """sha256 of the summary without its digest, keys sorted: a changed figure or label changes it."""
    body = {k: v for k, v in summary.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def problem(summary: Any) -> str | None:
    """Why a summary read from a file cannot be imported, or None."""
    if not isinstance(summary, dict):
        return "not a summary (a JSON object is expected)"
    if summary.get("schema") != SCHEMA:
        return f"schema {summary.get('schema')!r}, not {SCHEMA!r}: made by another cardtime"
    missing = [
        k for k in ("key", "gpu_model", "gpu_count", "figures", "box_verdict", "digest") if k not in summary
    ]
    if missing:
        return f"missing {', '.join(missing)}"
    if summary["digest"] != digest(summary):
        return "its digest does not match its content: changed after it was written"
    bad = [m for m, v in summary["figures"].items() if m not in HEADLINES or not isinstance(v, (int, float))]
    if bad:
        return f"figures not of this schema: {', '.join(sorted(bad))}"
    return None
