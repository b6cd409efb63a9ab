"""The overlap stage's watched buckets (suite/stages/overlap/ddp_watch.py), judged against the bucket model
(suite/costmodel/buckets.py). Not a stage: the underscore keeps it out of discovery.

    verdicts = watch_verdicts(rows, modes_by_label, model_cfg, facts)

Three checks per overlapped mode:
  membership  DDP's buckets after its rebuild hold the parameters the model puts in them: gradients in the
              reverse of registration order, a bucket closed once it reaches bucket_cap_mb (DDP's default
              caps the first bucket at 1 MiB). A difference warns: the α-β predictions use that layout.
  launch      each bucket's all-reduce is launched after its last gradient is computed, and completes after
              its launch: anything else means the clock or the hooks are wrong, so the timeline is not to
              be read.
  hidden      (GPUs) every bucket but the last completes before backward computes its last gradient:
              the all-reduces hide behind backward. On a CPU the share hidden is shown, not judged.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from suite.config import GptConfig
from suite.costmodel.buckets import MIB, OverlapMode, caps_for, ddp_bucket_members
from suite.results import Row, Verdict
from suite.verdicts import judges_performance, verdicts_for

STAGE = "overlap"
VERDICTS = verdicts_for(STAGE)
BUCKET_CASE = "watch.bucket."  # as suite/stages/overlap/ddp_watch.py writes them
LAYER_CASE = "watch.layer."


def named_gradient_sizes(cfg: GptConfig) -> list[tuple[str, int]]:
    """(name, bytes) of every gradient in the order backward produces them (the reverse of registration),
    without allocating."""
    import torch

    from suite.workloads.gpt import GPT, torch_dtype

    with torch.device("meta"):
        model = GPT(cfg).to(torch_dtype(cfg.dtype))
    return [(name, p.numel() * p.element_size()) for name, p in reversed(list(model.named_parameters()))]


def predicted_buckets(cfg: GptConfig, mode: OverlapMode) -> list[list[str]]:
    """Parameter names per bucket, in all-reduce order, as the bucket model lays them out."""
    named = named_gradient_sizes(cfg)
    cap, first = caps_for(mode.bucket_cap_mb)
    return [[named[i][0] for i in bucket] for bucket in ddp_bucket_members([b for _, b in named], cap, first)]


@dataclass(frozen=True)
class WatchedBucket:
    index: int
    params: list[str]
    nbytes: float
    ready_s: float
    launch_s: float
    done_s: float


def watched_buckets(rows: list[Row], label: str) -> list[WatchedBucket]:
    """The mode's watched buckets, in all-reduce order."""
    by_case: dict[str, dict[str, Row]] = {}
    for r in rows:
        if r.overlap == label and r.case.startswith(BUCKET_CASE):
            by_case.setdefault(r.case, {})[r.metric] = r
    out = []
    for case, m in by_case.items():
        if "bucket_bytes" not in m:
            continue
        value = {
            k: m[k].value if k in m else math.nan
            for k in ("bucket_ready_s", "bucket_launch_s", "bucket_done_s")
        }
        out.append(
            WatchedBucket(
                index=int(case.removeprefix(BUCKET_CASE)),
                params=(m["bucket_bytes"].text or "").split(),
                nbytes=m["bucket_bytes"].value,
                ready_s=value["bucket_ready_s"],
                launch_s=value["bucket_launch_s"],
                done_s=value["bucket_done_s"],
            )
        )
    return sorted(out, key=lambda b: b.index)


def compute_end_s(rows: list[Row], label: str) -> float:
    """When backward computed its last gradient (seconds since it began), from the layer rows."""
    return max(
        (r.value for r in rows if r.overlap == label and r.metric == "layer_grad_last_s"), default=math.nan
    )


def hidden_share(buckets: list[WatchedBucket], compute_end: float) -> float:
    """Share of the all-reduce time spent while backward still computed gradients."""
    total = sum(b.done_s - b.launch_s for b in buckets)
    under = sum(max(0.0, min(b.done_s, compute_end) - b.launch_s) for b in buckets)
    return under / total if total > 0 else math.nan


def watch_verdicts(
    rows: list[Row], modes: dict[str, OverlapMode], cfg: GptConfig, facts: dict
) -> list[Verdict]:
    out: list[Verdict] = []
    for label, mode in modes.items():
        if not mode.overlap:
            continue
        buckets = watched_buckets(rows, label)
        if not buckets:
            out += [
                VERDICTS.fail(
                    f"{check}.{label}",
                    expected="every bucket watched through DDP's communication hook",
                    observed="no watched bucket rows",
                    reason=f"the watch of {label} wrote nothing: see raw/{STAGE}/ddp.rank0.log",
                )
                for check in ("membership", "launch")
            ]
            continue
        dtype = next(
            (r.dtype for r in rows if r.overlap == label and r.case.startswith(BUCKET_CASE) and r.dtype),
            cfg.dtype,
        )
        out.append(membership_verdict(label, mode, buckets, dataclasses.replace(cfg, dtype=dtype)))
        out.append(launch_verdict(label, buckets))
        out.append(hidden_verdict(label, buckets, compute_end_s(rows, label), facts))
    return out


def membership_verdict(
    label: str, mode: OverlapMode, buckets: list[WatchedBucket], cfg: GptConfig
) -> Verdict:
    predicted = predicted_buckets(cfg, mode)
    seen = [b.params for b in buckets]
    cap, first = caps_for(mode.bucket_cap_mb)
    expected = (
        f"{len(predicted)} buckets as the model lays them out: reverse parameter order, cap {cap / MIB:g} MiB"
        f"{f', first bucket {first / MIB:g} MiB' if first != cap else ''}"
    )
    differ = next((i for i, (a, b) in enumerate(zip(seen, predicted)) if set(a) != set(b)), None)
    if differ is None and len(seen) != len(predicted):
        differ = min(len(seen), len(predicted))
    if differ is None:
        observed = (
            f"{len(seen)} buckets, each holding the predicted parameters ({sum(map(len, seen))} in all)"
        )
    else:
        got = " ".join(seen[differ]) if differ < len(seen) else "(none)"
        want = " ".join(predicted[differ]) if differ < len(predicted) else "(none)"
        observed = f"{len(seen)} buckets; bucket {differ} holds {got}; the model puts {want} there"
    return VERDICTS.check(
        f"membership.{label}",
        differ is None,
        bad="warn",
        expected=expected,
        observed=observed,
        reason_ok="DDP's rebuilt buckets are the model's: the α-β predictions use the buckets DDP reduces",
        reason_bad="DDP's rebuilt buckets differ from the model's (gradients ready out of reverse "
        "registration "
        "order, or DDP's bucketing changed): the α-β predictions use the wrong buckets — "
        "update suite/costmodel/buckets.py to what DDP does",
    )


def launch_verdict(label: str, buckets: list[WatchedBucket]) -> Verdict:
    early = [b for b in buckets if not (b.launch_s >= b.ready_s)]
    unfinished = [b for b in buckets if not (b.done_s >= b.launch_s)]
    lags = [b.launch_s - b.ready_s for b in buckets if b not in early]
    if early or unfinished:
        observed = "; ".join(
            [
                f"bucket {b.index} launched {(b.ready_s - b.launch_s) * 1e3:.3f} ms before its last gradient"
                for b in early[:3]
            ]
            + [f"bucket {b.index} completed before its launch (or never)" for b in unfinished[:3]]
        )
    else:
        observed = (
            f"{len(buckets)} buckets, each launched {min(lags) * 1e3:.3f}–{max(lags) * 1e3:.3f} ms after "
            f"its last gradient"
        )
    return VERDICTS.check(
        f"launch.{label}",
        not early and not unfinished,
        expected="each bucket's all-reduce launched after its last gradient is ready, completed after its "
        "launch",
        observed=observed,
        reason_ok="the reducer fires each bucket once its gradients are in: the timeline can be read",
        reason_bad="the timeline contradicts how DDP's reducer works: the hooks or the clock are wrong "
        "(on a GPU: events recorded on another stream) — do not read the timeline; see "
        "suite/stages/overlap/ddp_watch.py",
    )


def hidden_verdict(label: str, buckets: list[WatchedBucket], compute_end: float, facts: dict) -> Verdict:
    share = hidden_share(buckets, compute_end)
    late = [b.index for b in buckets[:-1] if not (b.done_s <= compute_end)]
    expected = "every bucket but the last completes before backward's last gradient (all-reduces hidden)"
    observed = (
        f"{share:.0%} of the all-reduce time under backward; "
        f"{f'buckets {late} complete after it' if late else 'every bucket but the last completes under it'}"
        f" (last gradient at {compute_end * 1e3:.2f} ms)"
    )
    if not judges_performance(facts):
        return VERDICTS.cpu_skip(f"hidden.{label}", expected, observed)
    return VERDICTS.check(
        f"hidden.{label}",
        not late,
        bad="warn",
        expected=expected,
        observed=observed,
        reason_ok="the all-reduces run behind backward: only the last bucket is exposed",
        reason_bad="all-reduces outlast the backward computing under them: communication exposed — larger "
        "buckets (fewer α) or a faster link; see the overlap timeline figure",
    )
