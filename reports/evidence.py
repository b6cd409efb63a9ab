"""The first screen's evidence for a failed or hung run: the hang forensics' line and table per launch
(raw/<stage>/[<tag>.]forensics.json, suite/forensics/collect.py) and the evidence bundle to attach to the
provider's ticket (bundle-*.tar.gz, suite/forensics/bundle.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from suite.forensics.bundle import latest
from suite.forensics.collect import RESULT

COLUMNS = ("host", "rank", "pg", "last_completed", "first_pending", "where", "heard")


@dataclass
class Hang:
    stage: str
    launch: str
    line: str
    reason: str
    rows: list[dict]
    href: str


def hangs(run: Path, href, failed: set[str]) -> list[Hang]:
    """The forensics of the launches of the stages that failed, in stage then launch order (a stage that
    passed keeps its readings, the fault drills' own among them, in its raw folder); `href(path)` links."""
    out = []
    for path in sorted(p for stage in failed for p in (run / "raw" / stage).glob(f"**/*{RESULT}")):
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        stage = path.relative_to(run / "raw").parts[0]
        launch = path.name[: -len(RESULT)].rstrip(".") or "launch"
        rows = [{c: r.get(c, "") for c in COLUMNS} for r in found.get("rows", [])]
        out.append(
            Hang(stage, launch, str(found.get("line", "")), str(found.get("reason", "")), rows, href(path))
        )
    return out


def bundle(run: Path, href) -> tuple[str, str] | None:
    """(file name, link) of the run's newest evidence bundle."""
    path = latest(run)
    return None if path is None else (path.name, href(path))
