"""Watching a fault drill while it runs (the stage's on_poll): its events, a survivor's watchdog line, a
stopped rank.

Every POLL_S the stage reads the drill's event files. A survivor that the NCCL watchdog tears down
(TORCH_NCCL_ASYNC_ERROR_HANDLING 1 or 3) never records a Python exception: its log's first failure
line becomes its error (`log_error`, timed by the log line itself where the format carries a time).
Once a survivor has raised, the hang forensics (suite/forensics) read the drill's ranks and must name the
faulted one (`tell`). In the hang scenario, the stopped rank is then SIGKILLed (`nudge`) instead of letting
torchrun SIGTERM it (a stopped process cannot act on that), wait 30 s and SIGKILL it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from suite.forensics import answer
from suite.forensics.answer import host_name
from suite.forensics.collect import collect_quietly
from suite.launch import procs
from suite.parsers.c10_log import first_nccl_failure
from suite.results import atomic_write_text

WORKER = "suite.stages.fault.drill_worker"
POLL_S = 0.2
"""run_torchrun's polling interval: the stage notices a survivor's error at most this late."""
TELL_WAIT_S = 1.0
"""After a survivor's error, how long the forensics wait for its post-mortem before reading without it."""


class DrillWatch:
    """Reads the drill's events while it runs; records a survivor's watchdog line; ends a stopped rank's
    hang."""

    def __init__(self, folder: Path, fault_rank: int, ranks: int):
        self.folder, self.fault_rank, self.ranks = folder, fault_rank, ranks
        self.stage_log = folder / "events.stage.jsonl"
        self.nudged = False
        self.told = False
        self.forensics = answer.folder(folder, "")
        self.log_error_seen = False

    def events(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.folder.glob("events.*.jsonl")):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a line cut by a kill mid-write
        return out

    def record(self, event: str, t: float | None = None, **fields) -> None:
        with open(self.stage_log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, "t": time.time() if t is None else t, **fields}) + "\n")

    def poll(self) -> None:
        events = self.events()
        fault = next((e for e in events if e.get("event") == "fault"), None)
        if fault is None:
            return
        if not self.log_error_seen:
            self.read_watchdog_lines(fault)
            events = self.events()
        errors = [
            e for e in events if e.get("event") in ("error", "log_error") and e.get("rank") != self.fault_rank
        ]
        raised = bool(errors)
        if raised and not self.told and self.records_left(errors):
            self.tell(fault)
        if fault["kind"] == "hang" and raised and self.told and not self.nudged:
            self.nudged = True
            if is_drill_process(fault["pid"], fault.get("started")):
                os.kill(fault["pid"], signal.SIGKILL)
                self.record(
                    "nudge",
                    rank=fault["rank"],
                    attempt=fault["attempt"],
                    pid=fault["pid"],
                    why="a survivor raised: end the stopped rank instead of torchrun's 30 s wait",
                )

    def records_left(self, errors: list[dict[str, Any]]) -> bool:
        """Whether the survivors that raised have left their post-mortems (written just after their error
        event), or TELL_WAIT_S passed: then the forensics read what there is."""
        posted = any((self.forensics / f"rank{e['rank']}.post_mortem.json").exists() for e in errors)
        return posted or time.time() - min(e["t"] for e in errors) > TELL_WAIT_S

    def tell(self, fault: dict[str, Any]) -> None:
        """The hang forensics on the drill, before a stopped rank is ended: the faulted rank must be the one
        named, on this host (row `forensics` of the case, judged by judges.judge_forensics)."""
        self.told = True
        findings = collect_quietly(
            self.folder, "", world=self.ranks, reason=f"{fault['kind']} drill", ask_live=False
        )
        if findings is None:
            return
        named = findings.line.startswith(f"rank {self.fault_rank} on {host_name()} ")
        self.record("forensics", line=findings.line, named=named, after_s=time.time() - fault["t"])

    def read_watchdog_lines(self, fault: dict[str, Any]) -> None:
        """A survivor torn down by the NCCL watchdog leaves only its log: take the first failure line as its
        error."""
        for rank in range(self.ranks):
            if rank == self.fault_rank:
                continue
            log = self.folder / f"rank{rank}.log"
            if not log.exists():
                continue
            found = first_nccl_failure(log.read_text(errors="replace"))
            if found is None:
                continue
            record, line = found
            now = time.time()
            when = record.epoch(near=fault["t"]) if record is not None and record.has_time else None
            # The log's own time where it has one; else when this poll saw it (at most POLL_S late).
            self.record(
                "log_error",
                t=now if when is None else when,
                rank=rank,
                attempt=fault["attempt"],
                first_line=line,
                seen_at=now,
                t_source="log time" if when is not None else "stage poll",
            )
            self.log_error_seen = True
            return


def is_drill_process(pid: int, started: int | None = None) -> bool:
    """Whether `pid` is still the faulted rank (never signal a recycled pid): the same start time where /proc
    tells (a rank forked from the warm launcher runs under the zygote's command line), else its command
    line."""
    if started is not None and procs.start_ticks(pid) is not None:
        return procs.start_ticks(pid) == started
    out = subprocess.run(
        ["ps", "-ww", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=False
    ).stdout
    return WORKER in out


def forget_checkpoints(folder: Path) -> None:
    """List the checkpoints left (name, files, bytes) in checkpoints.txt, then delete them."""
    root = folder / "ckpt"
    lines = []
    for ckpt in sorted(root.glob("step_*")):
        files = [p for p in ckpt.rglob("*") if p.is_file()]
        lines.append(f"{ckpt.name}\t{len(files)} files\t{sum(p.stat().st_size for p in files)} bytes")
    atomic_write_text(folder / "checkpoints.txt", "".join(line + "\n" for line in lines))
    shutil.rmtree(root, ignore_errors=True)
