"""What counts as "no value here", said once for the stages, the report's tables and its figures.

A cell can come back empty in many spellings: None from a Row, NaN from a float column (Python's or
numpy's), pandas' NA from an Int64 or string column, NaT, or "" from a CSV. Every one of them means
the same thing to a reader, so every place that asks uses these two functions.
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any


def is_missing(value: Any) -> bool:
    """None, NaN (float or numpy), pandas NA or NaT, or a string with nothing but whitespace."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, numbers.Real):
        return math.isnan(value)
    pandas = sys.modules.get("pandas")  # a pandas NA can only exist once pandas is imported: no import here
    return pandas is not None and (value is pandas.NA or value is pandas.NaT)


def is_finite_number(value: Any) -> bool:
    """A number (or a string that reads as one) that is neither missing nor infinite."""
    if is_missing(value) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False
