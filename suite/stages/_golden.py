"""The verdict dp and zero share: parameters after training, compared elementwise with one process."""

from __future__ import annotations

import math
from typing import Callable

from suite.config import GptConfig
from suite.costmodel.tolerance import Tolerance, golden_tolerance
from suite.facts import profile as profile_of
from suite.results import Row, Verdict
from suite.verdicts import verdicts_for


def tolerance_after_training(facts: dict, model: GptConfig | None = None) -> Tolerance:
    """The golden tolerance of the run's model (or `model`, the one dp and zero train: Profile.dp_model) after
    its warm-up and timed steps (what dp and zero compare)."""
    model = model or profile_of(facts).model
    return golden_tolerance(model, model.warmup_steps + model.steps)


def golden_verdicts(
    stage: str,
    rows: list[Row],
    tol: Tolerance,
    key: str,
    keys,
    label: str | Callable[[int], str],
    where: dict | None = None,
    suffix: str = "",
) -> list[Verdict]:
    """One verdict per degree (key 'world') or ZeRO stage (key 'zero'): parameters after training within
    `tol` (its value and derivation said in the verdict). label: '{key}' formatted, or a function of the key;
    where: other parameters the rows must have (zero's world), suffix: added to each verdict's id."""
    verdicts, out = verdicts_for(stage), []
    expected = f"max |Δ parameter| ≤ {tol.describe()} after training"
    for k in keys:
        found = [
            r.value
            for r in rows
            if r.case == "params_after_training"
            and r.metric == "max_abs_error"
            and getattr(r, key) == k
            and all(getattr(r, p) == v for p, v in (where or {}).items())
        ]
        name = label(k) if callable(label) else label.format(key=k)
        check = f"golden.{key}{k}{suffix}"
        if not found:
            out.append(
                verdicts.fail(
                    check,
                    expected=expected,
                    observed="no comparison row",
                    reason=f"{name} was not compared: see raw/{stage}/*.rank0.log",
                )
            )
            continue
        error = found[0]
        out.append(
            verdicts.check(
                check,
                math.isfinite(error) and error <= tol.bound,
                expected=expected,
                observed=f"max |Δ parameter| = {error:.3g}",
                reason_ok=f"{name} trains exactly what one process trains",
                reason_bad=f"{name} trains something else than one process: a gradient reduction skipped or "
                f"wrongly "
                f"scaled, ranks seeded differently, or ranks reading other slices of the batch",
            )
        )
    return out
