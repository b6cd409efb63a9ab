"""matplotlib's SVG made small enough to inline a few dozen figures in one page: the same picture, a third of
the bytes.

    compact_svg(svg_text) -> svg_text

matplotlib writes every element's full style inline (a tick label carries the whole font-family list, each
marker its fill and stroke), wraps each artist in attribute-less groups, writes coordinates to six decimals
and names ids by 10-digit hashes. In a rehearsal's report that was half of the page's bytes. Here:

- each distinct style becomes one class rule in the SVG's own style sheet (an <img>'s SVG is a document of
  its own, so the names cannot meet the page's); a clip-path joins the style it sits beside;
- groups without attributes are dropped (they change nothing), with their closing tags;
- coordinates (path data, positions, sizes) keep one decimal: 0.1 pt, a tenth of a pixel at 96 dpi;
  never a label's text, never a transform's scale;
- ids are renamed i0, i1, … (every reference renamed with them);
- a rotation by 0° is dropped, and attributes are single-quoted (a double quote costs three bytes in the URI).
"""

from __future__ import annotations

import re
from collections import Counter

START_TAG = re.compile(r"<([\w:]+)((?:\s[\w:-]+=\"[^\"]*\")*)\s*(/?)>")
ATTRIBUTE = re.compile(r'\s([\w:-]+)="([^"]*)"')
GROUP_TAG = re.compile(r"<g(\s[^>]*?)?(/?)>|</g>")
COORDINATE_ATTRIBUTES = {"d", "x", "y", "x1", "x2", "y1", "y2", "width", "height", "points", "cx", "cy", "r"}
DECIMAL = re.compile(r"-?\d+\.\d+")
PATH_COMMAND = re.compile(r"\s*([MLHVCSQTAZmlhvcsqtaz])\s*")
NO_ROTATION = re.compile(r"^rotate\(-?0(?:\.0+)? [^)]*\)$")
FONT_FAMILY = re.compile(r"\s?font-family: ([^;}]*);?")
ID = re.compile(r'\sid="([^"]+)"')


def _decimal(match: re.Match) -> str:
    text = f"{float(match[0]):.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _coordinates(name: str, value: str) -> str:
    value = DECIMAL.sub(_decimal, " ".join(value.split()))
    return PATH_COMMAND.sub(r"\1", value) if name == "d" else value


def _class_names():
    letters = "abcdefghijklmnopqrstuvwxyz"
    for c in letters:
        yield c
    for a in letters:
        for b in letters:
            yield a + b


def _parse(attributes: str) -> list[tuple[str, str]]:
    return ATTRIBUTE.findall(attributes)


def _styles(svg: str) -> dict[str, str]:
    """Each style used (clip-path folded in) → its class name, the most used first (the shortest names)."""
    used = Counter()
    for tag in START_TAG.finditer(svg):
        attributes = dict(_parse(tag[2]))
        style = "" if "class" in attributes else _style_of(attributes)
        if style:
            used[style] += 1
    return dict(zip((s for s, _ in used.most_common()), _class_names()))


def _style_of(attributes: dict[str, str]) -> str:
    style = attributes.get("style", "")
    if "clip-path" in attributes:
        style = f"clip-path: {attributes['clip-path']}" + (f"; {style}" if style else "")
    return style


def _rename_ids(svg: str) -> str:
    for i, old in enumerate(dict.fromkeys(ID.findall(svg))):
        new = f"i{i}"
        svg = (
            svg.replace(f'id="{old}"', f'id="{new}"')
            .replace(f"#{old})", f"#{new})")
            .replace(f'"#{old}"', f'"#{new}"')
        )
    return svg


def _drop_bare_groups(svg: str) -> str:
    kept: list[bool] = []

    def one(match: re.Match) -> str:
        if match[0] == "</g>":
            return "</g>" if (kept.pop() if kept else True) else ""
        if match[2]:  # an empty group, <g id='i1'/>: it opens nothing that a </g> would close
            return match[0]
        keep = bool(match[1] and match[1].strip())
        kept.append(keep)
        return match[0] if keep else ""

    return GROUP_TAG.sub(one, svg)


def _hoist_font_family(svg: str) -> str:
    """Every text's font-family list (the same in every figure) said once, in a rule for all text."""
    families = set(FONT_FAMILY.findall(svg))
    if len(families) != 1:
        return svg
    return FONT_FAMILY.sub("", svg).replace("</style>", f"text{{font-family:{families.pop()}}}</style>", 1)


def compact_svg(svg: str) -> str:
    # UTF-8 is XML's default; no reader needs the DTD
    svg = re.sub(r"<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*", "", svg)
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r">\s+<", "><", svg)
    svg = re.sub(r'<g id="[^"]*">', "<g>", svg)  # group ids (line2d_8, xtick_5) that nothing refers to
    svg = _rename_ids(svg)
    classes = _styles(svg)

    def tag(match: re.Match) -> str:
        name, attributes, empty = match[1], dict(_parse(match[2])), match[3]
        style = "" if "class" in attributes else _style_of(attributes)  # a class of its own: left as it is
        if style:
            attributes.pop("clip-path", None)
            attributes.pop("style", None)
        if NO_ROTATION.match(attributes.get("transform", "")):
            del attributes["transform"]
        out = []
        for key, value in attributes.items():
            if key in COORDINATE_ATTRIBUTES:
                value = _coordinates(key, value)
            out.append(f" {key}='{value.replace(chr(39), '&#39;')}'")
        if style:
            out.append(f" class='{classes[style]}'")
        return f"<{name}{''.join(out)}{empty}>"

    svg = START_TAG.sub(tag, svg)
    svg = _drop_bare_groups(svg)
    if classes:
        sheet = "".join(f".{c}{{{s}}}" for s, c in classes.items())
        if "</style>" in svg:
            svg = svg.replace("</style>", sheet + "</style>", 1)
        else:
            svg = re.sub(r"(<svg[^>]*>)", lambda m: m[1] + f"<style>{sheet}</style>", svg, count=1)
    return _hoist_font_family(svg)
