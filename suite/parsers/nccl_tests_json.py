"""nccl-tests' `-J FILE` report (JSON, format version 3) → the same dict as its text output gives.

results[] with out_of_place/in_place {time|cpu_time, alg_bw, bus_bw, nwrong}; NaN written as the
string "nan". A report cut short (the run died) is read as far as it goes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from . import ParseError
from .nccl_tests_fields import _int_or_float, _is_int, _nranks_from_ratio, program_name


def parse_json(text: str, name_hint: str = "") -> dict[str, Any]:
    """nccl-tests' `-J` report (format version 3); a report cut short (the run died) is read as far as it goes."""
    complete = True
    reason = None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(f"a JSON report that does not parse ({e.msg} at line {e.lineno}): "
                         f"if the run died mid-way, parse its stdout instead") from None
    if not isinstance(data, dict) or "results" not in data and "config" not in data:
        raise ParseError("JSON without nccl-tests' keys (config, results): not an nccl-tests -J report")
    version = data.get("version")
    if version is not None and version != 3:
        reason = f"JSON format version {version}; this parser reads version 3"
    args = data.get("args") or []
    collective = program_name(args[0]) if args else None
    if collective is None and name_hint:
        collective = program_name(name_hint)
    devices = (data.get("config") or {}).get("devices") or []
    nranks = len({d.get("rank") for d in devices}) or None
    rows = []
    for r in data.get("results") or []:
        root = r.get("root")
        root = int(str(root).strip()) if root is not None and _is_int(str(root).strip()) else None
        rows.append({"size": r.get("size"), "count": r.get("count"), "type": r.get("type"),
                     "redop": r.get("redop"), "root": root,
                     "oop": _json_half(r.get("out_of_place")), "ip": _json_half(r.get("in_place"))})
    avg = (data.get("average_bus_bandwidth") or {}).get("bandwidth")
    oob_data = data.get("out_of_bounds")
    oob = {"count": oob_data.get("count"), "ok": bool(oob_data.get("okay"))} if oob_data else None
    if oob_data is None or "end_time" not in data:
        complete = False
        reason = reason or f"the report has no footer (out_of_bounds, end_time) after {len(rows)} rows"
    errors = [e for e in data.get("errors") or [] if e]
    if errors:
        complete = False
        reason = "errors: " + "; ".join(errors)
    return {"collective": collective, "nranks": nranks if nranks else _nranks_from_ratio(collective, rows),
            "rows": rows, "avg_busbw": _json_number(avg), "oob": oob, "complete": complete and reason is None,
            "reason": reason, "wrong_kind": "count", "version": f"json {version}"}


def _json_number(value: Any) -> float | None:
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and not math.isfinite(value) else value
    return None  # "nan" and anything else


def _json_half(half: dict[str, Any] | None) -> dict[str, Any] | None:
    if not half:
        return None
    time = half.get("time", half.get("cpu_time"))
    return {"time_us": _json_number(time), "algbw": _json_number(half.get("alg_bw")),
            "busbw": _json_number(half.get("bus_bw")), "wrong": _int_or_float(_json_number(half.get("nwrong")))}
