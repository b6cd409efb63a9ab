"""Text from a capture or a box, made inert before it reaches a terminal: no byte of it can move the cursor,
recolour a line, set a window title or hide what follows.

A GPU name in `nvidia-smi -q`, a host name in an nccl-tests rank line or an error a box printed is written by
a machine the user does not control. Printed raw, `\\x1b[1A\\x1b[2K` in it erases the line above (a FAIL) and
writes a PASS in its place. So every control character — C0 but newline and tab, DEL, C1 (8-bit CSI, OSC), the
Unicode line separators and bidi overrides (which reorder what follows on screen) — is shown as its escape,
`\\x1b`: visible, inert, and still telling the reader that the capture held one.

    inert("H100\\x1b[32m PASS")  ->  'H100\\\\x1b[32m PASS'

suite/cli_streams.py applies it to everything the command-line entry points write to stdout and stderr, so no
printing path can be missed.
"""

from __future__ import annotations

import dataclasses
import re

# C0 controls but \t and \n, DEL, C1, and the format characters that move or reorder text on screen.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """`text` with every control character shown as its escape; newlines and tabs kept."""
    if text.isprintable():  # the common case, in C: no control, no format character, no newline
        return text
    return _CONTROL.sub(_escape, text)


def inert_texts(data):
    """A JSON-shaped value (dicts, lists, strings, numbers) with every string, keys too, made inert."""
    if isinstance(data, str):
        return inert(data)
    if isinstance(data, dict):
        return {inert_texts(k): inert_texts(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [inert_texts(v) for v in data]
    return data


_TEXT_FIELDS: dict[type, tuple[str, ...]] = {}
"""Per dataclass, the fields declared to hold text: rows are built by the million, their fields listed
once."""


def inert_fields(record) -> None:
    """Every text field of a (frozen) dataclass instance made inert in place: rows, expectations and verdicts
    call it as they are built, so what a capture carries is inert in the files, the report and the
    terminal."""
    names = _TEXT_FIELDS.get(type(record))
    if names is None:
        names = _TEXT_FIELDS[type(record)] = tuple(
            f.name for f in dataclasses.fields(record) if "str" in str(f.type)
        )
    for name in names:
        value = getattr(record, name)
        if value.__class__ is str and not value.isprintable():
            object.__setattr__(record, name, inert(value))
