"""The jinja2 environment: templates under reports/templates/, autoescape always on.

Autoescape is forced for every template (not chosen by file name), so any string from a run —
a hostname, a GPU name, a log tail — renders as text, whatever markup it holds. Every value is also made inert
(suite/inert.py): a bidi override or an escape sequence from a capture is shown as its escape, never applied.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2
from markupsafe import Markup, escape

from suite.inert import inert


def code_spans(text: str) -> Markup:
    """A text naming commands (`dmesg -T > dmesg.txt`) with each backticked span shown as code, the rest
    escaped; an unbalanced backtick leaves the text as it is."""
    parts = str(escape(text)).split("`")
    if len(parts) % 2 == 0:
        return Markup(escape(text))
    return Markup("".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts)))


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        # a name the template expects but the context lacks is an error, not a blank
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_inert_value,
    )
    env.filters["code_spans"] = code_spans
    return env


def _inert_value(value: Any) -> Any:
    """Each {{ value }} as the page shows it: strings (a figure's SVG too, kept markup) without control
    characters."""
    if isinstance(value, Markup):
        return Markup(inert(str(value)))
    return inert(value) if isinstance(value, str) else value


def render_template(name: str, context: dict[str, Any]) -> str:
    return environment().get_template(name).render(**context)
