"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 9 — fault: kill one rank of a DDP job mid-training: how long until the others notice, what they
raise, how long the group takes to restart, whether training resumes from its checkpoint on track.

    python -m suite run --stages fault --profile gloo-cpu     # the rehearsal: 2 gloo ranks, pg timeout 3 s
    python -m suite run --stages fault --profile nccl-gpu     # one rank per GPU, NCCL, pg timeout 60 s

Each scenario (crash: SIGKILL, hang: SIGSTOP, exception: raise mid-step) is one torchrun launch
with --max-restarts=1 of suite/stages/fault/drill_worker.py (on the CPU rehearsal the three launches
run at the same time, `FaultConfig.concurrent`: their start-ups and the hang's wait overlap, and
each scenario's times include the others' load; on GPUs one after the other), which checkpoints with
torch.distributed.checkpoint every `checkpoint_every` steps into raw/fault/<scenario>/ckpt/ and
writes every event with a wall-clock time to raw/fault/<scenario>/events.rank<N>.jsonl. The
stage supervises the launch (every 0.2 s):
  * a surviving rank whose NCCL watchdog tears the process down never gets to record a Python
    exception; its log's watchdog line is read instead (suite/parsers/c10_log.py);
  * hang: once a survivor has raised, the stage SIGKILLs the stopped rank itself. torchrun would
    SIGTERM it (a stopped process cannot act on that), wait 30 s (PContext.close's default) and
    SIGKILL it; the drill does not pay those 30 s, and `restart_s` of the hang includes its own
    SIGKILL (row `nudge_s`, note `restart_note`).
The uninterrupted reference is one process training the full global batch for the same steps with the same
seed (suite/stages/fault/reference_worker.py, started beside concurrent drills, else first): DDP's averaged
gradient of equal shares is the full batch's gradient, so the drill's losses before the fault must already
agree with it (`pre_fault_diff`), and after resuming must stay on it (`loss_diff`). A step run twice (the
steps lost since the checkpoint) must give attempt 0's loss again (`replay_diff`). Checkpoints are deleted
after each scenario (GBs on GPUs); `checkpoints.txt` lists what was there.

On NCCL every scenario runs twice (`drill_cases`): under torch's default TORCH_NCCL_ASYNC_ERROR_HANDLING
(unset, 3: on a timed-out collective the watchdog ends the process without ncclCommAbort) — what a production
job sees — and under 1 (ncclCommAbort first, then the process ends), as case `<scenario>.async1`. gloo ignores
the variable, so the rehearsal runs each scenario once.

Under gloo-cpu's warm launcher (`--launcher fork`, suite/launch/forklaunch.py) each launch is still
torchrun's own CLI — `torch.distributed.run`'s main with --max-restarts=1: its rendezvous, its
monitoring, its SIGTERM to the survivors, its restart — but torchrun and every worker it starts
are forked from the run's zygote, which imported torch once (suite/launch/warm_python.py: a --no-python
entrypoint standing in for its fork, passing on signals, exiting as it exited, killing it when it
dies): torch imported once, not by fifteen processes. `--launcher torchrun` runs the drills as the GPU
profile does, with the same worker, signals and exception.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass

from suite import headlines as hl
from suite.config import ConfigSection, Profile, ProfileError
from suite.context import StageContext
from suite.facts import Facts
from suite.facts import profile as profile_of
from suite.hardware.stage_fit import scaling_model
from suite.launch import procs
from suite.launch.forklaunch import launch, warm_zygote
from suite.launch.torchrun import LaunchError
from suite.results import Expectation, Row, Verdict, atomic_write_text
from suite.stage_contract import Stage
from suite.stages.fault import node_loss as _node_loss
from suite.stages.fault.cases import DrillCase, drill_cases
from suite.stages.fault.judges import (
    judge_detection,
    judge_forensics,
    judge_loss,
    judge_resume,
    text_of,
    too_few_ranks,
)
from suite.stages.fault.reference import finish_reference, start_reference
from suite.stages.fault.timeline import STAGE as NAME
from suite.stages.fault.timeline import build_timeline, forensics_rows, reference_rows, timeline_rows
from suite.stages.fault.watch import WORKER, DrillWatch, forget_checkpoints
from suite.verdicts import verdicts_for


@dataclass(frozen=True, kw_only=True)
class FaultConfig:
    """The fault drill (stage 9): its section of the profile; the values per profile are CONFIG below."""

    pg_timeout_s: float = 5.0
    """Process-group timeout the drill sets, seconds: a stopped rank is only detected after it."""
    steps: int = 8
    """Training steps of the drill."""
    checkpoint_every: int = 2
    """Steps between torch.distributed.checkpoint saves."""
    fault_step: int = 5
    """Step at which the chosen rank faults."""
    fault_rank: int = 1
    """The rank that faults."""
    scenarios: tuple[str, ...] = ("crash", "hang", "exception")
    """Which drills to run."""
    ranks: int = 0
    """Processes of the drill; 0 means every process of the profile (nproc)."""
    loss_tolerance: float = 1e-5
    """Largest |loss − the uninterrupted reference's| after resuming, nats: beyond it the run left its
    trajectory."""
    detect_warn_after_s: float = 10.0
    """Detection later than pg_timeout_s plus this, seconds, is a warning."""
    hang_after_s: float = 30.0
    """No surviving rank raising (and no restart) within pg_timeout_s plus this, seconds, is a hang: fail."""
    drill_timeout_s: float = 120.0
    """Wall-clock limit of one scenario's launch, seconds: two start-ups, the process-group timeout and
    torchrun's 30-s wait for a stopped rank fit in it; past it the drill is killed and judged a hang."""
    concurrent: bool = False
    """Run the scenarios' launches at the same time (CPU rehearsal: their start-ups and waits overlap;
    never on GPUs, where each launch takes every card)."""

    def __post_init__(self) -> None:
        unknown = [s for s in self.scenarios if s not in ("crash", "hang", "exception")]
        if unknown:
            raise ProfileError(f"fault scenarios {unknown} unknown: choose from crash, hang, exception")
        if not 0 <= self.fault_step < self.steps:
            raise ProfileError(f"fault_step {self.fault_step} must lie in [0, steps={self.steps})")
        if self.checkpoint_every < 1:
            raise ProfileError(f"checkpoint_every {self.checkpoint_every} must be at least 1")
        if self.ranks == 1 or (self.ranks and self.fault_rank >= self.ranks):
            raise ProfileError(
                f"the drill needs ≥ 2 ranks and fault_rank {self.fault_rank} < ranks {self.ranks}"
            )


CONFIG = ConfigSection(
    "fault",
    FaultConfig,
    {
        # 2 ranks: the drill needs only a survivor, and fewer processes share the 2 cores. 6 steps:
        # checkpoints after steps 2 and 4 before the fault in step 5 (resume from the newest, step 4
        # replayed), then one new step; two steps and a checkpoint fewer than the default per restarted
        # attempt and reference. A 3 s process-group timeout: the hang's detection waits for it, on the
        # stage's critical path. It still tests what 60 s tests on GPUs: a stopped rank (sockets open) makes
        # no error until the timeout, and the survivor's error then names it ("Timed out waiting 3000ms"); 3 s
        # stays far above a step here (~0.1 s, also under the load of three drills on two cores), so no
        # collective times out by chance, and far from the crash's and exception's detection (0.05–0.2 s: a
        # closed socket), so a timeout and a closed socket cannot be confused.
        "gloo-cpu": FaultConfig(ranks=2, steps=6, pg_timeout_s=3.0, concurrent=True),
        # bf16 on 8 cards: DDP's all-reduce and the one-card reference sum in other orders (tolerance not yet
        # measured).
        "nccl-gpu": FaultConfig(
            pg_timeout_s=60.0,
            steps=40,
            checkpoint_every=10,
            fault_step=25,
            loss_tolerance=5e-2,
            drill_timeout_s=420.0,
        ),
    },
)


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs): per scenario two launches, the
    steps, detection."""
    f, wait = p.profile.section(CONFIG), p.assume.torchrun_restart_wait_s
    step = p.step_s / p.gpus + p.dp_comm_s(p.gpus)
    detect = {"crash": 1.0, "exception": 1.0, "hang": f.pg_timeout_s + wait}
    # NCCL: two watchdog settings each
    cases = [c.scenario for c in drill_cases(f.scenarios, p.profile.backend)]
    seconds = sum(
        2 * p.assume.torchrun_launch_s + f.steps * step + detect.get(s, f.pg_timeout_s) for s in cases
    )
    return seconds, (
        f"{len(cases)} drills × (launch, restart, {f.steps} steps); a hang costs the "
        f"{f.pg_timeout_s:.0f} s process-group timeout + {wait:.0f} s"
    )


TORCHRUN_STOP_WAIT_S = 30.0
"""How long torchrun waits after SIGTERM before SIGKILLing a worker (PContext.close(timeout=30) in torch
2.13)."""
RESERVE_S = 5.0
"""Seconds of the stage's limit kept for writing rows after the last drill."""
MIN_DRILL_S = 20.0
"""A drill given less than this, seconds, cannot get through two start-ups: it is not started."""


def drill_ranks(profile: Profile) -> int:
    """The drill's processes: FaultConfig.ranks (0 = nproc), lowered to a divisor of the global batch."""
    ranks = min(profile.section(CONFIG).ranks or profile.nproc, profile.nproc)
    while ranks > 2 and profile.model.batch % ranks:
        ranks -= 1
    return ranks


def last_checkpoint_before(fault_step: int, every: int) -> int:
    """Steps done at the newest checkpoint saved before step `fault_step` began (0: none, start over)."""
    return (fault_step // every) * every


# ---------------------------------------------------------------- expect


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    cfg, ranks = profile.section(CONFIG), drill_ranks(profile)
    resumed = last_checkpoint_before(cfg.fault_step, cfg.checkpoint_every)
    out = []
    for case in drill_cases(cfg.scenarios, profile.backend):
        scenario = case.scenario
        if scenario == "hang" or profile.backend == "nccl":
            detect, basis = (
                cfg.pg_timeout_s,
                (
                    "the process-group timeout: nothing fails before it"
                    if scenario == "hang"
                    else "NCCL kernels wait for the dead peer until the watchdog's timeout (torchrun may "
                    "stop them first)"
                ),
            )
        else:
            detect, basis = 0.0, "immediate: the faulted process's sockets close (FACTS: 13–28 ms on gloo)"
        common = dict(stage=NAME, case=case.name, world=ranks)
        out += [
            Expectation(metric="detect_s", value=detect, unit="s", basis=basis, **common),
            Expectation(
                metric="resumed_from_step",
                value=resumed,
                unit="count",
                basis=f"last checkpoint before step {cfg.fault_step}: every {cfg.checkpoint_every} steps",
                **common,
            ),
            Expectation(
                metric="steps_lost",
                value=cfg.fault_step - resumed,
                unit="count",
                basis=f"steps done since that checkpoint: {cfg.fault_step} − {resumed}",
                **common,
            ),
            Expectation(
                metric="loss_diff",
                value=0.0,
                unit="nats",
                basis=f"the same trajectory as the uninterrupted run, within {cfg.loss_tolerance:g}",
                **common,
            ),
        ]
    return out


# ---------------------------------------------------------------- run


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    cfg, ranks = profile.section(CONFIG), drill_ranks(profile)
    device = "cuda:0" if profile.device == "cuda" else "cpu"
    cases = drill_cases(cfg.scenarios, profile.backend)
    # one process per node: no survivor beside the faulted rank; judge() says so in each verdict
    if ranks < 2:
        ctx.say(f"single-node drills not run: {too_few_ranks(profile)}")
        rows = []
    else:
        rows = single_node_drills(profile, ctx, cases, ranks, device)
    if len(profile.nodes) > 1:  # a multi-node run: a whole node lost too (suite/stages/fault/node_loss.py)
        rows += _node_loss.run(profile, ctx)
    ctx.say("drills done", done=len(cases), of=len(cases))
    ctx.publish(
        "fault_drill",
        {
            "ranks": ranks,
            "backend": profile.backend,
            "pg_timeout_s": cfg.pg_timeout_s,
            "concurrent": bool(cfg.concurrent and len(cfg.scenarios) > 1),
            "torchrun_stop_wait_s": TORCHRUN_STOP_WAIT_S,
            "hang_handling": "the stage SIGKILLs the stopped rank once a survivor has raised; torchrun alone "
            "would "
            f"SIGTERM it, wait {TORCHRUN_STOP_WAIT_S:.0f} s, then SIGKILL it",
            "reference": f"one process, full global batch, {cfg.steps} steps, on {device}",
            "torchrun": (
                "torchrun's own CLI, it and its workers forked from the warm zygote "
                "(suite/launch/warm_python.py)"
                if profile.launcher == "fork"
                else "python -m torch.distributed.run, as users launch it"
            ),
        },
    )
    return rows


def single_node_drills(
    profile: Profile, ctx: StageContext, cases: list[DrillCase], ranks: int, device: str
) -> list[Row]:
    """Every case on this node beside the uninterrupted reference; their rows."""
    cfg = profile.section(CONFIG)
    if cfg.concurrent and len(cases) > 1:
        # Everything at once: the reference's process and every drill's torchrun, each on its own free port (a
        # multi-node profile's fixed port, the nodes' rendezvous port, would be taken by the first, failing
        # the rest).
        profile = profile.with_overrides(master_port=None)
        ctx.say(
            f"{len(cases)} drills at once ({', '.join(c.name for c in cases)}) and the uninterrupted "
            f"reference: "
            f"rank {cfg.fault_rank} of {ranks} faults at step {cfg.fault_step}",
            done=0,
            of=len(cases),
        )
        if profile.launcher == "fork":
            warm_zygote()  # one for every drill's torchrun and workers, not one started by each supervisor
        reference_proc = start_reference(profile, ctx, device)
        children = start_drills(profile, ctx, ranks, cases)
        outcomes = wait_for_drills(ctx, children)
        reference = finish_reference(ctx, reference_proc, RESERVE_S)
    else:
        ctx.say(f"uninterrupted reference: {cfg.steps} steps in one process")
        # First, on its own: on GPUs the drill's rank 0 needs the card.
        reference = finish_reference(ctx, start_reference(profile, ctx, device), RESERVE_S)
        outcomes = {}
        for index, case in enumerate(cases):
            ctx.say(
                f"{case.name}: rank {cfg.fault_rank} of {ranks} faults at step {cfg.fault_step}",
                done=index,
                of=len(cases),
            )
            outcomes[case.name] = drill(profile, ctx, case, ranks)[1]
    rows = reference_rows(reference)
    for case in cases:
        events = DrillWatch(ctx.raw_dir / case.name, cfg.fault_rank, ranks).events()
        timeline = build_timeline(case.name, ranks, events)
        rows += timeline_rows(
            timeline, reference, cfg.pg_timeout_s, cfg.loss_tolerance, outcomes.get(case.name)
        )
        rows.append(
            Row(
                stage=NAME,
                case=case.name,
                metric="async_error_handling",
                value=float("nan"),
                unit="text",
                world=ranks,
                text=case.label,
            )
        )
        rows += forensics_rows(case.name, ranks, events)
    return rows


def start_drills(
    profile: Profile, ctx: StageContext, ranks: int, cases: list[DrillCase]
) -> dict[str, procs.Forked]:
    """Fork one supervisor per case (each runs drill(), then exits); case name → its child.

    The children are the stage's descendants: the runner's timeout takes them and their torchruns
    down with the stage, and each dies with the stage if the stage is killed outright.
    """

    def supervisor(case: DrillCase):
        return lambda: {"launch_error": drill(profile, ctx, case, ranks)[1]}

    def failed(error: BaseException) -> dict:
        return {"launch_error": f"the drill's supervisor raised {type(error).__name__}: {error}"}

    return {
        case.name: procs.fork_call(
            supervisor(case), ctx.raw_dir / f".{case.name}.result.json", on_error=failed
        )
        for case in cases
    }


def wait_for_drills(ctx: StageContext, children: dict[str, procs.Forked]) -> dict[str, str | None]:
    """Wait for every supervisor; scenario → its launch error (None when torchrun exited 0)."""
    outcomes, waiting = {}, dict(children)
    while waiting:
        child = procs.wait_first(list(waiting.values()))
        scenario = next(s for s, c in waiting.items() if c is child)
        del waiting[scenario]
        result = child.result()
        child.result_path.unlink(missing_ok=True)
        outcomes[scenario] = (
            result["launch_error"] if result is not None else f"the drill's supervisor died ({child.died()})"
        )
        ctx.say(
            f"{scenario} done; waiting for {', '.join(waiting) or 'nothing'}",
            done=len(children) - len(waiting),
            of=len(children),
        )
    return outcomes


def drill(profile: Profile, ctx: StageContext, case: DrillCase, ranks: int) -> tuple[list[dict], str | None]:
    """One case's launch, supervised; returns every event and the launch's failure (None when it exited 0)."""
    cfg = profile.section(CONFIG)
    folder = ctx.raw_dir / case.name
    shutil.rmtree(folder, ignore_errors=True)  # a rerun of this stage starts its scenarios afresh
    folder.mkdir(parents=True)
    watch = DrillWatch(folder, cfg.fault_rank, ranks)
    # the card's (stage_fit)
    args = [
        "--scenario",
        case.scenario,
        "--steps",
        str(cfg.steps),
        "--checkpoint-every",
        str(cfg.checkpoint_every),
        "--fault-step",
        str(cfg.fault_step),
        "--fault-rank",
        str(cfg.fault_rank),
        "--pg-timeout",
        str(cfg.pg_timeout_s),
        "--join-timeout",
        str(profile.collective_timeout_s),
        "--model",
        json.dumps(dataclasses.asdict(scaling_model(profile, ctx.facts))),
    ]
    left = ctx.time_left()
    timeout = cfg.drill_timeout_s if left is None else min(cfg.drill_timeout_s, left - RESERVE_S)
    if timeout < MIN_DRILL_S:
        return [], (
            f"not run: {left:.0f} s left of the stage's time limit, a drill needs {MIN_DRILL_S:.0f} s; "
            f"raise it with --stage-timeout fault=SECONDS"
        )
    launch_error = None
    try:
        launch(
            profile,
            WORKER,
            args,
            raw_dir=folder,
            nproc=ranks,
            max_restarts=1,
            timeout_s=timeout,
            on_poll=watch.poll,
            env=case.env(dict(os.environ)),
        )
    # the drill's outcome, judged from its events; the command and log stay in raw/
    except LaunchError as error:
        launch_error = f"{error} (exit code {error.exit_code})"
        atomic_write_text(folder / "launch-error.txt", error.describe() + "\n")
    watch.poll()
    forget_checkpoints(folder)
    return watch.events(), launch_error


# ---------------------------------------------------------------- judge

VERDICTS = verdicts_for(NAME)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    prof = profile_of(facts)
    cfg: FaultConfig = prof.section(CONFIG)
    pg_timeout = cfg.pg_timeout_s
    warn_after = pg_timeout + cfg.detect_warn_after_s
    hang_after = pg_timeout + cfg.hang_after_s
    steps = cfg.steps
    out = []
    backend = prof.backend
    too_few = too_few_ranks(prof)
    for scenario in [c.name for c in drill_cases(cfg.scenarios, backend)]:
        got = {r.metric: r for r in rows if r.case == scenario}
        if too_few:  # nothing to judge, and nothing wrong with the box: the run had one process per node
            out += [
                VERDICTS.not_applicable(
                    f"{check}.{scenario}",
                    expected="a survivor beside the faulted rank",
                    observed="not run",
                    why=too_few,
                )
                for check in ("detect", "resume", "loss", "forensics")
            ]
            continue
        if not got:
            out.append(
                VERDICTS.fail(
                    f"drill.{scenario}",
                    expected="the drill ran",
                    observed="no rows",
                    reason=f"scenario {scenario} left no rows: see raw/fault/{scenario}/",
                )
            )
            continue
        case = [
            judge_detection(scenario, got, pg_timeout, warn_after, hang_after, cfg.fault_step),
            judge_resume(scenario, got, steps),
            judge_loss(scenario, got),
            judge_forensics(scenario, got, cfg.fault_rank, hang_after),
        ]
        # which watchdog setting this case ran under, said in each
        setting = text_of(got, "async_error_handling")
        out += [dataclasses.replace(v, observed=f"{v.observed} [{setting}]") if setting else v for v in case]
    return out + _node_loss.judge(rows, facts)  # none on one node


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Per drill: how fast the fault was detected and training resumed."""
    parts = []
    for scenario in dict.fromkeys(r.case for r in rows if r.metric == "detect_s"):
        detect = hl.matching(rows, scenario, "detect_s")
        resume = hl.matching(rows, scenario, "resume_s")
        if detect:
            parts.append(
                f"{scenario}: detected in {hl.seconds(detect[0].value)}"
                + (f", resumed in {hl.seconds(resume[0].value)}" if resume else ", not resumed")
            )
    return " · ".join(parts) or None


STAGE = Stage(
    row=9,
    after=("overlap",),  # needs no facts; the checklist drills faults after the measurements
    title="a rank killed, stopped, raising mid-training",
    measures="a DDP job under torchrun --max-restarts=1 losing one rank (crash, hang, exception): time to "
    "the "
    "first error and its text, to the restart, to training resumed from the last DCP checkpoint; "
    "the loss after resuming against an uninterrupted run",
    wrong="hanging with no error (async error handling off / no timeout); resume losing steps or leaving the "
    "loss trajectory",
    rehearsal="the same drill on gloo with 2 processes and a 3 s process-group timeout, the three drills at "
    "once: a "
    "real SIGKILL, SIGSTOP and exception, real detection, real torchrun restart and resume (torchrun and its "
    "workers forked warm; the stopped rank is SIGKILLed by the drill once a survivor has raised, sparing "
    "torchrun's 30 s wait)",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
