"""Drawn figures kept between renderings: a stage whose data and figure code did not change is not drawn
again.

    images, notes = cached_stage_images(stage, rows, expectations, facts, draw)

Drawing is most of a report's time (matplotlib lays out and draws every tick label); re-rendering a run's
report (`make report`, the tests that open one run's report several times, `reports compare` after it) then
costs its tables and template only. The key is a SHA-256 of the stage's rows, expectations and facts, and of
the code that draws them: every file of the `reports` and `suite` packages (path, size, mtime) and
matplotlib's version. A figure module without a file (one a test installs) is never cached.

Where: $CARDTIME_FIGURE_CACHE, else $XDG_CACHE_HOME/cardtime/figures, else ~/.cache/cardtime/figures;
CARDTIME_FIGURE_CACHE=off draws every time. An unreadable or unwritable cache only means drawing again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

KEEP = 400
"""Entries kept (a rehearsal's report writes ~16, each a few KB to ~30 KB): the oldest beyond it are
removed."""
VERSION = "1"


def cache_dir() -> Path | None:
    chosen = os.environ.get("CARDTIME_FIGURE_CACHE")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cardtime" / "figures"


@functools.lru_cache(maxsize=1)
def code_stamp() -> str:
    """What the drawing depends on besides the data: every file of the reports and suite packages (path, size,
    mtime: any change there draws again) and matplotlib's version."""
    import matplotlib

    import reports
    import suite

    parts = [VERSION, matplotlib.__version__]
    for package in (reports, suite):
        for path in sorted(Path(package.__file__).parent.rglob("*.py")):
            try:
                st = path.stat()
            except OSError:
                continue
            parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(parts)


def key(stage: str, rows, expectations, facts: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for part in (
        stage,
        code_stamp(),
        rows.to_csv(index=False),
        expectations.to_csv(index=False),
        json.dumps(facts, sort_keys=True, default=str),
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def cached_stage_images(
    stage: str,
    rows,
    expectations,
    facts: dict[str, Any],
    module_file: str | None,
    draw: Callable[[], tuple[list, list[str]]],
    image_type,
) -> tuple[list, list[str]]:
    """draw()'s (images, notes), from the cache when the same data was drawn by the same code before."""
    folder = cache_dir()
    if folder is None or not module_file:
        return draw()
    entry = folder / f"{stage}-{key(stage, rows, expectations, facts)}.json"
    try:
        saved = json.loads(entry.read_text())
        return [image_type(**image) for image in saved["images"]], list(saved["notes"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    images, notes = draw()
    if not notes:  # a figure that failed is drawn (and reported) again next time, never remembered
        _store(
            folder,
            entry,
            {
                "images": [{"src": str(i.src), "alt": i.alt, "caption": i.caption} for i in images],
                "notes": notes,
            },
        )
    return images, notes


def _store(folder: Path, entry: Path, payload: dict) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as f:
            json.dump(payload, f)
        os.replace(f.name, entry)
        entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in entries[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # no cache this time: the report is the same, only the next rendering draws again
