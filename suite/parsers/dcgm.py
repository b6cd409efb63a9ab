"""`dcgmi diag -r 1|2|3` → {dcgm_version, driver_version, gpu_device_ids, tests: {'Category/Test': result},
per_gpu: {test: {'GPU1': 'Fail'}}, warnings: [text], overall}, from its text table or its `--json` (`-j`)
form.

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

from suite.parsers import ParseError

_RULER = re.compile(r"[|+]-+\s+([A-Za-z][A-Za-z ]*?)\s+-+\+-*[|+]")
_BORDER = re.compile(r"\+-+\+-+\+")
_ROW = re.compile(r"\|\s*(.*?)\s*\|\s*(.*?)\s*\|$")
_STATUS = re.compile(r"(Pass|Fail|Warn|Skip)\b(?: - (All|GPUs?: ([\d, ]+)))?")
META = {
    "DCGM Version": "dcgm_version",
    "Driver Version Detected": "driver_version",
    "GPU Device IDs Detected": "gpu_device_ids",
}


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
    statuses = {
        m.group(1) for r in tests.values() for part in r.split(" | ") if (m := _STATUS.match(part.strip()))
    }
    return (
        "Fail" if "Fail" in statuses else "Warn" if "Warn" in statuses else "Pass" if statuses else "Unknown"
    )


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
        if not row and not "".join(text.splitlines()[number:]).strip():
            break  # the last line, cut mid-row: the table stops here (partial, below)
        if not row:
            raise ParseError(
                f"line {number}: {line[:60]!r} is a broken table row: the output is cut or garbled"
            )
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
            # wrapped at the column's edge: a leading space past the pad is a word break
            elif last[0] == "Warning":
                cell = line.split("|")[2].rstrip()
                warnings[int(last[1])] += cell[1:] if cell.startswith(" ") else cell
        elif category == "Metadata" and key in META:
            meta[META[key]] = value.split(",") if key == "GPU Device IDs Detected" else value
        elif category:
            name = f"{category}/{key}"
            tests[name] = value
            last = ("test", name)
    if not tests:
        raise ParseError(
            f"line {max(1, len(text.splitlines()))}: no test rows: not `dcgmi diag` output "
            "(or it stopped before the first test)"
        )
    table = [
        (n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()[:1] in ("|", "+")
    ]
    last_number, last = table[-1]
    closed = _BORDER.fullmatch(last) is not None  # dcgmi always closes its table with a plain border
    return {
        **meta,
        "tests": tests,
        "per_gpu": _per_gpu(tests),
        "warnings": [w.strip() for w in warnings],
        "warning_rows": len(warnings),
        "overall": _overall(tests),
        "complete": closed,
        "reason": ""
        if closed
        else f"line {last_number}: the table stops without its closing border: the "
        f"capture was cut (after {category or 'the header'}); the tests after it "
        "are unknown",
    }


_JSON_STATUS = {"PASS": "Pass", "FAIL": "Fail", "WARN": "Warn", "SKIP": "Skip", "SKIPPED": "Skip"}


NOT_DCGMS = "not what dcgmi writes there: the JSON is damaged"


def _objects(value: Any, where: str) -> list[dict[str, Any]]:
    """A list of JSON objects, as dcgmi writes every level of its tree; else one ParseError naming where."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ParseError(f"{where} is {str(value)[:40]!r}, not a list of objects: {NOT_DCGMS}")
    return value


def _text(obj: dict[str, Any], key: str, where: str) -> str:
    """obj[key] as dcgmi writes it: text ('?' where it is missing); else one ParseError naming where."""
    value = obj.get(key, "?")
    if not isinstance(value, str):
        raise ParseError(f"{where}: {key} is {str(value)[:40]!r}, {NOT_DCGMS}")
    return value


def _status(value: Any) -> str:
    word = str(value or "?").strip()
    return _JSON_STATUS.get(word.upper(), word)


def parse_json(data: dict[str, Any]) -> dict[str, Any]:
    """DCGM 3.x nests everything under "DCGM GPU Diagnostic" (4.x: "Diagnostic" with a "metadata" block); a
    result's gpu_ids is one id or a CSV of them; statuses are Pass or PASS; warnings are strings or
    {"warning": …}."""
    diag = data.get("DCGM GPU Diagnostic", data.get("Diagnostic"))
    if not isinstance(diag, dict):
        raise ParseError("no 'DCGM GPU Diagnostic' object: not `dcgmi diag --json` output")
    if diag.get("runtime_error") and not diag.get("test_categories"):
        return {
            "tests": {},
            "per_gpu": {},
            "warnings": [],
            "warning_rows": 0,
            "overall": "Error",
            "runtime_error": str(diag["runtime_error"]),
        }
    if not isinstance(diag.get("test_categories"), list):
        raise ParseError(
            "no 'test_categories' list under 'DCGM GPU Diagnostic': the JSON is cut or not dcgmi's"
        )
    tests: dict[str, str] = {}
    per_gpu: dict[str, dict[str, str]] = {}
    warnings: list[str] = []
    for cat in _objects(diag["test_categories"], "test_categories"):
        where = f"category {_text(cat, 'category', 'test_categories')!r}"
        for test in _objects(cat.get("tests", []), f"{where}: tests"):
            name = _text(test, "name", where)
            results = _objects(test.get("results", []), f"{where}, test {name!r}: results")
            for r in results:
                _text(r, "status", f"{where}, test {name!r}: a result")
                if not isinstance(r.get("gpu_ids", ""), (str, int)) or isinstance(r.get("gpu_ids"), bool):
                    raise ParseError(f"{where}, test {name!r}: gpu_ids is {r['gpu_ids']!r}, {NOT_DCGMS}")
            statuses = [_status(r.get("status")) for r in results]
            tests[f"{cat.get('category', '?')}/{name}"] = (
                (statuses[0] if len(set(statuses)) == 1 else " | ".join(statuses)) if statuses else "?"
            )
            for r in results:
                ids = str(r.get("gpu_ids", r.get("gpu_id", r.get("entity_id", ""))))
                if len(set(statuses)) > 1:
                    for gpu in filter(None, (g.strip().removeprefix("gpu") for g in ids.split(","))):
                        per_gpu.setdefault(name, {})[f"GPU{gpu}"] = _status(r.get("status"))
                for w in r.get("warnings", []) or []:
                    warnings.append(
                        str(w.get("warning", w.get("message", ""))) if isinstance(w, dict) else str(w)
                    )
    meta = {
        "dcgm_version": diag.get("version", data.get("metadata", {}).get("version")),
        "driver_version": diag.get("driver_version_detected", diag.get("Driver Version Detected")),
    }
    return {
        **{k: v for k, v in meta.items() if v},
        "tests": tests,
        "per_gpu": per_gpu,
        "warnings": warnings,
        "warning_rows": len(warnings),
        "overall": _overall(tests),
    }


KIND = "dcgmi diag"


def sniff(head: bytes) -> bool:
    """The `--json` form's top key, or the table's `| Diagnostic | Result |` header with DCGM's metadata."""
    text = head.decode("utf-8", "replace")
    return (
        '"DCGM GPU Diagnostic"' in text
        or ('"test_categories"' in text and '"Diagnostic"' in text)
        or (re.search(r"\|\s*Diagnostic\s*\|\s*Result\s*\|", text) is not None and "DCGM Version" in text)
    )


def parse(text: str) -> dict[str, Any]:
    """The table, or the JSON form (after any banner line such as "Successfully ran diagnostic for
    group.")."""
    start = next(
        (i for i, line in enumerate(text.splitlines(keepends=True)) if line.lstrip().startswith("{")), None
    )
    if start is not None and not any(line.lstrip().startswith("|") for line in text.splitlines()[:start]):
        body = "".join(text.splitlines(keepends=True)[start:])
        try:
            data = json.loads(body)
        except json.JSONDecodeError as e:
            raise ParseError(
                f"line {e.lineno + start}: not valid JSON ({e.msg}): the `dcgmi diag --json` output "
                "is cut or garbled"
            ) from None
        return parse_json(data)
    return parse_text(text)


def parse_file(path: Path | str) -> dict[str, Any]:
    return parse(Path(path).read_text(encoding="utf-8"))
