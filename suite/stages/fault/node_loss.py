"""The fault stage's multi-node drill: a whole node lost mid-training (its torchrun agent SIGKILLed), on a
profile with two or more nodes. Not a stage: the underscore keeps it out of discovery; fault.py calls `run`
and `judge`.

One launch across the nodes of suite/stages/fault/node_loss_worker.py, elastic (`--nnodes=N-1:N`,
--max-restarts=1), the last node the one lost, at step `fault.fault_step` of `fault.steps` (the fault drill's
own settings). Measured, from the workers' events (wall-clock: the nodes' clocks are compared, so NTP's error
is in the figures):
  detect_s    the node's loss → the first survivor's error (what it raised: row `error`)
  restart_s   → the first survivor of the restarted attempt spawned (torchrun's restart, c10d's new round,
              which closes `last_call_timeout` after the survivors are in: LAST_CALL_S)
  resume_s    → training resumed from the newest checkpoint (`resumed_step`), on `world_after` ranks
  replay_diff the steps since that checkpoint, computed again on fewer ranks, against the first attempt's
  losses
Checkpoints go to raw/fault/node_loss/ckpt/ on every node's own disk (each node's first rank writes the whole
replicated DDP state: suite/stages/fault/node_checkpoint.py), so the drill needs no storage the nodes share;
the first node's are deleted after the drill (GBs on GPUs) and listed in checkpoints.txt.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from suite.cluster.multinode import parse_nodes
from suite.facts import profile_or_none
from suite.results import Row, Verdict
from suite.verdicts import verdicts_for

STAGE = "fault"
CASE = "node_loss"
WORKER = "suite.stages.fault.node_loss_worker"
LAST_CALL_S = 10.0
"""c10d's last call: how long a rendezvous round stays open once the fewest nodes allowed are in. The
survivors' restart waits it out; the first round too, should a node's agent start later than the others by
more than it."""
V = verdicts_for(STAGE)


def run(profile, ctx) -> list[Row]:
    """The drill, its events read back from every node's folder, as rows."""
    from suite.cluster.multilaunch import run_across_nodes
    from suite.launch.torchrun import LaunchError

    cfg, nodes = profile.section("fault"), parse_nodes(profile.nodes)
    folder = ctx.raw_dir / CASE
    lose = nodes[-1].name
    ctx.say(f"node loss: {lose}'s torchrun agent killed at step {cfg.fault_step} of {cfg.steps}")
    args = [
        "--lose",
        lose,
        "--steps",
        str(cfg.steps),
        "--checkpoint-every",
        str(cfg.checkpoint_every),
        "--fault-step",
        str(cfg.fault_step),
        "--pg-timeout",
        str(cfg.pg_timeout_s),
        "--join-timeout",
        str(profile.collective_timeout_s),
        "--checkpoint-dir",
        str(folder / "ckpt"),
        "--model",
        json.dumps(dataclasses.asdict(profile.model)),
    ]
    error = None
    try:
        run_across_nodes(
            profile,
            WORKER,
            args,
            raw_dir=folder,
            nproc=profile.nproc,
            max_restarts=1,
            timeout_s=cfg.drill_timeout_s + LAST_CALL_S,
            min_nodes=len(nodes) - 1,
            expendable=[lose],
            last_call_s=LAST_CALL_S,
        )
    except LaunchError as e:  # judged from the events; the command and the log tail kept
        error = f"{e} (exit code {e.exit_code})"
        (folder / "launch-error.txt").write_text(e.describe() + "\n")
    forget_checkpoints(folder / "ckpt", folder / "checkpoints.txt")
    return rows_from_events(read_events(folder), lose, error)


def forget_checkpoints(ckpt: Path, listing: Path) -> None:
    """This node's checkpoint files, listed (name, bytes) in `listing`, then deleted: only a resume reads
    them."""
    import shutil

    files = sorted(ckpt.glob("step_*.pt")) if ckpt.is_dir() else []
    listing.write_text("".join(f"{f.name} {f.stat().st_size}\n" for f in files))
    shutil.rmtree(ckpt, ignore_errors=True)


def read_events(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.glob("*/events.rank*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line cut by the kill
    return out


def rows_from_events(events: list[dict], lose: str, launch_error: str | None = None) -> list[Row]:
    """The drill's events (every node's, both attempts) → its rows; pure."""

    def row(metric: str, value: float, unit: str, text: str | None = None) -> Row:
        return Row(stage=STAGE, case=CASE, metric=metric, value=value, unit=unit, text=text)

    rows = [row("lost_node", math.nan, "text", lose)]
    if launch_error:
        rows.append(row("launch_error", math.nan, "text", launch_error))
    fault = next((e for e in events if e["event"] == "fault"), None)
    first = [e for e in events if e.get("attempt") == 0]
    again = [e for e in events if e.get("attempt") == 1]
    worlds = sorted({e["world"] for e in first if e["event"] == "group_up"})
    rows.append(row("world_before", worlds[-1] if worlds else math.nan, "count"))
    if fault is None:
        return rows + [
            row("fault_seen", 0, "count", "the lost node never reached the fault step: see its logs")
        ]
    t0 = fault["t"]
    errors = sorted(
        (e for e in first if e["event"] == "error" and e.get("node") != lose), key=lambda e: e["t"]
    )
    if errors:
        rows += [
            row("detect_s", errors[0]["t"] - t0, "s"),
            row("error", math.nan, "text", f"{errors[0].get('node')}: {errors[0]['first_line']}"),
        ]
    spawns = sorted(e["t"] for e in again if e["event"] == "spawn")
    if spawns:
        rows.append(row("restart_s", spawns[0] - t0, "s"))
    resumed = sorted((e for e in again if e["event"] == "resumed"), key=lambda e: e["t"])
    if resumed:
        rows += [
            row("resume_s", resumed[0]["t"] - t0, "s"),
            row("resumed_step", resumed[0]["step"], "count"),
            row("world_after", resumed[0]["world"], "count"),
        ]
    rows.append(row("done_ranks", sum(1 for e in again if e["event"] == "done"), "count"))
    before = {e["step"]: e["loss"] for e in first if e["event"] == "step"}
    replayed = [
        abs(e["loss"] - before[e["step"]]) for e in again if e["event"] == "step" and e["step"] in before
    ]
    if replayed:
        rows.append(row("replay_diff", max(replayed), "ratio", f"{len(replayed)} replayed step losses"))
    return rows


def judge(rows: list[Row], facts: dict) -> list[Verdict]:
    """Detection, restart and resume without the lost node, the trajectory kept; none on one node."""
    prof = profile_or_none(facts)
    if prof is None or len(prof.nodes) < 2:
        return []
    cfg = prof.section("fault")
    got = {r.metric: r for r in rows if r.stage == STAGE and r.case == CASE}
    if not got:
        return [
            V.fail(
                "node_loss",
                expected="the node-loss drill ran",
                observed="no rows",
                reason="see raw/fault/node_loss/ (launch-error.txt, each node's torchrun.log)",
            )
        ]
    lost = got["lost_node"].text
    pg = cfg.pg_timeout_s
    warn_after, every = pg + cfg.detect_warn_after_s, cfg.checkpoint_every
    out = []
    detect = got.get("detect_s")
    if detect is None:
        out.append(
            V.fail(
                "node_loss.detect",
                expected=f"a survivor raises within {warn_after:.0f} s",
                observed="no survivor raised",
                reason=f"the survivors hung when {lost} went: see "
                "raw/fault/node_loss/<node>/rank*.log (a process-group timeout not set?)",
            )
        )
    else:
        out.append(
            V.check(
                "node_loss.detect",
                detect.value <= warn_after,
                expected=f"≤ {warn_after:.0f} s",
                observed=f"{detect.value:.1f} s: {got['error'].text}",
                bad="warn",
                reason_ok=f"the survivors noticed {lost} was gone",
                reason_bad="the survivors noticed late: the process-group timeout decides it",
            )
        )
    want_step = cfg.fault_step // every * every  # the newest checkpoint before the fault step
    before = got.get("world_before")
    after, step, done = got.get("world_after"), got.get("resumed_step"), got.get("done_ranks")
    resumed = (
        after is not None
        and step is not None
        and before is not None
        and 0 < after.value < before.value
        and step.value == want_step
        and done is not None
        and done.value == after.value
    )
    if after is not None and step is not None:
        observed = (
            f"resumed at step {step.value:.0f} on {after.value:.0f} of "
            f"{before.value if before else math.nan:.0f} ranks, {done.value if done else 0:.0f} finished, "
            f"{got['resume_s'].value:.1f} s after the loss"
        )
    else:
        observed = "no restarted attempt" + (f": {got['launch_error'].text}" if "launch_error" in got else "")
    out.append(
        V.check(
            "node_loss.resume",
            resumed,
            observed=observed,
            expected=f"restarted without {lost}, resumed at step {want_step} and finished on every survivor",
            reason_ok="torchrun's elastic restart went on without the lost node from the last checkpoint",
            reason_bad="the survivors did not resume from their own node's checkpoint: read "
            "raw/fault/node_loss/<node>/torchrun.log and rank*.log",
        )
    )
    diff, tol = got.get("replay_diff"), cfg.loss_tolerance
    out.append(
        V.check(
            "node_loss.loss",
            diff is not None and diff.value <= tol,
            expected=f"≤ {tol:g} nats",
            observed=f"{diff.value:.2e} over {diff.text}" if diff else "no step computed twice",
            reason_ok="the steps since the checkpoint, on fewer ranks, gave the same losses",
            reason_bad="resuming on fewer ranks left the trajectory: the global batch or the checkpoint "
            "differs",
        )
    )
    return out
