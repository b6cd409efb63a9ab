"""nccl-tests' `-J FILE` report (JSON, format version 3) → the same dict as its text output gives.

results[] with out_of_place/in_place {time|cpu_time, alg_bw, bus_bw, nwrong}; NaN written as the
string "nan". A report cut short (the run died) is read as far as it goes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from suite import strict_json
from suite.parsers import ParseError
from suite.parsers.nccl_tests_fields import _int_or_float, _is_int, _nranks_from_ratio, program_name


def parse_json(text: str, name_hint: str = "") -> dict[str, Any]:
    """nccl-tests' `-J` report (format version 3); a report cut short (the run died) is read as far as it
    goes."""
    complete = True
    reason = None
    try:
        data = strict_json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(
            f"a JSON report that does not parse ({e.msg} at line {e.lineno}): "
            f"if the run died mid-way, parse its stdout instead"
        ) from None
    # a 5000-digit integer; nesting deeper than the interpreter's stack
    except (
        ValueError,
        RecursionError,
    ) as e:
        what = "nested too deep" if isinstance(e, RecursionError) else str(e).split(";")[0]
        raise ParseError(f"a JSON document nccl-tests does not write ({what})") from None
    if not isinstance(data, dict) or "results" not in data and "config" not in data:
        raise ParseError("JSON without nccl-tests' keys (config, results): not an nccl-tests -J report")
    version = data.get("version")
    if version is not None and version != 3:
        reason = f"JSON format version {version}; this parser reads version 3"
    args = (
        [a for a in data.get("args") or [] if isinstance(a, str)]
        if isinstance(data.get("args"), list)
        else []
    )
    collective = program_name(args[0]) if args else None
    if collective is None and name_hint:
        collective = program_name(name_hint)
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    devices = [d for d in config.get("devices") or [] if isinstance(d, dict)]
    nranks = len({d.get("rank") for d in devices}) or None
    rows = []
    results = data.get("results") or []
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise ParseError("'results' is not a list of objects: not an nccl-tests -J report")
    for i, r in enumerate(results):
        for key in ("size", "count"):
            # a count may be left out
            if not _is_size(r.get(key)) and (key == "size" or r.get(key) is not None):
                raise ParseError(
                    f"results[{i}].{key} is {str(r.get(key))[:40]!r}, not a byte count from 0 to 2^60: "
                    "the report is damaged"
                )
        root = r.get("root")
        root = int(str(root).strip()) if root is not None and _is_int(str(root).strip()) else None
        rows.append(
            {
                "size": r.get("size"),
                "count": r.get("count"),
                "type": r.get("type"),
                "redop": r.get("redop"),
                "root": root,
                "oop": _json_half(r.get("out_of_place")),
                "ip": _json_half(r.get("in_place")),
            }
        )
    average = data.get("average_bus_bandwidth")
    avg = average.get("bandwidth") if isinstance(average, dict) else None
    oob_data = data.get("out_of_bounds") if isinstance(data.get("out_of_bounds"), dict) else None
    oob = {"count": oob_data.get("count"), "ok": bool(oob_data.get("okay"))} if oob_data else None
    if oob_data is None or "end_time" not in data:
        complete = False
        reason = reason or f"the report has no footer (out_of_bounds, end_time) after {len(rows)} rows"
    errors = [str(e) for e in data.get("errors") or [] if e] if isinstance(data.get("errors"), list) else []
    if errors:
        complete = False
        reason = "errors: " + "; ".join(errors)
    return {
        "collective": collective,
        "nranks": nranks if nranks else _nranks_from_ratio(collective, rows),
        "rows": rows,
        "avg_busbw": _json_number(avg),
        "oob": oob,
        "complete": complete and reason is None,
        "reason": reason,
        "wrong_kind": "count",
        "version": f"json {version}",
    }


def _is_size(value: Any) -> bool:
    """A message size or element count as nccl-tests writes one: a whole number, not negative, not absurd
    (a 1e400 would be infinity, and a sweep up to infinity never ends)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1 << 60


def _json_number(value: Any) -> float | None:
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and not math.isfinite(value) else value
    return None  # "nan" and anything else


def _json_half(half: dict[str, Any] | None) -> dict[str, Any] | None:
    if not half or not isinstance(half, dict):
        return None
    time = half.get("time", half.get("cpu_time"))
    return {
        "time_us": _json_number(time),
        "algbw": _json_number(half.get("alg_bw")),
        "busbw": _json_number(half.get("bus_bw")),
        "wrong": _int_or_float(_json_number(half.get("nwrong"))),
    }
