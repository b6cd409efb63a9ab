"""The facts a live run sizes its stages with, obtained on this box the way the run obtains them.

    facts = live_facts(profile, tmp_path)     # {"profile": …, "topology": {gpu_memory_bytes, …}, "versions":
                                              # …}
    cfg = pp.pp_model(profile, facts)         # then every stage sizes itself exactly as in `suite run`

A run's stages size their model, batch, sequence and sweep to the smallest card (suite/hardware/card_fit.py,
stage_fit.py), whose memory the topology stage reads from `nvidia-smi -q`. So this runs the topology stage
itself (its nvidia-smi capture, its rows_from_smi) and hands on what it published beside the profile, as the
runner hands later stages: no second reading of the card, no second formula. Without nvidia-smi the facts
hold no card and the stages keep the profile's sizes, as a live run would.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def live_facts(profile, tmp_path: Path) -> dict[str, Any]:
    """The topology stage run on this box (raw outputs under tmp_path/raw/topology/) → the facts later stages
    read."""
    from suite.context import StageContext
    from suite.progress import Progress
    from suite.stages import topology

    raw = tmp_path / "raw" / "topology"
    raw.mkdir(parents=True, exist_ok=True)
    ctx = StageContext(
        stage="topology",
        profile=profile,
        run_path=tmp_path,
        raw_dir=raw,
        facts={},
        progress=Progress(tmp_path, 1, stream=io.StringIO()),
    )
    topology.run(profile, ctx)
    return {"profile": profile.to_dict(), **ctx.published}


def stage_context(profile, stage: str, tmp_path: Path, facts: dict[str, Any], **kw):
    """A StageContext for `stage` holding the facts, as the runner builds it after topology."""
    from suite.context import StageContext
    from suite.progress import Progress

    raw = tmp_path / "raw" / stage
    raw.mkdir(parents=True, exist_ok=True)
    return StageContext(
        stage=stage,
        profile=profile,
        run_path=tmp_path,
        raw_dir=raw,
        facts=facts,
        progress=Progress(tmp_path, 1, stream=kw.pop("stream", None) or io.StringIO()),
        **kw,
    )
