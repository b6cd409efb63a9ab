"""`suite run --resume` of an ingested run: its unfinished stages judged from the captures it kept under raw/,
never run on this machine — which is not the box the captures came from.

An ingest cut short (Ctrl-C, a full disk, a killed shell) leaves a run directory whose manifest says
`ingested` from its first write (suite/ingest/feed.py `build`). Its kept copies are read again as `suite
ingest` read the originals; a capture kept for two stages (`nvidia-smi -q` feeds topology and health) is read
once."""

from __future__ import annotations

import hashlib
from typing import Any

from suite.ingest import feed, inputs
from suite.results import RunDir


class ResumeError(ValueError):
    pass


def kept_captures(run: RunDir) -> list[inputs.Capture]:
    files, _ = inputs.files_of([run.path / "raw"])  # the stages' own hidden records left out
    seen: set[str] = set()
    captures: list[inputs.Capture] = []
    for path in files:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        got = inputs.read(path)
        if not isinstance(got, inputs.Unused):
            captures += got
    return captures


def producers(run: RunDir) -> dict[str, Any]:
    """What makes each unfinished stage's rows from the kept captures (the runner's `produce`); a stage whose
    captures are gone is refused, naming it, rather than run here."""
    plan = feed.assign(kept_captures(run))
    pending = [s for s in run.manifest["stages_selected"] if run.stage_state(s)["status"] != "complete"]
    lost = [s for s in pending if s not in plan.feeds]
    if lost:
        raise ResumeError(
            f"{run.path}/raw no longer holds the captures of {', '.join(lost)}: ingest the original "
            "files again into a new run (python -m suite ingest FILE_OR_DIR…)"
        )
    ingested = run.manifest["ingested"]
    _, made, start_facts = feed.produce(
        plan, ingested.get("gpu_model") if isinstance(ingested, dict) else None
    )
    for key, value in start_facts.items():  # cut short before the first facts were saved
        run.facts().setdefault(key, value)
    return made
