"""Draw each stage's figures as soon as the stage ends, while the run goes on: the report then finds them
drawn.

    python -m reports.predraw RUN_DIR    # started by the runner (suite/runner.py); stage names on stdin, one
                                         # a line

Drawing the figures is most of a report's time (matplotlib lays out every tick label: ~10 CPU-s for a
rehearsal's 18 stages). A run has idle CPU between and inside stages (process-group timeouts, sleeps,
a stage's single-threaded set-up), so one drawer process, started once and niced, draws a finished
stage's figures into the figure cache (reports/figures/_cache.py) from the run directory as written,
the same call the report makes. `python -m reports RUN_DIR` at the end then reads them from the
cache; a stage whose figures were not drawn in time (or whose records changed since) is drawn there,
so nothing here decides what the report shows: it only moves work earlier.

It never fails the run: a stage it cannot draw is left to the report, and it stops at end of input.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

NICENESS = 10
"""Below the stages' processes: the drawer takes what the stages leave idle, not their CPU."""


def draw_stage(run_dir: Path, stage: str) -> int:
    """Draw one stage's figures into the cache from the run directory as it is now; how many images."""
    from reports.figures import stage_images
    from reports.runview import load_run

    view = load_run(run_dir)
    if stage not in view.stages():
        return 0
    images, _ = stage_images(stage, view.stage_rows(stage), view.stage_expectations(stage), view.facts)
    return len(images)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m reports.predraw RUN_DIR  (stage names on stdin, one a line)", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    try:
        os.nice(NICENESS)
    except OSError:
        pass  # not allowed to lower itself (an odd container): it draws at the run's priority
    # matplotlib and the figure modules imported once, before the first stage ends
    from reports.figures import (
        warm_up,
    )

    warm_up([])
    for line in sys.stdin:
        stage = line.strip()
        if not stage:
            continue
        try:
            draw_stage(run_dir, stage)
        # the report draws what this could not; the run is never touched
        except Exception as e:  # noqa: BLE001
            print(f"predraw: {stage}: {type(e).__name__}: {e} (the report draws it)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
