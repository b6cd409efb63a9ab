"""argparse types for the numbers the commands take: NaN, infinity and values outside their range are refused
at the command line, in argparse's own usage + error lines (exit 2), before they reach a formula (a NaN α
printed as `NaN`, which is not JSON; an MFU of 0 divided by; a port that no socket can bind)."""

from __future__ import annotations

import argparse
import math


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive(text: str) -> float:
    """A finite number above 0 (a rate, a bandwidth, a time)."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def not_negative(text: str) -> float:
    """A finite number, 0 or above (a price, a latency)."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def fraction(text: str) -> float:
    """A share such as MFU: above 0, at most 1."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0 and at most 1 (0.35 is 35 %)")
    return value


def _whole(text: str, low: int, high: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(
            f"{text!r} is outside {low}–{high}" if high < 1 << 62 else f"{text!r} must be at least {low}"
        )
    return value


def count(text: str) -> int:
    """A whole number of things, at least 1 (GPUs, processes, ranks)."""
    return _whole(text, 1, 1 << 62, "a whole number")


def port(text: str) -> int:
    """A TCP port, 1–65535."""
    return _whole(text, 1, 65535, "a port number")
