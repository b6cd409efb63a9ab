"""Topology figures: the GPU×GPU link matrix (and GPU×NIC paths) coloured by link type, as `nvidia-smi topo
-m` reads.

Colours run from fast to slow: NVLink in greens (darker = more bonded links), then PIX, PXB, PHB, NODE,
SYS/SOC from blue to red — on a box with NVLink, where a pair off NVLink is wrong. On a PCIe box (no NV# pair)
the paths across the CPU sockets (NODE, SYS) are how the board is built, and the topology check passes them:
they are drawn in neutral greys, red kept for what is wrong. CPU runs have no link rows and get no figure.
"""

from __future__ import annotations

import re

from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from reports.figures._plot import finish, new_figure

FACTS: tuple[str, ...] = ("topology",)
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

# Path types slowest last, with a colour each (NVLink shades are added per bonded count).
PATH_COLOURS = {
    "PIX": "#9ecae1",
    "PXB": "#6baed6",
    "PHB": "#fdd49e",
    "NODE": "#fc8d59",
    "SYS": "#d7301f",
    "SOC": "#d7301f",
}
PCIE_BOX_COLOURS = {"PHB": "#c6dbef", "NODE": "#d9d9d9", "SYS": "#bdbdbd", "SOC": "#bdbdbd"}
"""A PCIe box's slower paths: normal for its board, so not drawn as alarms."""
SELF_COLOUR = "#f0f0f0"
NV_SHADES = ("#c7e9c0", "#a1d99b", "#74c476", "#41ab5d", "#238b45", "#006d2c")
_NV = re.compile(r"NV(\d+)")


def figures(rows, expectations, facts) -> list[Figure]:
    links = rows[rows["metric"] == "link"] if len(rows) else rows
    if links is None or not len(links):
        return []
    out = [_matrix(dict(zip(links["case"], links["text"])), facts, nics=False)]
    nic_rows = rows[rows["metric"] == "nic_link"]
    if len(nic_rows):
        out.append(_matrix(dict(zip(nic_rows["case"], nic_rows["text"])), facts, nics=True))
    return out


def _order(names) -> list[str]:
    return sorted(
        set(names),
        key=lambda n: (
            re.sub(r"\d+$", "", n),
            int(re.search(r"(\d+)$", n).group(1)) if re.search(r"(\d+)$", n) else 0,
        ),
    )


def _colours(texts, pcie_box: bool = False) -> dict[str, str]:
    nv = sorted({t for t in texts if _NV.fullmatch(t)}, key=lambda t: int(t[2:]))
    shade = {
        t: NV_SHADES[
            min(
                len(NV_SHADES) - 1,
                round(i * (len(NV_SHADES) - 1) / max(1, len(nv) - 1)) if len(nv) > 1 else len(NV_SHADES) - 2,
            )
        ]
        for i, t in enumerate(nv)
    }
    paths = {**PATH_COLOURS, **PCIE_BOX_COLOURS} if pcie_box else PATH_COLOURS
    other = {t: paths.get(t, "#bdbdbd") for t in texts if t not in shade}
    return {**shade, **other, "X": SELF_COLOUR}


def _matrix(pairs: dict[str, str], facts: dict, nics: bool) -> Figure:
    left = _order(p.split("-", 1)[0] for p in pairs)
    top = _order(p.split("-", 1)[1] for p in pairs)
    if not nics:
        left = top = _order(left + top)
    cell = {}
    for pair, text in pairs.items():
        a, b = pair.split("-", 1)
        cell[(a, b)] = text
        if not nics:
            cell[(b, a)] = text
    for g in left if not nics else []:
        cell[(g, g)] = "X"
    texts = sorted(set(cell.values()))
    pcie_box = not nics and not any(_NV.fullmatch(t) for t in texts)
    colours = _colours(texts, pcie_box)
    index = {t: i for i, t in enumerate(texts)}
    grid = [[index.get(cell.get((a, b), ""), -1) for b in top] for a in left]
    cmap = ListedColormap([colours[t] for t in texts])

    size = max(3.5, 0.55 * len(top) + 2.0)
    fig, ax = new_figure(size, max(3.0, 0.45 * len(left) + 1.6))
    ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=len(texts) - 0.5, aspect="auto")
    for i, a in enumerate(left):
        for j, b in enumerate(top):
            text = cell.get((a, b))
            if text is not None:
                ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(top)), top, rotation=90 if nics else 0, fontsize=8)
    ax.set_yticks(range(len(left)), left, fontsize=8)
    ax.tick_params(length=0)
    topology = facts.get("topology") or {}
    model = topology.get("gpu_model")
    if nics:
        legend = topology.get("nic_legend") or {}
        if legend:
            ax.set_xticks(
                range(len(top)), [f"{n}\n{legend.get(n, '')}" for n in top], rotation=90, fontsize=7
            )
        ax.set_title("GPU → NIC paths (nvidia-smi topo -m)", fontsize=10)
    else:
        kind = topology.get("box")
        ax.set_title(
            f"GPU × GPU links{f' — {model}' if model else ''}{f' ({kind})' if kind else ''}", fontsize=10
        )
    handles = [Patch(facecolor=colours[t], edgecolor="#999999", label=t) for t in texts if t != "X"]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    if pcie_box:
        return finish(
            fig,
            caption="A PCIe box (no NVLink): pairs on one PCIe switch (PIX/PXB) are fastest; pairs "
            "across the CPU sockets (NODE/SYS, grey) are how the board is built, slower but not "
            "wrong.",
        )
    return finish(
        fig,
        caption="Good: one link type between every GPU pair (NV# on an NVLink box), and each GPU's "
        "NIC on its own PCIe switch (PIX).",
    )
