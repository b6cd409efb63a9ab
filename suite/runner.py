"""Runs stages in the checklist's order into a run directory; isolates, times out, resumes.

    python -m suite run --profile gloo-cpu                  # a new run under runs/
    python -m suite run --resume runs/20261129T1630Z-box-gloo-cpu

For each stage: expect → expectations.csv → run (in a forked child, own process group, killed
at the stage's timeout) → rows and raw output → judge → verdicts.json → manifest. With the fork
launcher (the rehearsal's), one warm process started here forks every stage's ranks
(suite/launch/forklaunch.py); a stage's child reaches it through its socket, and a stage killed at its
timeout takes its ranks with it (their agent kills them when the stage's connection closes). A crash, a
failed torchrun or a timeout becomes a `fail` verdict with the command, exit code and log tail,
and the run goes on. A stage is skipped on resume once its manifest status is `complete`.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from suite import kept_rows, run_schema, stagecode, stages
from suite.config import Profile, profile_from_dict
from suite.context import StageContext
from suite.fabric_watch import FabricWatch
from suite.facts import Facts
from suite.figure_drawer import FigureDrawer
from suite.forensics.collect import ask_before_the_stage_is_killed, explained
from suite.gitinfo import suite_checkout
from suite.launch import forklaunch, procs
from suite.launch.torchrun import LaunchError, log_tail
from suite.progress import Progress
from suite.results import (
    Expectation,
    Row,
    RunDir,
    Verdict,
    dumps,
    read_rows_jsonl,
    status_counts,
    write_rows_jsonl,
)
from suite.run_consistency import load_checked
from suite.run_id import new_run_id, unique_run_path, utc_now
from suite.runfiles import RunDirError
from suite.stage_contract import Stage
from suite.verdicts import summary_line, verdicts_for

RESULT_FILE = ".stage-result.json"
ROWS_FILE = ".stage-rows.jsonl"
STAGE_LOG = "stage.log"
ZYGOTE_LOG = "launcher.log"  # the warm launcher's own output (profile.launcher fork), in the run directory
INJECT_ENV = "CARDTIME_INJECT"  # e.g. "bandwidth=crash,crossover=hang": tests prove failures are contained


@dataclass
class RunOutcome:
    run: RunDir
    counts: dict[str, int]
    seconds: float

    @property
    def exit_code(self) -> int:
        return 1 if self.counts["fail"] else 0

    def summary(self) -> str:
        """The counts (summary_line); when GPU stages were skipped for want of GPUs, a first line says so."""
        counts = summary_line(self.counts)
        short = self.run.manifest.get("gpu_stages_skipped") if self.run is not None else None
        if short:
            return (
                f"{len(short['stages'])} GPU stage(s) skipped: {short['reason']} "
                f"(--keep-going runs them anyway)\n{counts}"
            )
        return counts


# ---------------------------------------------------------------- identity


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def initial_manifest(profile: Profile, run_id: str, selected: list[str]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "profile": profile.to_dict(),
        "profile_name": profile.name,
        "git": suite_checkout(),
        "host": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "versions": {"torch": package_version("torch"), "cardtime": package_version("cardtime")},
        "stages_selected": selected,
        "stage_texts": stages.texts(selected),  # the report shows what this run's code said it measured
        "stages": {name: {"status": "pending", "attempt": 0} for name in selected},
        "facts": {},
        "started": utc_now().isoformat(timespec="seconds"),
        "finished": None,
    }


# ---------------------------------------------------------------- the run


def start_run(profile: Profile, selected: list[str], out_base: Path) -> RunDir:
    run_id = new_run_id(profile)
    path = unique_run_path(Path(out_base), run_id)
    try:
        return RunDir.create(path, initial_manifest(profile, path.name, selected))
    except OSError as e:  # a full disk, a size limit: no folder is left holding half a manifest
        shutil.rmtree(path, ignore_errors=True)
        raise OSError(
            f"cannot create the run directory {path}: {e.strerror or e}; free space or pass --out DIR"
        ) from None


def resume_run(path: Path) -> tuple[RunDir, Profile]:
    """The run to continue, every record read and agreeing first (suite/run_consistency.py): a stage rerun
    into records that cannot be read, or disagree, would fail midway or carry the damage into the new ones."""
    run, _ = load_checked(path)
    problem = resume_problem(run.manifest)
    if problem:
        raise RunDirError(
            run.path / RunDir.MANIFEST, problem, fix="start a new run instead of resuming this one"
        )
    return run, profile_from_dict(run.manifest["profile"])


def is_stage(name: str) -> bool:
    try:
        stages.load(name)
    except stages.StageSelectionError:
        return False
    return True


def resume_problem(manifest: dict[str, Any]) -> str | None:
    """What a resume needs that the manifest lacks (a run writes all of it at its start: a manifest without it
    was cut or edited by hand), or a stage this cardtime does not have; None when it can go on."""
    problem = run_schema.unrecorded_problem(manifest, run_schema.RESUME_NEEDS)
    if problem:
        return problem
    unknown = [name for name in manifest["stages_selected"] if not is_stage(name)]
    if unknown:
        return f"names stage(s) {', '.join(map(repr, unknown))} that this cardtime does not have"
    return None


def execute(
    run: RunDir,
    profile: Profile,
    *,
    stream=None,
    keep_going: bool = False,
    produce: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run every selected stage that is not complete; returns counts over all verdicts of the run.

    When a stage publishes `usable_gpus` below what the profile needs, the stages after it are skipped
    at once with that reason (each would spend its timeout failing) unless keep_going.
    `produce` maps a stage to what makes its rows instead of its run() (`suite ingest` feeds captures)."""
    selected = run.manifest["stages_selected"]
    start = time.monotonic()
    progress = Progress(run.path, len(selected), stream=stream)
    nodes = f"{len(profile.nodes)} nodes × " if profile.nodes else ""
    if produce:  # an ingest: captures judged here, nothing launched (no processes, no launcher to name)
        progress.say(
            f"cardtime ingest {run.manifest['run_id']}: judging the captures as {profile.name} → {run.path}"
        )
    else:
        progress.say(
            f"cardtime run {run.manifest['run_id']} ({profile.name}, {nodes}{profile.nproc} processes, "
            f"launcher {profile.launcher}) → {run.path}"
        )
    pending = [name for name in selected if run.stage_state(name)["status"] != "complete"]
    warm = profile.launcher == "fork" and not produce and any(launches_ranks(name) for name in pending)
    # The report's figures, drawn as each stage ends: on the rehearsal only, whose report is rendered on this
    # machine right after; a GPU box's report is rendered where the run is fetched, and its CPUs stay the
    # stages'.
    drawer = FigureDrawer.start(run.path) if profile.is_rehearsal else FigureDrawer(None)
    watch = FabricWatch.for_run(run, profile, produce, [name for name in pending if launches_ranks(name)])
    try:
        for index, name in enumerate(selected, start=1):
            state = run.stage_state(name)
            progress.index, progress.stage = index, name
            if state["status"] == "complete":
                progress.end_stage("already complete: kept")
                drawer.stage_done(name)
                continue
            shortfall = None if keep_going else gpu_shortfall(run.facts(), profile)
            if shortfall:
                skip_for_want_of_gpus(run, name, shortfall, progress)
                continue
            # started before the first stage, forked from here once torch is; restarted if a stage killed it
            if warm:
                preload_torch(profile.omp_threads)
                forklaunch.warm_zygote(run.path / ZYGOTE_LOG, fork_here=True)
            watch.before(name)  # NVLink/IB error counters around every load stage (suite/fabric_watch.py)
            run_stage(run, profile, name, index, progress, (produce or {}).get(name))
            watch.after(name)
            drawer.stage_done(name)
    finally:
        if warm:
            forklaunch.stop_warm_zygote()
        drawer.stop()
    run.manifest["finished"] = utc_now().isoformat(timespec="seconds")
    run.save_manifest()
    (run.path / "progress.json").unlink(missing_ok=True)
    return RunOutcome(run=run, counts=status_counts(run.verdicts()), seconds=time.monotonic() - start)


def gpu_shortfall(facts: dict[str, Any], profile: Profile) -> str | None:
    """Why the GPU stages cannot run, from the `usable_gpus` fact a stage published (topology, health), else
    None."""
    usable = facts.get("usable_gpus")
    if profile.is_rehearsal or not isinstance(usable, dict) or usable.get("count") is None:
        return None
    need = usable.get("need", profile.nproc)
    if usable["count"] >= need:
        return None
    return (
        f"{usable.get('by', 'an earlier stage')} found {usable['count']} usable GPU(s), the profile needs "
        f"{need}" + (f" ({usable['why']})" if usable.get("why") else "")
    )


def skip_for_want_of_gpus(run: RunDir, name: str, shortfall: str, progress: Progress) -> None:
    skipped = run.manifest.setdefault("gpu_stages_skipped", {"reason": shortfall, "stages": []})
    skipped["stages"].append(name)
    state = run.stage_state(name)
    state.update(start=utc_now().isoformat(timespec="seconds"))
    verdict = verdicts_for(name).skip(
        "run",
        expected="the GPUs the profile needs",
        observed=shortfall,
        reason="skipped without launching: with too few GPUs the stage could only "
        "fail at its timeout; fix the GPUs (driver, `--gpus all`, CUDA_VISIBLE_DEVICES) "
        "or pass --keep-going to run it anyway",
    )
    finish_stage(run, name, [], [], [verdict], {}, "complete", progress)


def preload_torch(threads: int) -> None:
    """The warm path: import torch here once with what the stages' own code imports on first use (DDP's and
    the profiler's torch._dynamo, FSDP, DTensor: the zygote's warm set, seconds on a 2-core machine), so that
    neither the stages' children, forked from this process, import it for their references, models and
    expectations, nor the zygote, forked from here too (forklaunch.Zygote.fork_here). Capped first, as the
    children are: no OpenMP pool of more threads exists in this process when it forks them."""
    if "torch._dynamo" not in sys.modules:
        if "torch" not in sys.modules:
            cap_threads(threads)
        from suite.launch.zygote import warm_imports

        warm_imports()


def launches_ranks(stage: str) -> bool:
    """Whether the stage starts ranks (suite/stagecode.py): the warm launcher is started for it."""
    return stagecode.launches_ranks(stage)


def run_stage(run: RunDir, profile: Profile, name: str, index: int, progress: Progress, produce=None) -> None:
    """expect → produce the rows (run() isolated, by default) → judge → record."""
    ingested, produce = produce is not None, produce or run_isolated
    declared = stages.declaration(name)
    state = run.stage_state(name)
    # reports compare: same code, comparable
    state.update(
        status="running",
        attempt=state.get("attempt", 0) + 1,
        start=utc_now().isoformat(timespec="seconds"),
        end=None,
        stage_code=stagecode.stage_code(name, declared.version),
    )
    run.save_manifest()
    progress.start_stage(index, name, "judging the captured outputs" if ingested else declared.measures)
    facts = stage_facts(run, profile)
    raw_dir = run.raw_dir(name)
    timeout = profile.timeout_for(name)

    if profile.is_rehearsal and not declared.rehearsal:
        verdicts = [
            verdicts_for(name).skip(
                "run",
                expected="a GPU",
                observed=f"profile {profile.name}",
                reason=declared.cpu_skip or "this stage needs GPUs and has no rehearsal face",
            )
        ]
        finish_stage(run, name, [], [], verdicts, {}, "complete", progress)
        return

    try:
        expectations = list(declared.expect(profile, facts))
    except Exception:
        expectations = []
        failure = {"message": "expect() raised", "traceback": traceback.format_exc()}
        finish_stage(run, name, [], [], [failure_verdict(name, failure)], {}, "error", progress)
        return
    run.replace_stage_expectations(name, expectations)

    outcome = produce(declared, name, profile, run, raw_dir, facts, progress, timeout)
    if not outcome["ok"]:  # killed or crashed: the rows it measured so far are kept (suite/kept_rows.py)
        forklaunch.settle_warm_zygote()  # its ranks gone first: none writes a row after the salvage
        kept = kept_rows.salvage(raw_dir)
        outcome = {
            **outcome,
            "message": f"{outcome.get('message', 'stage failed')}; {kept_rows.salvage_note(kept, name)}",
        }
        finish_stage(run, name, kept, expectations, [failure_verdict(name, outcome)], {}, "error", progress)
        return
    rows = read_rows_jsonl(raw_dir / ROWS_FILE)
    published = outcome.get("published", {})
    try:
        verdicts = list(declared.judge(rows, expectations, facts.with_published(published)))
    except Exception:
        verdicts = [failure_verdict(name, {"message": "judge() raised", "traceback": traceback.format_exc()})]
    finish_stage(run, name, rows, expectations, verdicts, published, "complete", progress)


def stage_facts(run: RunDir, profile: Profile) -> Facts:
    """Facts published so far and the run's profile, typed (expect() and judge() read sizes from it)."""
    return Facts(profile, run.facts())


def finish_stage(
    run: RunDir,
    name: str,
    rows: list[Row],
    expectations: list[Expectation],
    verdicts: list[Verdict],
    published: dict[str, Any],
    status: str,
    progress: Progress,
) -> None:
    # Order matters for resume: rows and verdicts first, then the manifest says `complete`.
    run.replace_stage_rows(name, rows)
    run.replace_stage_verdicts(name, verdicts)
    run.facts().update(published)
    if published:
        versions = published.get("versions")
        if isinstance(versions, dict):
            run.manifest.setdefault("versions", {}).update(versions)
    state = run.stage_state(name)
    state.update(
        status=status,
        end=utc_now().isoformat(timespec="seconds"),
        rows=len(rows),
        verdicts=sum(v.stage == name for v in verdicts),
    )
    run.save_manifest()
    counts = status_counts(verdicts)
    word = "done" if status == "complete" else "FAILED"
    progress.end_stage(f"{word}: {len(rows)} rows; {summary_line(counts)}")


def failure_verdict(stage: str, failure: dict[str, Any]) -> Verdict:
    """A crash, a failed launch or a timeout as a verdict: command, exit code and log tail in the reason."""
    parts = [failure.get("message", "stage failed")]
    if failure.get("command"):
        parts.append("command: " + failure["command"])
    if failure.get("exit_code") is not None:
        parts.append(f"exit code: {failure['exit_code']}")
    if failure.get("log_tail"):
        parts.append("last lines of the log:\n" + failure["log_tail"])
    elif failure.get("traceback"):
        parts.append(failure["traceback"].rstrip().splitlines()[-1])
    observed = failure.get("observed") or (
        f"exit code {failure['exit_code']}"
        if failure.get("exit_code") is not None
        else failure.get("message", "crashed")
    )
    return verdicts_for(stage).fail(
        "run", expected="the stage completes", observed=observed, reason="\n".join(parts)
    )


# ---------------------------------------------------------------- isolation


def run_isolated(
    declared: Stage,
    name: str,
    profile: Profile,
    run: RunDir,
    raw_dir: Path,
    facts: dict[str, Any],
    progress: Progress,
    timeout: float,
) -> dict[str, Any]:
    """Run the stage's run() in a forked child with its own process group; kill the whole tree at the
    timeout."""
    kept_rows.reset(raw_dir)  # no row of an earlier attempt may be salvaged as this one's
    deadline = time.monotonic() + timeout

    def stage() -> dict[str, Any]:
        ctx = _child_context(name, profile, run, raw_dir, facts, progress, deadline)
        inject(name)
        write_rows_jsonl(raw_dir / ROWS_FILE, list(declared.run(profile, ctx)))
        return {"ok": True, "published": ctx.published}

    def failed(error: BaseException) -> dict[str, Any]:
        if isinstance(error, LaunchError):
            return {
                "ok": False,
                "message": str(error),
                "command": " ".join(error.command),
                "exit_code": error.exit_code,
                "log_tail": error.log_tail,
            }
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        return {
            "ok": False,
            "message": f"stage {name} raised {type(error).__name__}: {error}",
            "traceback": tb,
            "log_tail": log_tail(sorted(raw_dir.glob("*.log"))),
        }

    child = procs.fork_call(stage, raw_dir / RESULT_FILE, on_error=failed, own_group=True)
    told: list = []  # the hang forensics of the launches in flight, asked before the kill

    started = time.time()

    def ask_ranks() -> None:
        told.extend(ask_before_the_stage_is_killed(raw_dir, since=started))

    # the runner's clock (tests step it)
    if not child.wait(deadline, poll_s=0.01, clock=time.monotonic, before_kill=ask_ranks):
        return {
            "ok": False,
            "message": explained(
                f"stage {name} timed out after {timeout:.0f} s and was killed", next(iter(told), None)
            ),
            "observed": f"timed out after {timeout:.0f} s",
            "log_tail": log_tail(sorted(raw_dir.glob("*.log"))),
        }
    result = child.result()
    if result is not None:
        return result
    return {
        "ok": False,
        "message": f"stage {name} died without a result ({child.died()})",
        "exit_code": child.exit_code,
        "log_tail": log_tail(sorted(raw_dir.glob("*.log"))),
    }


def fed(rows: list[Row], published: dict[str, Any] | None = None):
    """A producer handing the runner rows made elsewhere (a tool's captured output) in place of the stage's
    run()."""

    def produce(module, name, profile, run, raw_dir, facts, progress, timeout) -> dict[str, Any]:
        write_rows_jsonl(raw_dir / ROWS_FILE, rows)
        # through JSON, as a live stage's facts come back from its child: later stages read the same shapes
        return {"ok": True, "published": json.loads(dumps(published or {}))}

    return produce


def _child_context(name, profile, run, raw_dir, facts, progress, deadline) -> StageContext:
    """In the stage's child: progress keeps the terminal, anything else printed goes to stage.log; threads
    capped."""
    progress.stream = os.fdopen(os.dup(2), "w", buffering=1)
    log = os.open(raw_dir / STAGE_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    cap_threads(profile.omp_threads)
    return StageContext(
        stage=name,
        profile=profile,
        run_path=run.path,
        raw_dir=raw_dir,
        facts=facts,
        progress=progress,
        deadline=deadline,
    )


def cap_threads(threads: int) -> None:
    """The stage's own computations (references, fits) get the profile's thread cap, as its workers do:
    uncapped, torch in the stage process fights the workers for the same cores."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    if "torch" in sys.modules:  # expect() may already have imported it in the parent
        sys.modules["torch"].set_num_threads(threads)


def inject(stage: str) -> None:
    """Test hook: CARDTIME_INJECT=stage=crash|hang|segv makes a stage fail the way real ones do."""
    for item in os.environ.get(INJECT_ENV, "").split(","):
        target, _, kind = item.partition("=")
        if target.strip() != stage:
            continue
        kind = kind.strip()
        if kind == "crash":
            raise RuntimeError(f"injected crash in stage {stage}")
        if kind == "hang":
            while True:
                time.sleep(3600)
        if kind == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
