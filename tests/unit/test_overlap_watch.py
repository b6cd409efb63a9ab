"""The overlap stage's watched buckets, judged (suite/stages/overlap/watch.py) and drawn
(suite/stages/overlap/figure.py): rows shaped as suite/stages/overlap/ddp_watch.py writes them, built from the
bucket model's own layout, then spoiled one way at a time — each spoiling must change its verdict."""

from __future__ import annotations

import pandas as pd
import pytest

from suite.config import GLOO_CPU
from suite.costmodel.buckets import OverlapMode, ddp_bucket_members
from suite.results import Row
from suite.stages import overlap
from suite.stages.overlap import figure as overlap_figures
from suite.stages.overlap import watch

CPU_FACTS = {"profile": GLOO_CPU.to_dict()}
GPU_LIKE_FACTS = {"profile": {**GLOO_CPU.to_dict(), "judge_performance": True}}
SMALL = OverlapMode.parse("0.01")
LABEL = SMALL.label
CFG = GLOO_CPU.model


def watched_rows(
    buckets: list[list[str]], *, ms_per_bucket: float = 1.0, comm_ms: float = 0.5, launch_lag_ms: float = 0.05
) -> list[Row]:
    """Bucket i's last gradient at (i+1) ms, launched launch_lag later, done comm_ms after that; one layer per
    bucket."""
    common = dict(stage="overlap", overlap=LABEL, world=4, dtype="float32", unit="s", source="measured")
    sizes = dict(watch.named_gradient_sizes(CFG))
    rows = []
    for i, params in enumerate(buckets):
        ready = (i + 1) * ms_per_bucket / 1e3
        case = f"watch.bucket.{i}"
        rows += [
            Row(
                case=case,
                metric="bucket_bytes",
                value=float(sum(sizes[p] for p in params)),
                **{**common, "unit": "bytes"},
                text=" ".join(params),
            ),
            Row(case=case, metric="bucket_ready_s", value=ready, **common),
            Row(case=case, metric="bucket_launch_s", value=ready + launch_lag_ms / 1e3, **common),
            Row(case=case, metric="bucket_done_s", value=ready + (launch_lag_ms + comm_ms) / 1e3, **common),
            Row(case=f"watch.layer.{i}", metric="layer_grad_last_s", value=ready, **common, text=f"layer{i}"),
        ]
    return rows


def verdicts(rows, facts=CPU_FACTS):
    return {v.id: v for v in watch.watch_verdicts(rows, {LABEL: SMALL}, CFG, facts)}


def test_the_model_layout_splits_the_rehearsal_model_into_many_buckets():
    predicted = watch.predicted_buckets(CFG, SMALL)
    names = [n for n, _ in watch.named_gradient_sizes(CFG)]
    assert len(predicted) == 8  # as DDP built them in the rehearsal (raw/overlap/ddp.rank0.log)
    assert [p for b in predicted for p in b] == names  # every gradient once, in reverse registration order
    assert names[0] == "head.weight" and names[-1] == "embed.weight"
    assert ddp_bucket_members([4, 4, 4, 3, 9, 1], cap_bytes=10, first_cap_bytes=5) == [[0, 1], [2, 3, 4], [5]]


def test_buckets_as_predicted_and_launched_after_their_gradients_pass():
    v = verdicts(watched_rows(watch.predicted_buckets(CFG, SMALL)))
    assert v[f"overlap.membership.{LABEL}"].status == "pass", v[f"overlap.membership.{LABEL}"].observed
    assert v[f"overlap.launch.{LABEL}"].status == "pass"
    assert v[f"overlap.hidden.{LABEL}"].status == "skip"  # CPU: shown, not judged


def test_a_parameter_in_another_bucket_warns_and_names_the_bucket():
    buckets = [list(b) for b in watch.predicted_buckets(CFG, SMALL)]
    buckets[2].append(buckets[3].pop(0))  # DDP would have moved one gradient across a boundary
    v = verdicts(watched_rows(buckets))[f"overlap.membership.{LABEL}"]
    assert v.status == "warn"
    assert "bucket 2 holds" in v.observed and buckets[2][-1] in v.observed


def test_a_missing_bucket_warns():
    buckets = watch.predicted_buckets(CFG, SMALL)
    merged = [*buckets[:-2], buckets[-2] + buckets[-1]]
    v = verdicts(watched_rows(merged))[f"overlap.membership.{LABEL}"]
    assert v.status == "warn" and v.observed.startswith(f"{len(merged)} buckets")


def test_a_launch_before_the_last_gradient_fails():
    rows = watched_rows(watch.predicted_buckets(CFG, SMALL), launch_lag_ms=-0.2)
    v = verdicts(rows)[f"overlap.launch.{LABEL}"]
    assert v.status == "fail" and "before its last gradient" in v.observed


def test_no_watched_rows_fail_both_checks():
    v = verdicts([])
    assert v[f"overlap.membership.{LABEL}"].status == v[f"overlap.launch.{LABEL}"].status == "fail"


def test_on_gpus_all_reduces_outlasting_backward_warn():
    predicted = watch.predicted_buckets(CFG, SMALL)
    hidden = verdicts(watched_rows(predicted, comm_ms=0.5), GPU_LIKE_FACTS)[f"overlap.hidden.{LABEL}"]
    assert hidden.status == "pass", hidden.observed
    exposed = verdicts(watched_rows(predicted, comm_ms=5.0), GPU_LIKE_FACTS)[f"overlap.hidden.{LABEL}"]
    assert exposed.status == "warn" and "complete after it" in exposed.observed


def test_hidden_share_counts_the_part_under_backward():
    b = [watch.WatchedBucket(0, [], 1.0, 0.0, 1.0, 3.0), watch.WatchedBucket(1, [], 1.0, 2.0, 2.0, 4.0)]
    assert watch.hidden_share(b, 2.0) == pytest.approx(1 / 4)  # 1 s of bucket 0 under backward, of 4 s


def test_the_stage_judge_includes_the_watch_and_the_figure_draws_it():
    rows = watched_rows(watch.predicted_buckets(CFG, SMALL)) + [
        Row(stage="overlap", case="ddp", metric="step_time_s", value=v, unit="s", overlap=label)
        for label, v in (("no_overlap", 0.1), (LABEL, 0.12))
    ]
    ids = {v.id for v in overlap.judge(rows, [], CPU_FACTS)}
    assert {f"overlap.membership.{LABEL}", f"overlap.launch.{LABEL}", f"overlap.hidden.{LABEL}"} <= ids
    figs = overlap_figures.figures(pd.DataFrame([r.to_dict() for r in rows]), pd.DataFrame(), CPU_FACTS)
    assert len(figs) == 3
    ax = figs[2].axes[0]
    assert len(ax.get_yticks()) == len(watch.predicted_buckets(CFG, SMALL)) == 8  # one row per bucket
    bars = [p for p in ax.patches if p.get_height() == pytest.approx(0.6)]
    assert len(bars) == 8 and bars[0].get_width() == pytest.approx(0.5)  # launch → completion, ms


def test_rows_without_a_watch_draw_no_timeline():
    rows = [Row(stage="overlap", case="ddp", metric="step_time_s", value=0.1, unit="s", overlap="no_overlap")]
    assert (
        len(overlap_figures.figures(pd.DataFrame([r.to_dict() for r in rows]), pd.DataFrame(), CPU_FACTS))
        == 2
    )
