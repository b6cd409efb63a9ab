"""JSON as the suite's own records and the tools' reports hold it, read so that what no writer produces is one
ValueError naming it instead of a traceback several calls later: NaN and Infinity (the run directory writes
null; nccl-tests writes "nan"), a number too large for a float (1e400 would become infinity), an integer of
thousands of digits (Python refuses those itself), nesting deeper than the interpreter's stack."""

from __future__ import annotations

import json
import math
from typing import Any


def _constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is too large for a float")
    return value


def loads(text: str) -> Any:
    """json.loads, refusing NaN, Infinity, overflowing floats, huge integers and deep nesting with a ValueError;
    a json.JSONDecodeError (a ValueError too) for text that is not JSON."""
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ValueError("nested deeper than any record holds") from None
    except ValueError as e:  # from the hooks above, or int(): "Exceeds the limit (4300 digits) …"
        raise ValueError(str(e).split(";")[0]) from None
