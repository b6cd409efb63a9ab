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
    """json.loads, refusing NaN, Infinity, overflowing floats, huge integers and deep nesting with a
    ValueError; a json.JSONDecodeError (a ValueError too) for text that is not JSON."""
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ValueError("nested deeper than any record holds") from None
    except ValueError as e:  # from the hooks above, or int(): "Exceeds the limit (4300 digits) …"
        raise ValueError(str(e).split(";")[0]) from None


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not value - value == 0:
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _all_finite(value: Any) -> bool:
    if isinstance(value, float):
        return value - value == 0
    if isinstance(value, dict):
        return all(map(_all_finite, value.values()))
    if isinstance(value, (list, tuple)):
        return all(map(_all_finite, value))
    return True


def dumps(data: Any, **kwargs) -> str:
    """json.dumps for `--json` output: always JSON, a figure that came out NaN or infinite (an overflowing
    input, a capture's "nan") written as null, never as the NaN/Infinity no JSON reader takes. The data is
    copied only when it holds such a figure (a million-row parse is walked, not copied)."""
    return json.dumps(data if _all_finite(data) else _finite(data), allow_nan=False, **kwargs)
