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

FINISH_S = 60.0
"""How long the run's end waits for the drawer to finish the last stages' figures: that is work the report
would otherwise do right after (on a rehearsal a few seconds); a drawer slower than this is stopped."""


class FigureDrawer:
    def __init__(self, process: subprocess.Popen | None):
        self.process = process

    @classmethod
    def start(cls, run_dir: Path) -> "FigureDrawer":
        if "off" in (os.environ.get("CARDTIME_PREDRAW"), os.environ.get("CARDTIME_FIGURE_CACHE")):
            return cls(None)
        root = str(Path(__file__).resolve().parents[1])  # the checkout the run's own code comes from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        log = Path(run_dir) / "predraw.log"
        try:
            with log.open("ab") as out:
                process = subprocess.Popen([sys.executable, "-m", "reports.predraw", str(run_dir)], env=env,
                                           stdin=subprocess.PIPE, stdout=out, stderr=out, text=True,
                                           start_new_session=True)  # a Ctrl-C meant for the run is the run's
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

    def close(self, finish: bool = True) -> None:
        """End of input; wait for the last figures when finish (a run that ended), else stop it now (a run
        interrupted or broken: nobody is waiting for its report)."""
        if self.process is None:
            return
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=FINISH_S if finish else 0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
