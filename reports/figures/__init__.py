"""Per-stage report figures: `reports/figures/<stage>.py` defines

    def figures(rows: pandas.DataFrame, expectations: pandas.DataFrame, facts: dict) -> list[matplotlib.figure.Figure]

(rows and expectations of that stage only, columns as in suite.results; facts as the stages published
them plus "profile"). The report inlines each figure as an SVG data URI. A module that is missing
gives no figures; one that fails to import or raises gives a visible note in its stage's section,
never a failed report.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import io
import traceback
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: the report renders on headless boxes

from matplotlib.figure import Figure  # noqa: E402

# Text as paths: the figure looks the same in any browser, with or without the fonts matplotlib used.
# A fixed hash salt keeps the SVG's internal ids stable from one rendering to the next.
SVG_RC = {"svg.fonttype": "path", "svg.hashsalt": "cardtime"}


@dataclass(frozen=True)
class Image:
    src: str
    """data:image/svg+xml;base64,…"""
    alt: str


@dataclass
class StageFigures:
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Why some or all figures are missing (a module that raised), shown in the section."""


def module_name(stage: str) -> str:
    return f"{__name__}.{stage}"


def has_module(stage: str) -> bool:
    return importlib.util.find_spec(module_name(stage)) is not None


def stage_figures(stage: str, rows, expectations, facts: dict[str, Any]) -> StageFigures:
    """Call reports/figures/<stage>.py's figures(); every failure becomes a note naming the module and the error."""
    out = StageFigures()
    if not has_module(stage):
        return out
    where = f"reports/figures/{stage}.py"
    try:
        module = importlib.import_module(module_name(stage))
        produced = list(module.figures(rows.copy(), expectations.copy(), facts))
    except Exception as e:  # noqa: BLE001 - one broken figure module must not take the report down
        out.notes.append(f"figures unavailable: {where} raised {type(e).__name__}: {e} "
                         f"(at {_last_frame(e)})")
        return out
    for index, item in enumerate(produced):
        if isinstance(item, Figure):
            out.figures.append(item)
        else:
            out.notes.append(f"{where} returned a {type(item).__name__} as figure {index + 1}, not a matplotlib Figure")
    return out


def _last_frame(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno}"


def describe(fig: Figure, fallback: str) -> str:
    """A figure's alt text: its suptitle, else its axes' titles, else the fallback."""
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text().strip():
        return suptitle.get_text().strip()
    titles = [ax.get_title().strip() for ax in fig.get_axes() if ax.get_title().strip()]
    return "; ".join(titles) if titles else fallback


def to_image(fig: Figure, fallback_alt: str) -> Image:
    """The figure as an inline SVG data URI; the figure is closed afterwards (pyplot keeps none alive)."""
    buf = io.BytesIO()
    with matplotlib.rc_context(SVG_RC):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    alt = describe(fig, fallback_alt)
    close(fig)
    return Image(src="data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii"), alt=alt)


def render(fig: Figure, fallback_alt: str) -> tuple[Image | None, str | None]:
    """to_image, turning a failure to draw (a bad value deep in matplotlib) into a note."""
    try:
        return to_image(fig, fallback_alt), None
    except Exception as e:  # noqa: BLE001
        close(fig)
        return None, f"{fallback_alt} could not be drawn: {type(e).__name__}: {e}"


def close(fig: Figure) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)
