"""How every stage figure draws what was measured beside what the model predicted, so all figures read alike.

    fig, ax = new_figure(8, 4)
    measured_vs_model(ax, {1: 1.0, 2: 1.8, 4: 3.1}, {1: 1, 2: 2, 4: 4}, model_label="ideal (d×)")
    limit(ax, 0.2, "floor 20%")
    style(ax, title="Speedup", xlabel="TP degree", ylabel="speedup", logx=2)
    return finish(fig, "Tensor parallelism")

The house style: measured solid with markers, the model dashed (grey unless it is paired with one
measured series by colour), a limit or tolerance as a horizontal dashed line, light grid, small legend.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from matplotlib import ticker
from matplotlib.figure import Figure

from suite import headlines

GRID_ALPHA = 0.3
LEGEND_SIZE = 7
MODEL_COLOUR = "grey"
MAX_LOG_TICKS = 5
"""Labelled ticks on a log axis: a sweep over 2²…2³⁰ bytes gets a label every few powers, not 28 crowded
ones."""
SOURCE_COLOUR = {"torch": "C0", "nccl-tests": "C1", "hand": "C2", "model": MODEL_COLOUR, "α-β": MODEL_COLOUR}
"""One colour per source in every figure: torch blue, nccl-tests orange, hand green, the model grey."""


def source_colour(source: str | None, fallback: str | None = None) -> str | None:
    return SOURCE_COLOUR.get(str(source), fallback)


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def plain_power(x: float, base: int) -> str:
    """A log tick as plain text: 64, 1024, 0.01 as they are; 10⁻⁸ and 2⁻³ beyond. matplotlib's own labels
    (10^{-8} in mathtext) are parsed by pyparsing for every tick: a tenth of the report's drawing time."""
    if x <= 0:
        return ""
    power = round(math.log(x, base))
    if base == 2:
        return f"{x:g}" if x >= 1 else f"2{str(power).translate(SUPERSCRIPT)}"
    return f"{x:g}" if 1e-2 <= x < 1e5 else f"{base}{str(power).translate(SUPERSCRIPT)}"


def sparse_log_ticks(axis, base: int) -> None:
    """At most MAX_LOG_TICKS labelled powers, plain-text labels and no minor ticks: readable, and each tick is
    drawn text to pay for."""
    axis.set_major_locator(ticker.LogLocator(base=base, numticks=MAX_LOG_TICKS))
    axis.set_major_formatter(ticker.FuncFormatter(lambda x, _: plain_power(x, base)))
    axis.set_minor_locator(ticker.NullLocator())


LINEAR_TICKS = 5
"""Labelled ticks at most on a linear axis (matplotlib's default gives up to ten): enough to read a value off,
and each tick is two marks, a grid line and a label to lay out and draw."""


def fewer_linear_ticks(ax) -> None:
    for axis in (ax.xaxis, ax.yaxis):
        if type(axis.get_major_locator()) is ticker.AutoLocator:
            axis.set_major_locator(ticker.MaxNLocator(nbins=LINEAR_TICKS, steps=[1, 2, 2.5, 5, 10]))


def log_axis(ax, which: str, base: int = 10, unit: str | None = None) -> None:
    """ax's x or y axis on a log scale, its ticks in human units (unit "bytes", "us") or plain powers."""
    getattr(ax, f"set_{which}scale")("log", base=base)
    axis = ax.xaxis if which == "x" else ax.yaxis
    human_units(axis, unit, base) if unit else sparse_log_ticks(axis, base)


def human_units(axis, unit: str, base: int) -> None:
    """Log-axis ticks in the units a person reads: 4 KiB, 1 MiB (unit "bytes"); 850 µs, 12 ms, 2 s (unit
    "us")."""
    sparse_log_ticks(axis, base)
    if unit == "bytes":
        axis.set_major_formatter(ticker.FuncFormatter(lambda x, _: headlines.size(x) if x >= 1 else ""))
    elif unit == "us":
        axis.set_major_formatter(
            ticker.FuncFormatter(lambda x, _: headlines.seconds(x * 1e-6) if x > 0 else "")
        )


Series = Mapping[Any, float] | tuple[Sequence[float], Sequence[float]]
"""{x: y}, or (xs, ys)."""


def new_figure(width: float, height: float, rows: int = 1, cols: int = 1, **subplots) -> tuple[Figure, Any]:
    """A figure not tied to pyplot (nothing to close by hand) and its axes, as Figure.subplots returns
    them."""
    fig = Figure(figsize=(width, height))
    return fig, fig.subplots(rows, cols, **subplots)


def _xy(series: Series) -> tuple[list, list]:
    if isinstance(series, Mapping):
        return list(series), list(series.values())
    xs, ys = series
    return list(xs), list(ys)


def measured(ax, series: Series, label: str = "measured", **line) -> None:
    """A measured series: solid, a marker at every point (pass linestyle="none" for points only)."""
    line.setdefault("marker", "o")
    ax.plot(*_xy(series), label=label, **line)


def model(ax, series: Series, label: str = "model", **line) -> None:
    """The model's prediction: dashed, grey unless `color` pairs it with a measured series."""
    line.setdefault("linestyle", "--")
    line.setdefault("color", MODEL_COLOUR)
    ax.plot(*_xy(series), label=label, **line)


def measured_vs_model(
    ax,
    measured_series: Series | None,
    model_series: Series | None = None,
    *,
    label: str = "measured",
    model_label: str = "model",
    color: str | None = None,
    model_marker: str | None = None,
    points: bool = False,
) -> None:
    """Both series on one axes; either may be empty (nothing drawn for it). `color` gives the pair one
    colour."""
    if measured_series is not None and len(measured_series):
        measured(
            ax,
            measured_series,
            label,
            **({"color": color} if color else {}),
            **({"linestyle": "none"} if points else {}),
        )
    if model_series is not None and len(model_series):
        model(
            ax,
            model_series,
            model_label,
            color=color or MODEL_COLOUR,
            **({"marker": model_marker} if model_marker else {}),
        )


def limit(ax, y: float, label: str, color: str = "red", linestyle: str = "--") -> None:
    """A threshold the measurement is held to (a tolerance, a floor), across the whole axes."""
    ax.axhline(y, color=color, linestyle=linestyle, label=label)


def grouped_bars(
    ax, positions: Sequence[float], groups: Sequence[tuple[str, Sequence[float], str | None]], width: float
) -> None:
    """One bar per group at each position, side by side and centred on it: (label, heights, colour or
    None)."""
    n = len(groups)
    for i, (label, heights, colour) in enumerate(groups):
        offset = (i - (n - 1) / 2) * width
        ax.bar([p + offset for p in positions], list(heights), width=width, label=label, color=colour)


def style(
    ax,
    *,
    title: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    logx: int | None = None,
    logy: bool = False,
    xticks: Sequence[float] | None = None,
    xticklabels: Sequence[str] | None = None,
    grid: str | None = "both",
    legend: int | None = LEGEND_SIZE,
    xunit: str | None = None,
    yunit: str | None = None,
    **legend_options,
) -> None:
    """Scales, labels, ticks (after the scale, which would reset them), grid and legend of one axes.
    xunit/yunit ("bytes", "us") label a log axis in human units (human_units)."""
    if logx:
        log_axis(ax, "x", logx, xunit)
    if logy:
        log_axis(ax, "y", 10, yunit)
    if xticks is not None:
        ax.set_xticks(list(xticks))
    if xticklabels is not None:
        ax.set_xticklabels(list(xticklabels))
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if grid:
        ax.grid(True, axis=grid, alpha=GRID_ALPHA)
    if legend:
        ax.legend(fontsize=legend, **legend_options)


def finish(fig: Figure, title: str | None = None, caption: str | None = None) -> Figure:
    """The figure's title, its caption (one sentence: what good looks like; the report prints it under the
    figure), and the layout tightened so no label is cut off."""
    if title:
        fig.suptitle(title)
    if caption:  # else a caption the figure module set itself (fig.caption = …), or none
        fig.caption = caption
    for ax in fig.get_axes():
        fewer_linear_ticks(ax)
    fig.tight_layout()
    fig.laid_out = True  # reports.figures.to_image then skips a second, costly tight bounding box
    return fig
