"""`suite share RUN`: a run's summary as a file others can import; `suite library import FILE…`: theirs.

    path = share(Path("runs/20261208T0133Z-box-nccl-gpu"), labels={"provider": "lambda"})  # RUN/summary.json

The file is the summary of summary.py (schema `cardtime.summary/1`, docs/library.md) with its digest. Labels
(provider, region, price) go in only when given. As a last guard the written text passes the evidence
bundle's redactor with host scrubbing on: credentials, the run's host names and every IPv4 address are
replaced, should a verdict id or a version text ever carry one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from suite.forensics.redact import Redactor, run_hosts
from suite.library import index
from suite.library.summary import digest, problem, summarize


def share(run_dir: Path, out: Path | None = None, labels: Mapping[str, Any] | None = None) -> Path:
    run_dir = Path(run_dir)
    summary = summarize(run_dir, labels)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    text = Redactor(scrub_hosts=True, hosts=run_hosts(manifest)).text(
        json.dumps(summary, indent=1, sort_keys=True)
    )
    scrubbed = json.loads(text)
    scrubbed["digest"] = digest(scrubbed)  # the digest of what is written
    path = Path(out) if out else run_dir / "summary.json"
    path.write_text(json.dumps(scrubbed, indent=1, sort_keys=True) + "\n")
    return path


def import_files(library: Path, files: list[Path]) -> list[tuple[Path, str | None]]:
    """Each file imported, or refused with why (one line): not JSON, another schema, a digest that does not
    match, a run the library already holds. (path, None) for an import."""
    out = []
    with index.opened(library) as db:
        for path in files:
            try:
                summary = json.loads(Path(path).read_text())
            except (OSError, ValueError) as e:
                out.append((path, f"not readable as JSON: {e}"))
                continue
            if why := problem(summary):
                out.append((path, why))
                continue
            try:
                index.add(db, summary, origin="imported", path=str(path), replace=False)
            except index.Duplicate as e:
                out.append((path, str(e)))
                continue
            out.append((path, None))
    return out
