"""nccl-tests output (text or `-J` JSON) → one dict, as `python -m suite parse nccl-tests FILE --json` prints
it.

    python -m suite parse nccl-tests raw/bandwidth/all_reduce_perf.out --json

    {"collective": "all_reduce", "nranks": 8,
     "rows": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": -1,
               "oop": {"time_us": 24.7, "algbw": 0.0, "busbw": 0.0, "wrong": 0}, "ip": {...}}, ...],
     "avg_busbw": 139.56, "oob": {"count": 0, "ok": true}, "complete": true, "reason": null,
     "wrong_kind": "count"}

`null` wherever the output does not say. Every data row the output prints is kept, in order
(the zero-size rows of reduce_scatter/all_gather at sizes below nranks × 4 included).

The eras this reads (from nccl-tests' own source history and real captures, tests/data/nccl-tests/):

* 2017–2019: `bytes N type op time algbw busbw res`, time in **ms**, no units line, preamble and
  footer without `#`; per-collective parameter columns (all_gather: no op; broadcast: root only).
* 2019–2022: `size count type redop [root] time algbw busbw error` with a units line `(us)`;
  `error` is a maximum deviation (`2e-07`), not a count; alltoall prints an empty redop field.
* 2022 → 2.19: one column set `size count type redop root time algbw busbw #wrong` (twice),
  `#wrong` a count printed with %g (`2.68435e+08`), `N/A` where not checked; `Group` in rank lines;
  version and `Collective test starting:` lines; `-I` adds `i_min i_max i_p99 i_cv%` per half; `-T`
  a trailing timestamp; `cputime` instead of `time` with `-C`.
* `-J file.json` (format version 3): results[] with out_of_place/in_place {time|cpu_time, alg_bw,
  bus_bw, nwrong}; NaN written as the string "nan".

Anything else on a line of its own is ignored: NCCL INFO/WARN, `NCCL version`, MPI warnings,
rccl-tests' extra lines, shell prompts. `mpirun --tag-output` prefixes (`[1,0]<stdout>:`) are
stripped first. A run that hangs after the header or aborts mid-table keeps the rows printed so
far with `complete: false` and the reason. A file holding several tests one after another (a
script looping over the binaries) is read up to the second test's preamble; `next_test_line` says
where that starts (parse the rest separately).

A file is streamed line by line (each cut at MAX_LINE) and judged on its first SNIFF_LINES lines:
one with nothing nccl-tests prints there (a log, the wrong file) is refused at once, however large.
"""

from __future__ import annotations

import contextlib
import gc
import re
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from suite.parsers import ParseError
from suite.parsers.nccl_tests_fields import PROGRAMS, _is_int, _nranks_from_ratio, program_name
from suite.parsers.nccl_tests_rows import TIME_NAMES, Table, headerless, number

# Program names nccl-tests builds (`<name>_perf`), longest match first where one contains another.

MPI_TAG = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:\s?")
RANK_LINE = re.compile(
    r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)"
    r"\s+\[[^\]]*\]\s*(?P<name>.*?)\s*$"
)
PROGRAM_LINE = re.compile(r"Collective test (?:starting|concluded):\s*(\S+)")
# NCCL 1's tests were `<name>_test`
PROGRAM_WORD = re.compile(r"(?:^|[/\s=])([a-z_]+?)_(?:perf|test)(?:_mpi)?\b")
NCCL1_DEVICE = re.compile(r"^#\s*Device\s+(\d+)\s+->\s+\d+")
OOB_LINE = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
AVG_LINE = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)")
PREAMBLE = re.compile(r"^#?\s*nThread\s+\d+\s+nGpus\s+\d+")
# Lines that end a run (NCCL WARN alone does not: healthy runs print some).
FAILURE = re.compile(
    r"(Test (?:NCCL |CUDA )?failure.*|Segmentation fault.*|Aborted.*|terminate called.*|"
    r"mpirun noticed.*|srun: error.*|Invalid number of GPUs.*)"
)


# How much of a file decides whether it is nccl-tests output at all: launchers (mpirun's warnings, a
# printed command line) put tens of lines before the preamble, never thousands.
SNIFF_LINES = 2000
SNIFF_CHARS = 1 << 20
MAX_LINE = 64 << 10  # a table row is ~150 characters; longer lines are not nccl-tests' and are cut
MAX_JSON = 16 << 20  # a -J report holds ~300 bytes per size: 16 MiB is 50,000 sizes


def parse_file(path: str | Path) -> dict[str, Any]:
    """Read `path` (text or -J JSON); the file's name helps name the collective when the output does not."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        try:
            # a -J report: one JSON document, read whole (nccl-tests writes a few KiB)
            if _first_char(f) == "{":
                from suite.parsers.nccl_tests_json import parse_json

                text = f.read(MAX_JSON + 1)
                if len(text) > MAX_JSON:
                    raise ParseError(
                        f"a JSON document over {MAX_JSON >> 20} MiB: not an nccl-tests -J report"
                    )
                return parse_json(text, name_hint=path.name)
            return parse_lines(bounded_lines(f), name_hint=path.name)
        except UnicodeDecodeError as e:  # read in chunks: e.start is not a file offset, so it is not quoted
            raise ParseError(
                f"not text ({e.reason}): nccl-tests prints UTF-8 text; is this the right file?"
            ) from None


def parse(text: str, name_hint: str = "") -> dict[str, Any]:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        from suite.parsers.nccl_tests_json import parse_json

        return parse_json(stripped, name_hint)
    return parse_text(text, name_hint)


def _first_char(f: IO[str]) -> str:
    """The first character that is not white space ('' for a blank file); `f` is left at its start."""
    while chunk := f.read(4096):
        stripped = chunk.lstrip()
        if stripped:
            f.seek(0)
            return stripped[0]
    f.seek(0)
    return ""


def bounded_lines(f: IO[str], max_line: int = MAX_LINE) -> Iterator[str]:
    """The file's lines one at a time, each cut at `max_line` characters (the rest skipped, never held)."""
    while line := f.readline(max_line):
        if len(line) == max_line and not line.endswith("\n"):
            while (rest := f.readline(max_line)) and not rest.endswith("\n"):
                pass
        yield line


# ---------------------------------------------------------------- text


def _header_tokens(line: str) -> list[str] | None:
    """The column names of a header line (`#  size  count  type ... time algbw busbw #wrong ...`), else
    None."""
    body = line.lstrip("#").split()
    if len(body) < 5 or body[0] not in ("size", "bytes") or body[1] not in ("count", "N"):
        return None
    if not any(t in TIME_NAMES for t in body):
        return None
    return body


def parse_text(text: str, name_hint: str = "") -> dict[str, Any]:
    return parse_lines(text.splitlines(), name_hint)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a table is read: a row is three small dicts and no cycle, and the
    collector walking a million of them again and again was a quarter of the parse (measured: 19.5 s → 14.3 s
    for a million rows)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def parse_lines(lines: Iterable[str], name_hint: str = "") -> dict[str, Any]:
    """The text output's lines (an iterator is read once, in order, and not held) → the parse."""
    with collector_paused():
        return _parse_lines(lines, name_hint)


def _parse_lines(lines: Iterable[str], name_hint: str) -> dict[str, Any]:
    collective = None
    ranks: set[int] = set()
    table: Table | None = None
    pending_header: list[str] | None = None
    rows: list[dict[str, Any]] = []
    avg = None
    oob = None
    saw_preamble = False
    saw_header = False
    saw_footer = False
    next_test = None
    wrong_kind = None
    failure = None
    partial = None
    version = None

    read_chars = 0
    for index, raw in enumerate(lines):
        if index < SNIFF_LINES and read_chars < SNIFF_CHARS:
            read_chars += len(raw)
        elif not (rows or saw_header or saw_preamble or saw_footer or ranks or version):
            raise ParseError(
                f"not nccl-tests output: nothing nccl-tests prints (a preamble nThread … nGpus, a table "
                f"header, data rows) in its first {index} lines; pass the stdout of a *_perf binary"
            )
        s = (MPI_TAG.sub("", raw) if raw[:1] == "[" else raw).strip()
        if not s:
            continue
        # the bulk of a sweep: a data row
        if table is not None and s[0].isdigit() and "Collective test" not in s:
            row = table.row(s)
            if row is not None:
                rows.append(row)
                wrong_kind = table.wrong_kind
                continue
        starts_next = PREAMBLE.match(s) or "Collective test starting" in s
        if starts_next and (rows or saw_footer):  # a file of several tests: this parse reads the first
            next_test = index + 1
            break
        m = PROGRAM_LINE.search(s)
        if m and collective is None:
            collective = program_name(m.group(1))
        if s.startswith("# nccl-tests version") or s.startswith("rccl-tests: Version"):
            version = s.lstrip("# ").strip()
            continue
        if PREAMBLE.match(s):
            saw_preamble = True
            continue
        m = RANK_LINE.match(s) or NCCL1_DEVICE.match(s)
        if m:
            ranks.add(int(m.group(1)))
            continue
        tokens = _header_tokens(s)
        if tokens is not None:
            pending_header = tokens
            saw_header = True
            # 2017-era headers have no units line and print time in ms; a units line below says otherwise.
            table = Table(tokens, 1e-3 if tokens[0] == "bytes" else 1e-6)
            continue
        if s.startswith("#") and "(B)" in s and pending_header is not None:
            if "(ms)" in s:
                table = Table(pending_header, 1e-3)
            elif "(us)" in s:
                table = Table(pending_header, 1e-6)
            continue
        m = OOB_LINE.match(s)
        if m:
            oob = {
                "count": int(m.group(1)),
                "ok": (m.group(2) or ("OK" if m.group(1) == "0" else "FAILED")) == "OK",
            }
            continue
        m = AVG_LINE.match(s)
        if m:
            avg = number(m.group(1))
            saw_footer = True
            continue
        if s.startswith("#"):
            continue
        toks = s.split()
        if len(toks) >= 2 and _is_int(toks[0]) and _is_int(toks[1]):
            layout = table or headerless(len(toks))
            row = layout.row(s) if layout else None
            if row is None:
                partial = partial or f"line {index + 1} is a cut-off table row: {s[:80]!r}"
                continue
            rows.append(row)
            wrong_kind = layout.wrong_kind
            continue
        m = FAILURE.search(s)
        if m and failure is None:
            failure = m.group(1).strip()
        # a command after the table names the next test
        if collective is None and not rows and not saw_footer:
            w = PROGRAM_WORD.search(s)
            if w and w.group(1) in PROGRAMS:
                collective = w.group(1)

    if not rows and not saw_header and not saw_preamble and not saw_footer:
        raise ParseError(
            "not nccl-tests output: no preamble (nThread … nGpus), no table header, no data rows"
        )

    if collective is None and name_hint:
        collective = program_name(name_hint)
    nranks = len(ranks) if ranks else _nranks_from_ratio(collective, rows)
    complete = saw_footer and failure is None and partial is None
    reason = None
    if not complete:
        last = f" (last size {rows[-1]['size']} B)" if rows else ""
        if failure:
            reason = f"the run aborted after {len(rows)} rows{last}: {failure}"
        elif partial:
            reason = f"{partial}; {len(rows)} rows before it"
        elif not saw_header and not rows:
            reason = "the output stops before the table header: the run hung or died during initialisation"
        elif not rows:
            reason = (
                "the output stops after the table header: the run hung or was killed before the first size"
            )
        else:
            reason = (
                f"no footer after {len(rows)} rows{last}: the run hung, was killed, or the capture is cut"
            )
    return {
        "collective": collective,
        "nranks": nranks,
        "rows": rows,
        "avg_busbw": avg,
        "oob": oob,
        "complete": complete,
        "reason": reason,
        "aborted": failure is not None,
        "wrong_kind": wrong_kind or (table.wrong_kind if table else None),
        "version": version,
        "next_test_line": next_test,
    }


# ---------------------------------------------------------------- sniffing (suite ingest)

KIND = "nccl-tests"


def sniff(head: bytes) -> bool:
    """nccl-tests stdout (its preamble, a `Collective test` line or a results header) or its `-J` JSON
    report."""
    text = head.decode("utf-8", "replace")
    if text.lstrip().startswith("{"):
        return '"results"' in text or '"config"' in text
    # Stripped as the parse strips them: a table pasted inside a Markdown list comes indented.
    lines = [MPI_TAG.sub("", line.strip()) for line in text.splitlines()]
    return any(PREAMBLE.match(line) or PROGRAM_LINE.search(line) or _header_tokens(line) for line in lines)
