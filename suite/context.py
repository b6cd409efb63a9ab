"""What a stage's `run` gets besides the profile: where to write, what earlier stages found, how to report
progress."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from suite import kept_rows
from suite.cluster.multilaunch import run_across_nodes
from suite.config import Profile
from suite.launch.forklaunch import launch as launch_here
from suite.launch.torchrun import WORKER_PROGRESS, LaunchResult, launch_out_dir
from suite.progress import Progress
from suite.results import Row


@dataclass
class StageContext:
    stage: str
    profile: Profile
    run_path: Path
    raw_dir: Path
    """raw/<stage>/: every untouched output of the stage goes here."""
    facts: dict[str, Any]
    """What earlier stages published (read-only by convention)."""
    progress: Progress
    deadline: float | None = None
    """time.monotonic() past which the stage is killed; launches get the time that is left."""
    published: dict[str, Any] = field(default_factory=dict)
    _last_worker_progress: Any = None

    def publish(self, key: str, value: Any) -> None:
        """Record a fact for later stages and the report (kept in manifest.json under facts).

        A dataclass (suite/facts.py's typed facts) is stored as its dict: the manifest stays JSON and later
        stages read it back through suite/facts.py, the same in a live run and on resume."""
        self.published[key] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value

    def say(self, message: str, done: int | None = None, of: int | None = None) -> None:
        """Progress: what the stage is doing now; with done/of a bar is drawn."""
        self.progress.update(message, done, of)

    def keep(self, rows: Sequence[Row], tag: str | None = None) -> None:
        """Write `rows` to the run directory now (suite/kept_rows.py): a kill at the timeout keeps them.
        `tag`: the launch they came from (its workers' files are then not read again). run()'s return still
        says it all."""
        kept_rows.keep(self.raw_dir, rows, None if tag is None else launch_out_dir(self.raw_dir, tag))

    def time_left(self) -> float | None:
        return None if self.deadline is None else max(1.0, self.deadline - time.monotonic())

    def torchrun(self, module: str, args: Sequence[str] = (), *, tag: str = "", **kwargs) -> LaunchResult:
        """Launch `module` on the profile's ranks with this stage's raw folder; raises LaunchError on a failed
        exit.

        The profile's launcher starts them (suite/launch/forklaunch.py): torchrun, or on the CPU rehearsal the
        ranks forked from a warm process; the workers run the same code either way. A multi-node profile
        launches torchrun on every node (suite/cluster/multilaunch.py)."""
        kwargs.setdefault("timeout_s", self.time_left())
        kept_rows.open_launch(launch_out_dir(self.raw_dir, tag))  # its rows count if the stage is killed
        progress_file = launch_out_dir(self.raw_dir, tag) / WORKER_PROGRESS
        kwargs.setdefault("on_poll", lambda: self._relay_worker_progress(progress_file))
        launch = run_across_nodes if len(self.profile.nodes) > 1 else launch_here  # every node, or this one
        return launch(self.profile, module, args, raw_dir=self.raw_dir, tag=tag, **kwargs)

    def _relay_worker_progress(self, path: Path) -> None:
        """Show what rank 0 last reported through Worker.progress (a sweep's bar)."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        if data != self._last_worker_progress:
            self._last_worker_progress = data
            self.say(data.get("message", ""), data.get("done"), data.get("of"))
