"""Slurm's compressed host lists ('gpu-[01-03,07],rack[1-2]-n[1-4]'), counted before they are expanded.

SLURM_JOB_NODELIST comes from the environment: a typo or a hostile value ('n[1-99999999999]') must be refused
in one line naming the variable, not expanded into memory. `count` walks the syntax and multiplies the ranges
without building a name; `expand` builds the names only once the count is within `limit`."""

from __future__ import annotations

import itertools
import re

MAX_NODES = 4096  # beyond any allocation cardtime drives; a larger list is a typo or hostile
MAX_CHARS = 65536
PIECE = re.compile(r"\[([^\[\]]*)\]|([^\[\],]+)")


class HostListError(ValueError):
    pass


def _entries(text: str) -> list[str]:
    """Split at the commas outside brackets, refusing an unbalanced bracket."""
    entries, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostListError("a bracket inside a bracket")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostListError("']' with no '['")
        elif ch == "," and depth == 0:
            entries.append(text[start:i])
            start = i + 1
    if depth:
        raise HostListError("'[' with no ']'")
    return [e.strip() for e in [*entries, text[start:]] if e.strip()]


def _ranges(inside: str) -> list[tuple[int, int, int]]:
    """'01-03,07' → [(1, 3, 2), (7, 7, 2)]: (low, high, zero-padded width)."""
    out = []
    for part in inside.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isascii() or not lo.isdigit() or (dash and (not hi.isascii() or not hi.isdigit())):
            raise HostListError(f"[{inside[:40]}]: {part!r} is not N or N-M")
        low, high = int(lo), int(hi) if dash else int(lo)
        if high < low:
            raise HostListError(f"[{inside[:40]}]: {part!r} runs backwards")
        out.append((low, high, len(lo)))
    return out


def _parsed(entry: str) -> list[str | list[tuple[int, int, int]]]:
    pieces: list[str | list[tuple[int, int, int]]] = []
    for match in PIECE.finditer(entry):
        pieces.append(_ranges(match.group(1)) if match.group(1) is not None else match.group(2))
    return pieces


def _entry_count(pieces) -> int:
    n = 1
    for piece in pieces:
        if not isinstance(piece, str):
            n *= sum(high - low + 1 for low, high, _ in piece)
            if n > MAX_NODES:  # stop multiplying: the number itself may be enormous
                return n
    return n


def _checked(text: str) -> tuple[list[list[str | list[tuple[int, int, int]]]], int]:
    """(each entry's pieces, how many names they stand for), syntax and size checked, no name built."""
    if len(text) > MAX_CHARS:
        raise HostListError(f"{len(text)} characters: longer than any host list ({MAX_CHARS})")
    entries, total = [], 0
    for entry in _entries(text):
        entries.append(_parsed(entry))
        total += _entry_count(entries[-1])
        if total > MAX_NODES:
            raise HostListError(f"names more than {MAX_NODES} nodes")
    return entries, total


def count(text: str) -> int:
    """How many names the list stands for, checked for syntax and size, without building one."""
    return _checked(text)[1]


def expand(text: str) -> list[str]:
    """'gpu-[01-03,07],login1' → ['gpu-01', 'gpu-02', 'gpu-03', 'gpu-07', 'login1'] (zero padding kept),
    'r[1-2]-n[1-2]' → ['r1-n1', 'r1-n2', 'r2-n1', 'r2-n2'] (as `scontrol show hostnames` orders them)."""
    names: list[str] = []
    for pieces in _checked(text)[0]:
        choices = [
            [piece]
            if isinstance(piece, str)
            else [f"{n:0{width}d}" for low, high, width in piece for n in range(low, high + 1)]
            for piece in pieces
        ]
        names += ["".join(parts) for parts in itertools.product(*choices)]
    return names
