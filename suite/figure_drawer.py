"""The run's figure drawer: reports/predraw.py in a process of its own, told each stage's name as it ends.

The report's figures are most of its rendering time; drawn while the run goes on, in CPU the stages
leave idle, the report at the end reads them from the figure cache. The runner starts it for the
rehearsal only (`make rehearse` renders the report here, right after the run). The drawer never touches the
run: if it cannot start, dies or lags, the report simply draws what it did not.

CARDTIME_PREDRAW=off (the tests set it: their runs' reports are rendered by few of them) or
CARDTIME_FIGURE_CACHE=off (nowhere to keep the drawings) starts none.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

STOP_GRACE_S = 0.5
"""At the run's end the drawer is stopped, not waited for: what it has not drawn the report draws on every
core (its sections in parallel workers), where the drawer, niced and alone, would draw it on one."""


class FigureDrawer:
    def __init__(self, process: subprocess.Popen | None):
        self.process = process

    @classmethod
    def start(cls, run_dir: Path) -> "FigureDrawer":
        if "off" in (os.environ.get("CARDTIME_PREDRAW"), os.environ.get("CARDTIME_FIGURE_CACHE")):
            return cls(None)
        root = str(Path(__file__).resolve().parents[1])  # the checkout the run's own code comes from
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
        }
        log = Path(run_dir) / "predraw.log"
        try:
            with log.open("ab") as out:
                # a Ctrl-C meant for the run is the run's
                process = subprocess.Popen(
                    [sys.executable, "-m", "reports.predraw", str(run_dir)],
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=out,
                    text=True,
                    start_new_session=True,
                )
        except OSError:
            return cls(None)
        return cls(process)

    def stage_done(self, name: str) -> None:
        if self.process is None:
            return
        try:
            self.process.stdin.write(name + "\n")
            self.process.stdin.flush()
        except (OSError, ValueError):  # it died: the report draws the rest
            self.process = None

    def stop(self) -> None:
        """End of input, a moment to finish the figure at hand, then stopped (a figure half drawn is not kept:
        the cache writes each entry whole)."""
        if self.process is None:
            return
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
