"""Per-stage report figures, drawn with matplotlib by each stage's own `suite/stages/<stage>/figure.py`; here
the drawing kit those modules share (_plot, _scaling, _svg) and the harness that calls them and caches their
SVG. Imported by reports' own modules (report, predraw, tables, …) and by the stages' figure modules. Each
defines

    def figures(rows: pandas.DataFrame, expectations: pandas.DataFrame, facts: dict) ->
    list[matplotlib.figure.Figure]

(rows and expectations of that stage only, columns as in suite.results; facts as the stages published
them plus "profile"). The report inlines each figure as an SVG data URI. A module that is missing
gives no figures; one that fails to import or raises gives a visible note in its stage's section,
never a failed report.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import traceback
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: the report renders on headless boxes

from matplotlib.figure import Figure  # noqa: E402

from reports.figures._svg import compact_svg  # noqa: E402

# Text as SVG text, in the browser's sans-serif: half the bytes of text drawn as glyph paths, and a
# figure's labels can be searched and copied. A fixed hash salt keeps the SVG's internal ids stable
# from one rendering to the next.
SVG_RC = {"svg.fonttype": "none", "svg.hashsalt": "cardtime", "font.family": ["DejaVu Sans", "sans-serif"]}
URI_SAFE = " !$'()*+,-./:;<=>?@[]^_`{|}~"
"""Characters left as they are in the figure's data URI: all but %, #, &, ", control and non-ASCII ones,
so the SVG's markup passes through an HTML attribute and a URL unchanged (base64 would add a third)."""


@dataclass(frozen=True)
class Image:
    src: str
    """data:image/svg+xml;charset=utf-8,… (percent-encoded where URI_SAFE says; safe in a quoted attribute)"""
    alt: str
    caption: str = ""
    """One sentence under the figure: what good looks like (from _plot.finish)."""


@dataclass
class StageFigures:
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Why some or all figures are missing (a module that raised), shown in the section."""


def module_name(stage: str) -> str:
    """A stage's figure module lives in its folder: suite/stages/<stage>/figure.py."""
    return f"suite.stages.{stage}.figure"


def has_module(stage: str) -> bool:
    try:
        return importlib.util.find_spec(module_name(stage)) is not None
    except ModuleNotFoundError:  # no such stage folder (an old run's stage): no figures
        return False


def stage_figures(stage: str, rows, expectations, facts: dict[str, Any]) -> StageFigures:
    """Call suite/stages/<stage>/figure.py's figures(); every failure becomes a note naming the module and the
    error."""
    out = StageFigures()
    if not has_module(stage):
        return out
    where = f"suite/stages/{stage}/figure.py"
    try:
        module = importlib.import_module(module_name(stage))
        produced = list(module.figures(rows.copy(), expectations.copy(), facts))
    except Exception as e:  # noqa: BLE001 - one broken figure module must not take the report down
        out.notes.append(f"figures unavailable: {where} raised {type(e).__name__}: {e} (at {_last_frame(e)})")
        return out
    for index, item in enumerate(produced):
        if isinstance(item, Figure):
            out.figures.append(item)
        else:
            out.notes.append(
                f"{where} returned a {type(item).__name__} as figure {index + 1}, not a matplotlib Figure"
            )
    return out


def stage_images(stage: str, rows, expectations, facts: dict[str, Any]) -> tuple[list[Image], list[str]]:
    """The stage's figures drawn as inline images, and the notes saying why any are missing; from the figure
    cache (_cache.py) when this data was drawn by this code before."""
    from markupsafe import Markup

    from reports.figures._cache import cached_stage_images

    try:
        module = importlib.import_module(module_name(stage)) if has_module(stage) else None
    except Exception:  # noqa: BLE001 - drawn (and the failure noted) by stage_figures, never cached
        module = None
    read = facts_read(module, facts)  # drawn from exactly what the cache's key holds

    def draw() -> tuple[list[Image], list[str]]:
        made = stage_figures(stage, rows, expectations, read)
        images, notes = [], list(made.notes)
        for i, fig in enumerate(made.figures, start=1):
            image, note = render(fig, f"{stage} figure {i}")
            images += [image] if image else []
            notes += [note] if note else []
        return images, notes

    def image(**saved) -> Image:
        # stored as drawn: already safe in an attribute
        return Image(**{**saved, "src": Markup(saved["src"])})

    return cached_stage_images(
        stage, rows, expectations, read, getattr(module, "__file__", None), draw, image
    )


def facts_read(module, facts: dict[str, Any]) -> dict[str, Any]:
    """Only the facts a figure module declares it reads (its FACTS), so that its figures, drawn as soon as
    the stage ends (reports/predraw.py), keep their cache key when later stages publish more; every fact
    for a module that declares nothing."""
    declared = getattr(module, "FACTS", None)
    if declared is None:
        return facts
    return {k: facts[k] for k in declared if k in facts}


def warm_up(stages: list[str]) -> None:
    """Import the stages' figure modules and draw one text: work forked workers then inherit instead of
    repeating."""
    for stage in stages:
        try:
            if has_module(stage):
                importlib.import_module(module_name(stage))
        except Exception:  # noqa: BLE001 - stage_figures reports the failure in the stage's section
            pass
    fig = Figure(figsize=(1, 1))
    fig.text(0.5, 0.5, "µs GiB")
    with matplotlib.rc_context(SVG_RC):
        fig.savefig(io.BytesIO(), format="svg")


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
    # A figure laid out by _plot.finish (tight_layout) is saved as it is: a second tight bounding box
    # would draw every text once more, the largest cost of the report. Others are trimmed here.
    tight = {} if getattr(fig, "laid_out", False) else {"bbox_inches": "tight"}
    with matplotlib.rc_context(SVG_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None}, **tight)
    alt = describe(fig, fallback_alt)
    caption = str(getattr(fig, "caption", "") or "")
    close(fig)
    return Image(src=svg_uri(buf.getvalue()), alt=alt, caption=caption)


def svg_uri(svg: bytes) -> str:
    """The SVG as a data URI, marked safe for the template: URI_SAFE holds no character that could end a
    quoted attribute or start a character reference, so escaping it again would only make it longer."""
    from markupsafe import Markup

    return Markup(
        "data:image/svg+xml;charset=utf-8,"
        + urllib.parse.quote(compact_svg(svg.decode("utf-8")), safe=URI_SAFE)
    )


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
