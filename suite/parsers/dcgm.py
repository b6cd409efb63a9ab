"""`dcgmi diag -r 1|2|3` → {dcgm_version, driver_version, gpu_device_ids, tests: {'Category/Test': result},
per_gpu: {test: {'GPU1': 'Fail'}}, warnings: [text], overall}, from its text table or its `--json` (`-j`) form.

The table is `| Test | Result |` rows under `-----  Category  -----` rulers; a result spanning rows
(`Pass - GPUs: 0, 2, 3` / `Fail - GPU: 1`) is joined with " | ", and a `Warning`/`Info` row's wrapped text is
joined back into one line. The JSON form nests the same under "DCGM GPU Diagnostic" → "test_categories" →
"tests" → "results" (one per GPU, each with a status and optional warnings).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from . import ParseError

_RULER = re.compile(r"[|+]-+\s+([A-Za-z][A-Za-z ]*?)\s+-+\+-*[|+]")
_ROW = re.compile(r"\|\s*(.*?)\s*\|\s*(.*?)\s*\|$")
_STATUS = re.compile(r"(Pass|Fail|Warn|Skip)\b(?: - (All|GPUs?: ([\d, ]+)))?")
META = {"DCGM Version": "dcgm_version", "Driver Version Detected": "driver_version",
        "GPU Device IDs Detected": "gpu_device_ids"}


def _per_gpu(tests: dict[str, str]) -> dict[str, dict[str, str]]:
    """Results that name GPUs (`Pass - GPUs: 0, 2, 3 | Fail - GPU: 1`) → {test name: {'GPU0': 'Pass', …}}."""
    out: dict[str, dict[str, str]] = {}
    for name, result in tests.items():
        per: dict[str, str] = {}
        for part in result.split(" | "):
            m = _STATUS.match(part.strip())
            if m and m.group(3):
                for gpu in m.group(3).replace(" ", "").split(","):
                    if gpu:
                        per[f"GPU{gpu}"] = m.group(1)
        if per:
            out[name.split("/", 1)[-1]] = dict(sorted(per.items()))
    return out


def _overall(tests: dict[str, str]) -> str:
    statuses = {m.group(1) for r in tests.values() for part in r.split(" | ") if (m := _STATUS.match(part.strip()))}
    return "Fail" if "Fail" in statuses else "Warn" if "Warn" in statuses else "Pass" if statuses else "Unknown"


def parse_text(text: str) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    tests: dict[str, str] = {}
    warnings: list[str] = []
    category = None
    last: tuple[str, str] | None = None  # ('test', name) or ('warning', index)
    rows = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        ruler = _RULER.fullmatch(line)
        if ruler:
            category, last = ruler.group(1).strip(), None
            continue
        if not line.startswith("|"):
            continue
        row = _ROW.fullmatch(line)
        if not row:
            raise ParseError(f"line {number}: {line[:60]!r} is a broken table row: the output is cut or garbled")
        key, value = row.groups()
        rows += 1
        if key in ("Diagnostic", "") and value == "Result":
            continue
        if key in ("Warning", "Info"):
            warnings.append(value) if key == "Warning" else None
            last = (key, str(len(warnings) - 1)) if key == "Warning" else ("Info", "")
        elif key == "" and last:
            if last[0] == "test":
                tests[last[1]] += " | " + value
            elif last[0] == "Warning":  # wrapped at the column's edge: a leading space past the pad is a word break
                cell = line.split("|")[2].rstrip()
                warnings[int(last[1])] += cell[1:] if cell.startswith(" ") else cell
        elif category == "Metadata" and key in META:
            meta[META[key]] = value.split(",") if key == "GPU Device IDs Detected" else value
        elif category:
            name = f"{category}/{key}"
            tests[name] = value
            last = ("test", name)
    if not tests:
        raise ParseError(f"line {max(1, len(text.splitlines()))}: no test rows: not `dcgmi diag` output "
                         "(or it stopped before the first test)")
    return {**meta, "tests": tests, "per_gpu": _per_gpu(tests), "warnings": [w.strip() for w in warnings],
            "warning_rows": len(warnings), "overall": _overall(tests)}


def parse_json(data: dict[str, Any]) -> dict[str, Any]:
    diag = data.get("DCGM GPU Diagnostic")
    if not isinstance(diag, dict) or not isinstance(diag.get("test_categories"), list):
        raise ParseError("no 'DCGM GPU Diagnostic' → 'test_categories': not `dcgmi diag --json` output")
    tests: dict[str, str] = {}
    per_gpu: dict[str, dict[str, str]] = {}
    warnings: list[str] = []
    for cat in diag["test_categories"]:
        for test in cat.get("tests", []):
            name = f"{cat.get('category', '?')}/{test.get('name', '?')}"
            results = test.get("results", [])
            statuses = [r.get("status", "?") for r in results]
            tests[name] = (statuses[0] if len(set(statuses)) == 1 else " | ".join(statuses)) if statuses else "?"
            for r in results:
                gpu = r.get("gpu_id", r.get("gpu_ids", r.get("entity_id")))
                if gpu is not None and len(results) > 1:
                    per_gpu.setdefault(test.get("name", "?"), {})[f"GPU{gpu}"] = r.get("status", "?")
                for w in r.get("warnings", []) or []:
                    warnings.append(w.get("warning", w.get("message", "")) if isinstance(w, dict) else str(w))
    meta = {v: data.get(k, diag.get(k)) for k, v in META.items() if data.get(k, diag.get(k)) is not None}
    return {**meta, "tests": tests, "per_gpu": per_gpu, "warnings": warnings, "warning_rows": len(warnings),
            "overall": _overall(tests)}


def parse(text: str) -> dict[str, Any]:
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ParseError(f"line {e.lineno}: not valid JSON ({e.msg}): the `dcgmi diag --json` output is cut "
                             "or garbled") from None
        return parse_json(data)
    return parse_text(text)


def parse_file(path: Path | str) -> dict[str, Any]:
    return parse(Path(path).read_text(encoding="utf-8"))
