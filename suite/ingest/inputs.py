"""Files → captures: each file's kind sniffed from its content, parsed by the parser a live stage uses.

KINDS is the sniff table, tried in order: a parser module names its KIND and its sniff(head) there,
and the capture it yields says which stage it feeds. A file no sniff claims, or whose parse fails,
becomes an Unused with the reason, never an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from suite.ingest.decode import NotText, decode, looks_binary
from suite.parsers import (
    ParseError,
    dcgm,
    ibstat,
    nccl_tests,
    nvlink,
    p2p,
    smi_health,
    smi_query,
    topo,
    traces,
    xid,
)
from suite.parsers.pasted import clean
from suite.path_names import NOT_UTF8, name_fault, shown
from suite.regular_files import not_regular_problem

HEAD_BYTES = 64 * 1024
ALGO = re.compile(r"NCCL_ALGO\s*(?:=|set by environment to|:)\s*\"?(ring|tree)\b", re.IGNORECASE)


@dataclass
class Capture:
    path: Path
    kind: str
    stage: str
    data: Any
    """What the stage's rows are built from: a tool's text, a parsed nccl-tests run, trace timelines."""
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Unused:
    path: Path
    why: str

    def line(self) -> str:
        return f"not used: {shown(self.path)}: {self.why}"


def read_smi(kind: str, check: Callable[[str], Any]):
    def read(path: Path, text: str) -> list[Capture]:
        check(text)  # raises ParseError with the parser's own reason
        return [Capture(path, kind, "topology", text)]

    return read


def read_smi_q(path: Path, text: str) -> list[Capture]:
    """`nvidia-smi -q` feeds topology (its text) and health (its per-GPU health fields, parsed as health
    parses). A -q cut short (fewer blocks than `Attached GPUs`, a block without a section -q always prints)
    feeds health its whole blocks: they are judged, and health.nvidia_smi says the capture is partial, naming
    file and line."""
    smi_query.parse_query(text)
    health = smi_health.parse(text, partial_ok=True)
    why = "" if health["complete"] else f"{path.name}: {health['reason']}"
    facts = {"why": why, "partial": health["reason"]} if why else {}
    return [
        Capture(path, "nvidia-smi-q", "topology", text, dict(facts)),
        Capture(path, "nvidia-smi-q", "health", health, facts),
    ]


def read_health(kind: str, parse: Callable[[str], Any], source: Callable[[str, Any], str] | None = None):
    """A health tool's output parsed by the parser the live stage uses; `source` tells a kind's forms apart
    (ibstat / ibv_devinfo; nvlink -s / -e, both wanted). A parse with complete: false (a dcgmi table cut
    before its end) feeds health marked partial."""

    def read(path: Path, text: str) -> list[Capture]:
        parsed = parse(text)
        facts: dict[str, Any] = {"view": nvlink.view(parsed)} if kind == nvlink.KIND else {}
        if isinstance(parsed, dict) and parsed.get("complete") is False:
            facts["partial"] = parsed.get("reason") or "the output stops short"
        return [Capture(path, source(text, parsed) if source else kind, "health", parsed, facts)]

    return read


def _names_listed(text: str) -> list:
    names = smi_query.parse_list(text)
    if not names:
        raise ParseError("no `GPU n: NAME (UUID: …)` line")
    return names


def read_nccl_tests(path: Path, text: str) -> list[Capture]:
    """Every test in the file (a script looping over the binaries prints several), with its NCCL_ALGO if
    pinned."""
    env_algo = None
    if text.lstrip().startswith("{"):
        try:
            env = json.loads(text).get("env") or {}
            if isinstance(env, list):  # ["NCCL_ALGO=Ring", …]
                env = dict(str(item).partition("=")[::2] for item in env)
            env_algo = env.get("NCCL_ALGO") if isinstance(env, dict) else None
        except (ValueError, AttributeError):
            pass
    out, before = [], ""
    while True:
        parsed = nccl_tests.parse(text, name_hint=path.name)
        if parsed.get("collective") is None:
            raise ParseError("the output names no collective (no `*_perf` program in it or in the file name)")
        rest = parsed.get("next_test_line")  # 1-based: the next test's preamble
        lines = text.splitlines(keepends=True) if rest else []  # a file of one test is not split again
        this = "".join(lines[: rest - 1]) if rest else text
        preamble = this[: _cut(this)]  # the command, NCCL_ALGO and the rank lines come before the table
        algo = (env_algo or _algo(before + preamble) or "").capitalize()
        algo = algo if algo in ("Ring", "Tree") else None
        out.append(
            Capture(
                path,
                nccl_tests.KIND,
                "crossover" if algo else "bandwidth",
                parsed,
                {"algo": algo, **ranks_of(preamble)},
            )
        )
        if not rest:
            return out
        lines = lines[rest - 1 :]
        # the next command line
        before = this[this.rfind("Avg bus bandwidth") :] if "Avg bus bandwidth" in this else ""
        text = "".join(lines)


def _cut(text: str) -> int:
    """Where the results header starts: NCCL_ALGO is read from the command and preamble before it."""
    m = re.search(r"^.*#\s*size\s+count", text, re.MULTILINE)
    return m.start() if m else len(text)


def _algo(text: str) -> str | None:
    m = ALGO.search(text)
    return m.group(1) if m else None


def ranks_of(text: str) -> dict[str, Any]:
    """The GPU names and host nccl-tests prints per rank (`#  Rank  0 … on box device 0 [0x1a] NVIDIA …`)."""
    names, host = {}, None
    for raw in text.splitlines():
        # indented as pasted in a list
        m = nccl_tests.RANK_LINE.match(nccl_tests.MPI_TAG.sub("", raw.strip()))
        if m and m.group("name"):
            names[int(m.group("rank"))] = m.group("name")
            host = host or m.group("host")
    return {"gpus": [names[r] for r in sorted(names)], "host": host}


def read_nsys(path: Path, _text: str) -> list[Capture]:
    m = re.search(r"rank[-_]?(\d+)", path.name)
    conn = traces.open_sqlite(path)
    try:
        timelines = traces.nsys_timelines(conn, int(m.group(1)) if m else None)
    except Exception as e:  # sqlite3.DatabaseError and a schema the reader does not know
        raise ParseError(f"not an nsys export the trace reader knows: {e}") from None
    finally:
        conn.close()
    if not timelines:
        raise ParseError(
            "no kernels in this SQLite file: export an nsys report with `nsys export --type sqlite`"
        )
    return [Capture(path, traces.KIND, "profile", timelines)]


def read_torch_trace(path: Path, _text: str) -> list[Capture]:
    data = traces.load_json_trace(path)
    return [
        Capture(
            path, traces.TORCH_KIND, "profile", [traces.kineto_timeline(data, traces.rank_of(data, path))]
        )
    ]


# The sniff table, tried in order (the first claim wins): (kind, sniff(head bytes), read(path) → captures).
# dcgmi diag comes before nccl-tests: its `--json` form starts with `{` as nccl-tests' -J report does.
KINDS: tuple[tuple[str, Callable[[bytes], bool], Callable[[Path, str], list[Capture]]], ...] = (
    (traces.KIND, traces.sniff, read_nsys),
    (traces.TORCH_KIND, traces.sniff_torch, read_torch_trace),
    (dcgm.KIND, dcgm.sniff, read_health(dcgm.KIND, dcgm.parse)),
    (nccl_tests.KIND, nccl_tests.sniff, read_nccl_tests),
    (smi_query.KIND, smi_query.sniff, read_smi_q),
    # before topo -m: both are GPU matrices
    (
        p2p.KIND,
        p2p.sniff,
        read_smi("nvidia-smi-topo-p2p", p2p.parse),
    ),
    (topo.KIND, topo.sniff, read_smi("nvidia-smi-topo-m", topo.parse)),
    (nvlink.KIND, nvlink.sniff, read_health(nvlink.KIND, nvlink.parse)),
    # judged as nvlink -s
    (
        nvlink.DCGMI_KIND,
        nvlink.sniff_dcgmi,
        read_health(nvlink.KIND, nvlink.parse_dcgmi),
    ),
    (smi_query.LIST_KIND, smi_query.sniff_list, read_smi("nvidia-smi-L", _names_listed)),
    (ibstat.KIND, ibstat.sniff, read_health(ibstat.KIND, ibstat.parse, lambda text, _: ibstat.kind_of(text))),
    (xid.KIND, xid.sniff, read_health(xid.KIND, xid.parse)),  # last: any log with a driver line in it
)
KNOWN = ", ".join(kind for kind, _, _ in KINDS)


def files_of(paths: list[Path]) -> tuple[list[Path], list[Unused]]:
    """The files named and those under the folders named (sorted, hidden ones left out)."""
    files, missing = [], []
    for p in paths:
        if p.is_dir():
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            files += [f for f in found if not name_fault(f)]
            missing += [
                Unused(
                    f, f"its name {'is' if fault == NOT_UTF8 else 'holds'} {fault}: rename it to ingest it"
                )
                for f in found
                if (fault := name_fault(f))
            ]
        elif p.is_file():
            files.append(p)
        elif p.exists():  # a FIFO or a device: reading it would block or never end
            missing.append(Unused(p, not_regular_problem(p) or "not a regular file"))
        else:
            missing.append(Unused(p, "no such file or folder"))
    return files, missing


def first_kind(head: bytes) -> str | None:
    return next((kind for kind, sniff, _ in KINDS if sniff(head)), None)


def read(path: Path) -> list[Capture] | Unused:
    problem = not_regular_problem(path)  # too large, or replaced by a FIFO since it was listed
    if problem:
        return Unused(path, problem)
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as e:
        return Unused(path, f"unreadable ({e.strerror})")
    if not head.strip():
        return Unused(path, "empty")
    # a trace (an nsys SQLite export, a torch trace, gzipped or not) is read by its own reader, not as pasted
    # text; any other file is text in some dress (gzip, UTF-16, a NUL hole: suite/ingest/decode.py) unless it
    # is binary; nccl-tests' parser reads its own prompt line (it names the *_perf program) and its cut or
    # elided tables
    text = None
    if not traces.sniff(head) and not traces.sniff_torch(head) and not looks_binary(head):
        try:
            text = decode(path.read_bytes()).text
        except NotText as e:
            return Unused(path, f"unreadable: {e}")
        except OSError as e:
            return Unused(path, f"unreadable ({e.strerror})")
    pasted = None
    if text is not None:
        raw_head = head
        # the kind is told by the head, cleaned; nccl-tests' parser reads the raw text itself (its prompt
        # line, its cut tables), so a million-row table is not cleaned line by line for nothing
        head = clean(text[:HEAD_BYTES]).text[:HEAD_BYTES].encode("utf-8", "replace") or raw_head
        if first_kind(head) != nccl_tests.KIND:
            pasted = clean(text)
            head = pasted.text[:HEAD_BYTES].encode("utf-8", "replace") or raw_head
    for kind, sniff, reader in KINDS:
        if sniff(head):
            try:
                whole = kind == nccl_tests.KIND  # its parser takes the prompt line and cut tables itself
                got = reader(path, text if whole and text is not None else pasted.text if pasted else "")
            except (ValueError, OSError, EOFError) as e:  # ParseError is a ValueError; a cut gzip an EOFError
                return Unused(path, f"looks like {kind} but does not parse: {e}")
            if pasted and pasted.partial and not whole:  # an excerpt: judged on what it holds, said partial
                for c in got:
                    c.facts["partial"] = "; ".join(filter(None, [*pasted.partial, c.facts.get("partial")]))
            return got
    if head.lstrip()[:1] in (b"{", b"["):
        return Unused(
            path,
            f"JSON that is none of the kinds ingest reads ({KNOWN}): no nccl-tests -J keys "
            f"(results, config), no traceEvents",
        )
    first = next(
        (" ".join(line.split()) for line in head.decode("utf-8", "replace").splitlines() if line.strip()), ""
    )
    shown = first[:60] if first.isprintable() else "binary data"
    return Unused(path, f"not a tool output ingest reads ({KNOWN}); it starts {shown!r}")
