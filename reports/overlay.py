"""Overlay the same figure of several runs: the other runs' lines, points and bars drawn into the first run's
axes.

Works on any stage's figures without knowing what they show: two figures overlay when they have the
same number of axes and no images (a GPU×GPU matrix cannot be overlaid; it is shown side by side).
The first run keeps its drawing; each other run is drawn in the same colours, thick and translucent,
with its own marker, and labelled "(b)", "(c)" in the legend. Reference lines drawn in axes
coordinates (axhline, axvline) are the first run's only.
"""

from __future__ import annotations

from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from reports.figures import close

RUN_MARKERS = ("o", "s", "^", "D", "v", "P")
RUN_HATCHES = ("", "//", "\\\\", "xx", "..", "++")


def overlayable(base: Figure, partners: list[Figure | None]) -> bool:
    if any(p is None for p in partners):
        return False
    axes = [base.get_axes()] + [p.get_axes() for p in partners]
    if len({len(a) for a in axes}) != 1:
        return False
    return not any(ax.images for group in axes for ax in group)


def how_drawn(labels: list[str]) -> str:
    return "; ".join(
        [f"{labels[0]}: as drawn"]
        + [
            f"{label}: thick translucent, marker {RUN_MARKERS[i % len(RUN_MARKERS)]!r}"
            for i, label in enumerate(labels[1:], start=1)
        ]
    )


def overlay(base: Figure, partners: list[Figure | None], labels: list[str]) -> list[tuple[Figure, str]]:
    """[(figure, how to read it)]: one overlaid figure, or every run's own figure side by side."""
    if not overlayable(base, partners):
        return [(base, f"run {labels[0]}")] + [
            (p, f"run {label}") for p, label in zip(partners, labels[1:]) if p is not None
        ]
    for ax in base.get_axes():
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                line.set_label(f"{line.get_label()} ({labels[0]})")
    for i, (partner, label) in enumerate(zip(partners, labels[1:]), start=1):
        for ax, other in zip(base.get_axes(), partner.get_axes()):
            draw_into(ax, other, label, i)
        close(partner)
    for ax in base.get_axes():
        ax.relim()
        ax.autoscale_view()
        handles, names = ax.get_legend_handles_labels()
        if handles:
            ax.legend(fontsize="x-small")
    return [(base, how_drawn(labels))]


def draw_into(ax, other, label: str, index: int) -> None:
    marker = RUN_MARKERS[index % len(RUN_MARKERS)]
    for line in other.get_lines():
        if line.get_transform() != other.transData:
            continue  # axhline/axvline: drawn in axes coordinates; the first run's stands for all
        name = line.get_label()
        ax.plot(
            line.get_xdata(),
            line.get_ydata(),
            color=line.get_color(),
            linestyle=line.get_linestyle(),
            linewidth=max(2.5, 2 * line.get_linewidth()),
            alpha=0.45,
            marker=marker,
            markersize=4,
            label="_nolegend_" if name.startswith("_") else f"{name} ({label})",
        )
    for collection in other.collections:
        if isinstance(collection, PathCollection) and len(collection.get_offsets()):
            offsets = collection.get_offsets()
            colors = collection.get_facecolor()
            ax.scatter(
                offsets[:, 0],
                offsets[:, 1],
                marker=marker,
                alpha=0.45,
                color=colors if len(colors) else None,
                label=f"points ({label})",
            )
    first = True
    for patch in other.patches:
        if isinstance(patch, Rectangle) and patch.get_data_transform() == other.transData:
            ax.add_patch(
                Rectangle(
                    patch.get_xy(),
                    patch.get_width(),
                    patch.get_height(),
                    fill=False,
                    edgecolor=patch.get_facecolor(),
                    linewidth=1.5,
                    hatch=RUN_HATCHES[index % len(RUN_HATCHES)],
                    label=f"bars ({label})" if first else "_nolegend_",
                )
            )
            first = False
