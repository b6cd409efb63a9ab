"""The fault drill's uninterrupted reference, in a process of its own (suite/stages/fault/reference_worker.py)
that the stage starts beside its drills: one process, the full global batch, the same steps and seed."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess

from suite.config import Profile
from suite.context import StageContext
from suite.hardware.stage_fit import scaling_model
from suite.launch import procs
from suite.launch.forklaunch import module_command
from suite.launch.torchrun import worker_env

REFERENCE = "suite.stages.fault.reference_worker"


def start_reference(profile: Profile, ctx: StageContext, device: str) -> subprocess.Popen:
    """Start the uninterrupted run (suite/stages/fault/reference_worker.py) with the workers' environment and
    threads."""
    # the drills' model, sized to the card (suite/hardware/stage_fit.py)
    model = scaling_model(profile, ctx.facts)
    args = [
        "--model",
        json.dumps(dataclasses.asdict(model)),
        "--steps",
        str(profile.section("fault").steps),
        "--device",
        device,
        "--out",
        str(ctx.raw_dir / "reference_losses.json"),
    ]
    (ctx.raw_dir / "reference_losses.json").unlink(missing_ok=True)
    with open(ctx.raw_dir / "reference.log", "wb") as log:
        return subprocess.Popen(
            module_command(profile, REFERENCE, args),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env(profile),
            preexec_fn=functools.partial(procs.die_with_parent, expected_parent=os.getpid()),
        )


def finish_reference(ctx: StageContext, proc: subprocess.Popen, reserve_s: float) -> list[float]:
    """Wait for the reference (within the stage's time, less `reserve_s`); its losses, or an error naming its
    log."""
    left = ctx.time_left()
    try:
        code = proc.wait(timeout=None if left is None else max(left - reserve_s, 1.0))
    except subprocess.TimeoutExpired:
        procs.kill_tree(proc.pid, grace_s=0.0)
        proc.wait()
        code = None
    path = ctx.raw_dir / "reference_losses.json"
    if code != 0 or not path.exists():
        log = ctx.raw_dir / "reference.log"
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:]) if log.exists() else ""
        raise RuntimeError(
            f"the uninterrupted reference ({REFERENCE}) "
            + ("ran out of the stage's time" if code is None else f"exited with code {code}")
            + f": see {log}"
            + (f"\n{tail}" if tail else "")
        )
    return [float(x) for x in json.loads(path.read_text())["losses"]]
