"""The fault drill's events → one timeline per scenario → tidy rows. Pure: no processes, no files.

Events are what suite/stages/fault/drill_worker.py writes (spawn, group_up, settings, resumed, step,
checkpoint, fault, error, done), plus the stage's own (nudge: it SIGKILLed a stopped rank) and a
surviving rank's NCCL watchdog error read from its log (`log_error`). Every `t` is wall-clock
seconds from one host, so intervals between processes are differences of `t`; every interval
below is counted from the fault.

    detect   fault → the first surviving rank raised (its first error line is kept)
    restart  fault → torchrun spawned the first worker of the next attempt (process start time)
    regroup  fault → every rank of the next attempt had joined the new process group
    resume   fault → the first training step after loading the checkpoint had finished
    done     fault → the last step had finished
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from suite.results import Row

STAGE = "fault"
NAN = float("nan")


@dataclass
class Timeline:
    scenario: str
    world: int
    fault_rank: int | None = None
    fault_step: int | None = None
    fault_t: float | None = None
    error_t: float | None = None
    error_rank: int | None = None
    error_line: str | None = None
    error_via: str | None = None
    """'exception' (the survivor caught it in Python) or 'log' (the watchdog's line in the survivor's log)."""
    nudge_t: float | None = None
    restart_t: float | None = None
    regroup_t: float | None = None
    resume_t: float | None = None
    done_t: float | None = None
    resumed_from: int | None = None
    last_checkpoint: int | None = None
    steps_done: int = 0
    checkpoint_seconds: list[float] = field(default_factory=list)
    losses: dict[int, dict[int, float]] = field(default_factory=dict)
    """attempt → step → the all-reduced loss of that step."""
    settings: dict[str, Any] = field(default_factory=dict)

    def since_fault(self, t: float | None) -> float:
        if t is None or self.fault_t is None:
            return NAN
        return t - self.fault_t

    def resumed_losses(self) -> dict[int, float]:
        """Losses of the attempts after the fault, later attempts winning for a step run twice."""
        out: dict[int, float] = {}
        for attempt in sorted(a for a in self.losses if a > 0):
            out.update(self.losses[attempt])
        return out


def build_timeline(scenario: str, world: int, events: Iterable[dict[str, Any]]) -> Timeline:
    """Fold the events of one scenario (any order, every rank and attempt, the stage's too) into its
    timeline."""
    events = sorted(events, key=lambda e: e.get("t", 0.0))
    tl = Timeline(scenario=scenario, world=world)
    faults = [e for e in events if e["event"] == "fault"]
    if faults:
        first = faults[0]
        tl.fault_t, tl.fault_rank, tl.fault_step = first["t"], first["rank"], first["step"]
        fault_attempt = first["attempt"]
    else:
        fault_attempt = 0
    after = fault_attempt + 1

    errors = [
        e
        for e in events
        if e["event"] in ("error", "log_error")
        and e.get("rank") != tl.fault_rank
        and e.get("attempt", fault_attempt) == fault_attempt
    ]
    if errors and tl.fault_t is not None:
        first = errors[0]
        tl.error_t, tl.error_rank = first["t"], first["rank"]
        tl.error_line = first.get("first_line")
        tl.error_via = "exception" if first["event"] == "error" else "log"

    nudges = [e["t"] for e in events if e["event"] == "nudge"]
    tl.nudge_t = nudges[0] if nudges else None
    spawns = [e["t"] for e in events if e["event"] == "spawn" and e["attempt"] == after]
    tl.restart_t = min(spawns) if spawns else None
    ups = [e["t"] for e in events if e["event"] == "group_up" and e["attempt"] == after]
    tl.regroup_t = max(ups) if len(ups) == world else None
    resumed = [e for e in events if e["event"] == "resumed" and e["attempt"] == after]
    tl.resumed_from = resumed[0]["step"] if resumed else None
    first_steps = [
        e["t"]
        for e in events
        if e["event"] == "step" and e["attempt"] == after and e["step"] == tl.resumed_from
    ]
    tl.resume_t = min(first_steps) if first_steps else None
    dones = [e["t"] for e in events if e["event"] == "done"]
    tl.done_t = max(dones) if dones else None

    checkpoints = [e for e in events if e["event"] == "checkpoint"]
    tl.checkpoint_seconds = [e["seconds"] for e in checkpoints]
    before = [e["step"] for e in checkpoints if tl.fault_t is None or e["t"] <= tl.fault_t]
    tl.last_checkpoint = max(before) if before else None

    for e in events:
        if e["event"] == "step":
            tl.losses.setdefault(e["attempt"], {}).setdefault(e["step"], e["loss"])
    all_steps = [s for steps in tl.losses.values() for s in steps]
    tl.steps_done = max(all_steps) + 1 if all_steps else 0
    for e in events:
        if e["event"] == "settings":
            tl.settings = {k: v for k, v in e.items() if k not in ("event", "t", "rank", "attempt")}
    return tl


def max_abs_diff(a: dict[int, float], b: dict[int, float] | list[float]) -> float:
    """Largest |a[s] − b[s]| over the steps both have; NaN when they share none."""
    if isinstance(b, list):
        b = dict(enumerate(b))
    common = [s for s in a if s in b]
    if not common:
        return NAN
    return max(abs(a[s] - b[s]) for s in common)


def timeline_rows(
    tl: Timeline,
    reference: list[float],
    pg_timeout_s: float,
    tolerance: float,
    launch_error: str | None = None,
) -> list[Row]:
    """One scenario's measurements: intervals from the fault, steps, loss differences, settings, the error's
    first line."""
    case, world = tl.scenario, tl.world

    def row(metric: str, value: float | None, unit: str, **params) -> Row:
        value = NAN if value is None else float(value)
        return Row(stage=STAGE, case=case, metric=metric, value=value, unit=unit, world=world, **params)

    def text(metric: str, value: str, **params) -> Row:
        return Row(
            stage=STAGE, case=case, metric=metric, value=NAN, unit="text", world=world, text=value, **params
        )

    resumed = tl.resumed_losses()
    attempt0 = tl.losses.get(0, {})
    rows = [
        row("pg_timeout_s", pg_timeout_s, "s"),
        row("fault_step", tl.fault_step, "count", rank=tl.fault_rank),
        row("detect_s", tl.since_fault(tl.error_t), "s", rank=tl.error_rank, source=tl.error_via),
        row(
            "restart_s",
            tl.since_fault(tl.restart_t),
            "s",
            source="torchrun+drill" if tl.nudge_t else "torchrun",
        ),
        row("regroup_s", tl.since_fault(tl.regroup_t), "s"),
        row("resume_s", tl.since_fault(tl.resume_t), "s"),
        row("done_s", tl.since_fault(tl.done_t), "s"),
        row("last_checkpoint_step", tl.last_checkpoint, "count"),
        row("resumed_from_step", tl.resumed_from, "count"),
        row(
            "steps_lost",
            None if tl.fault_step is None or tl.resumed_from is None else tl.fault_step - tl.resumed_from,
            "count",
        ),
        row("steps_done", tl.steps_done, "count"),
        row("loss_diff", max_abs_diff(resumed, reference), "nats", source="vs reference"),
        row("replay_diff", max_abs_diff(resumed, attempt0), "nats", source="vs attempt 0"),
        row("pre_fault_diff", max_abs_diff(attempt0, reference), "nats", source="vs reference"),
        row("loss_tolerance", tolerance, "nats"),
    ]
    if tl.checkpoint_seconds:
        rows.append(
            row(
                "checkpoint_s",
                sum(tl.checkpoint_seconds) / len(tl.checkpoint_seconds),
                "s",
                count=len(tl.checkpoint_seconds),
            )
        )
    if tl.nudge_t is not None:
        rows.append(row("nudge_s", tl.since_fault(tl.nudge_t), "s", source="drill"))
        rows.append(
            text(
                "restart_note",
                "restart_s includes the drill's SIGKILL of the stopped rank at nudge_s; "
                "torchrun alone SIGTERMs it, waits 30 s, then SIGKILLs it",
            )
        )
    if tl.error_line:
        rows.append(text("error", tl.error_line, rank=tl.error_rank, source=tl.error_via))
    if launch_error:
        rows.append(text("launch_error", launch_error))
    env = tl.settings.get("env") or {}
    if tl.settings.get("backend") == "nccl":
        for name, value in env.items():
            rows.append(text(name, "unset" if value is None else str(value)))
    for attempt, losses in sorted(tl.losses.items()):
        rows.extend(
            row("loss", loss, "nats", repeat=step, source=f"attempt{attempt}")
            for step, loss in sorted(losses.items())
        )
    return rows


def reference_rows(reference: list[float]) -> list[Row]:
    return [
        Row(
            stage=STAGE,
            case="reference",
            metric="loss",
            value=loss,
            unit="nats",
            world=1,
            repeat=step,
            source="single-process",
        )
        for step, loss in enumerate(reference)
    ]


def forensics_rows(case: str, world: int, events: Iterable[dict[str, Any]]) -> list[Row]:
    """The hang forensics' reading of the drill (DrillWatch.tell): whether it named the faulted rank on this
    host (1 or 0, its line as text) and how long after the fault it read the ranks."""
    told = next((e for e in events if e.get("event") == "forensics"), None)
    if told is None:
        return []
    named = 1.0 if told.get("named") else 0.0
    return [
        Row(
            stage=STAGE,
            case=case,
            metric="forensics_named",
            value=named,
            unit="count",
            world=world,
            text=str(told.get("line", "")),
        ),
        Row(
            stage=STAGE,
            case=case,
            metric="forensics_after_s",
            value=float(told.get("after_s", "nan")),
            unit="s",
            world=world,
        ),
    ]
