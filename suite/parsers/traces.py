"""Communication/compute overlap of a profiler timeline: nsys SQLite exports and torch (Kineto) traces.

    python -m suite parse trace raw/profile/rank_0.sqlite --json
    python -m suite parse trace raw/profile/rank0.trace.json --json

Every interval of the timeline is communication, compute or neither:

  GPU (nsys `CUPTI_ACTIVITY_KIND_KERNEL`, or Kineto events of category `kernel`): a kernel whose
      name matches COMM_PATTERN (`ncclKernel_*`, `ncclDevKernel_*`, `ncclSymDevKernel_*`) is
      communication; Memcpy/Memset/dma are neither; every other kernel is compute.
  CPU (a Kineto trace with no GPU kernel, as gloo makes): the `gloo:*` spans (the gloo worker
      thread) are communication; the `cpu_op` events of the main thread are compute, less the
      time of the enqueue ops (`c10d::allreduce_`, ~60 µs each) that only hand work to that thread.

When the trace marks two or more `ProfilerStep#N` spans, the last is left out, as Holistic Trace
Analysis does (a capture of a running job cuts it short; suite/stages/profile/worker.py profiles
one step more for it): GPU kernels count when the runtime call that launched them started before
it, CPU intervals when they started before it.

Each class's intervals are merged per rank (nested and concurrent kernels count once), then per
rank: comm_us and compute_us (merged lengths), overlap_us (time both run at once) and
overlap_pct = overlap_us / comm_us × 100. That is Holistic Trace Analysis' comm/compute overlap
(tests/data/traces/hta-sampled_rank-0.hta.json holds HTA's own figure for the real trace the tests read).
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from suite.parsers import ParseError
from suite.parsers.trace_values import check_kernel_row, event_problem

# HTA's communication test is `^nccl.*Kernel`; gloo's spans are named gloo:all_reduce, gloo:broadcast, …
COMM_PATTERN = r"^(nccl.*Kernel|gloo:)"
MEMORY_PATTERN = r"^(Memcpy|Memset|dma)"
# CPU ops that only enqueue a collective for the communication thread: neither class.
ENQUEUE_PATTERN = r"^(c10d::|record_param_comms|nccl:)"
KERNEL_CATEGORIES = {"kernel"}  # Kineto; compared lower-case (old traces say "Kernel")

Interval = tuple[float, float]


@dataclass(frozen=True)
class RankOverlap:
    """One rank's totals, microseconds."""

    rank: int
    comm_us: float
    compute_us: float
    overlap_us: float
    window_us: float
    """From the first to the last classified interval: the captured span."""

    @property
    def overlap_pct(self) -> float:
        """Overlapped ÷ communication time × 100; NaN where no communication was seen."""
        return 100.0 * self.overlap_us / self.comm_us if self.comm_us > 0 else float("nan")

    @property
    def comm_share_pct(self) -> float:
        """Communication time ÷ captured span × 100."""
        return 100.0 * self.comm_us / self.window_us if self.window_us > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        pct = self.overlap_pct
        return {
            "rank": self.rank,
            "comm_us": round(self.comm_us, 3),
            "compute_us": round(self.compute_us, 3),
            "overlap_us": round(self.overlap_us, 3),
            "overlap_pct": None if pct != pct else round(pct, 4),
        }


@dataclass
class RankTimeline:
    """One rank's classified intervals (µs, unmerged) and where they came from."""

    rank: int
    source: str
    """'nsys', 'kineto-gpu' or 'kineto-cpu'."""
    comm: list[Interval] = field(default_factory=list)
    compute: list[Interval] = field(default_factory=list)

    def merged(self) -> tuple[list[Interval], list[Interval]]:
        return merge(self.comm), merge(self.compute)

    def overlap(self) -> RankOverlap:
        comm, compute = self.merged()
        everything = comm + compute
        window = (max(e for _, e in everything) - min(s for s, _ in everything)) if everything else 0.0
        return RankOverlap(
            rank=self.rank,
            comm_us=total(comm),
            compute_us=total(compute),
            overlap_us=intersection(comm, compute),
            window_us=window,
        )


# ---------------------------------------------------------------- interval arithmetic


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time; touching intervals join."""
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if end < start:
            continue
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def total(merged: Sequence[Interval]) -> float:
    return sum(e - s for s, e in merged)


def intersection(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """Length of time covered by both of two merged interval lists (one pass over both)."""
    i = j = 0
    out = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """The parts of merged intervals `a` outside merged intervals `b`."""
    out: list[Interval] = []
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k, cursor = j, start
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                out.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def clip(merged: Sequence[Interval], start: float, end: float) -> list[Interval]:
    """The parts of merged intervals inside [start, end]."""
    return [(max(s, start), min(e, end)) for s, e in merged if e > start and s < end]


# ---------------------------------------------------------------- classification


class Classifier:
    def __init__(
        self,
        comm_pattern: str = COMM_PATTERN,
        memory_pattern: str = MEMORY_PATTERN,
        enqueue_pattern: str = ENQUEUE_PATTERN,
    ):
        self.comm = re.compile(comm_pattern)
        self.memory = re.compile(memory_pattern)
        self.enqueue = re.compile(enqueue_pattern)

    def kernel(self, *names: str | None) -> str:
        """'comm', 'memory' or 'compute' for a GPU kernel known by one or more names (short, demangled)."""
        names = tuple(n for n in names if n)
        if any(self.comm.match(n) for n in names):
            return "comm"
        if any(self.memory.match(n) for n in names):
            return "memory"
        return "compute"


# ---------------------------------------------------------------- torch / Kineto traces


def load_json_trace(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            opener = gzip.open if f.read(2) == GZIP_MAGIC else open  # by content: a renamed file reads alike
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ParseError(f"not a torch profiler trace (JSON, optionally gzipped): {e}") from None
    except (ValueError, RecursionError) as e:  # a 5000-digit integer; nesting deeper than the stack
        what = "nested too deep" if isinstance(e, RecursionError) else str(e).split(";")[0]
        raise ParseError(f"JSON no profiler writes ({what}): not a torch profiler trace") from None
    if isinstance(data, list):  # a bare Chrome trace: the event array alone
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ParseError("no traceEvents array: not a torch profiler / Chrome trace")
    # An event no profiler writes (a time that is text, null, NaN or 1e400; a list where an id belongs) means
    # the file was damaged or made by hand: judged without it, the timeline would lose that communication or
    # compute and fail (or pass) a rank on what was never measured.
    for index, event in enumerate(data["traceEvents"]):
        problem = event_problem(event)
        if problem:
            raise ParseError(
                f"traceEvents[{index}]: {problem}, as no profiler writes it: the trace is damaged"
            )
    return data


def rank_of(data: dict[str, Any], path: Path | None = None) -> int:
    """distributedInfo.rank; else a `rank<N>` / `rank_<N>` / `rank-<N>` in the file name; else 0."""
    info = data.get("distributedInfo") or {}
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    if path is not None:
        m = re.search(r"rank[-_]?(\d+)", path.name)
        if m:
            return int(m.group(1))
    return 0


def _span(event: dict[str, Any]) -> Interval | None:
    try:
        ts, dur = float(event["ts"]), float(event["dur"])
    except (KeyError, TypeError, ValueError):
        return None
    return ts, ts + dur


def last_step_start(events: list[dict[str, Any]]) -> float | None:
    """Start of the last `ProfilerStep#N` span when there are at least two, else None: the steps before it are
    analysed."""
    starts = sorted(
        float(e["ts"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and "ts" in e
    )
    return starts[-1] if len(starts) >= 2 else None


def kineto_timeline(
    data: dict[str, Any], rank: int = 0, classifier: Classifier | None = None
) -> RankTimeline:
    """Classify a Kineto trace: GPU kernels when it has any, else gloo spans against main-thread CPU ops."""
    c = classifier or Classifier()
    complete = [e for e in data["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    cutoff = last_step_start(complete)
    kernels = [e for e in complete if str(e.get("cat", "")).lower() in KERNEL_CATEGORIES]
    if kernels:
        # A kernel belongs to the step that launched it: its launch (the runtime call with the same
        # correlation id) must start before the last step.
        launched_at = {
            e["args"]["correlation"]: float(e["ts"])
            for e in complete
            if str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver")
            and isinstance(e.get("args"), dict)
            and isinstance(e["args"].get("correlation"), (int, str))
        }
        timeline = RankTimeline(rank=rank, source="kineto-gpu")
        for e in kernels:
            span = _span(e)
            kind = c.kernel(str(e.get("name", "")))
            if span is None or kind == "memory":
                continue
            if cutoff is not None:
                launch = launched_at.get((e.get("args") or {}).get("correlation"))
                if launch is None or launch >= cutoff:
                    continue
            getattr(timeline, kind).append(span)
        return timeline

    timeline = RankTimeline(rank=rank, source="kineto-cpu")
    cpu_ops = [e for e in complete if e.get("cat") == "cpu_op"]
    main = main_thread(complete, cpu_ops)
    enqueue: list[Interval] = []
    for e in complete:
        name = str(e.get("name", ""))
        span = _span(e)
        if span is None or (cutoff is not None and span[0] >= cutoff):
            continue
        if c.comm.match(name):
            timeline.comm.append(span)
        elif e.get("cat") == "cpu_op" and (e.get("pid"), e.get("tid")) == main:
            (enqueue if c.enqueue.match(name) else timeline.compute).append(span)
    # The op that enqueues a collective sits inside others (the AccumulateGrad that fires DDP's hook):
    # its time is cut out of theirs.
    timeline.compute = subtract(merge(timeline.compute), merge(enqueue))
    return timeline


def main_thread(events: list[dict[str, Any]], cpu_ops: list[dict[str, Any]]) -> tuple[Any, Any] | None:
    """(pid, tid) of the training loop: where torch.profiler's ProfilerStep#N spans are, else the busiest
    cpu_op thread."""
    for e in events:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            return e.get("pid"), e.get("tid")
    counts: dict[tuple[Any, Any], int] = defaultdict(int)
    for e in cpu_ops:
        counts[(e.get("pid"), e.get("tid"))] += 1
    return max(counts, key=counts.get) if counts else None


# ---------------------------------------------------------------- Nsight Systems SQLite exports


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def nsys_timelines(
    conn: sqlite3.Connection, rank: int | None = None, classifier: Classifier | None = None
) -> list[RankTimeline]:
    """Kernels of an `nsys export --type sqlite` file, one timeline per device.

    A report of one rank (the suite writes rank_<N>.nsys-rep per rank) holds one device: it gets
    `rank`. A report of several processes holds several devices; with one process per GPU the
    device index stands for the local rank. A report without the kernel table captured no kernel.
    """
    c = classifier or Classifier()
    tables = _tables(conn)
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        return []
    cols = _columns(conn, "CUPTI_ACTIVITY_KIND_KERNEL")
    for needed in ("start", "end"):
        if needed not in cols:
            raise ParseError(f"CUPTI_ACTIVITY_KIND_KERNEL has no `{needed}` column: not an nsys export")
    name_cols = [n for n in ("shortName", "demangledName", "mangledName", "name") if n in cols]
    if not name_cols:
        raise ParseError("CUPTI_ACTIVITY_KIND_KERNEL has no name column (shortName/demangledName/name)")
    device = "deviceId" if "deviceId" in cols else "0"
    rows = conn.execute(
        f'SELECT start, "end", {device}, {", ".join(name_cols)} FROM CUPTI_ACTIVITY_KIND_KERNEL'
    ).fetchall()
    strings: dict[int, str] = {}
    if "StringIds" in tables and any(isinstance(v, int) for r in rows for v in r[3:]):
        strings = dict(conn.execute("SELECT id, value FROM StringIds"))

    def text(value: Any) -> str | None:
        if isinstance(value, int):
            if value not in strings:
                raise ParseError(f"kernel name id {value} is not in StringIds: the export is incomplete")
            return strings[value]
        return value

    by_device: dict[int, RankTimeline] = {}
    for index, (start, end, dev, *names) in enumerate(rows):
        check_kernel_row(index, start, end, dev, names)
        dev = int(dev or 0)
        timeline = by_device.setdefault(dev, RankTimeline(rank=dev, source="nsys"))
        kind = c.kernel(*(text(n) for n in names))
        if kind != "memory" and start is not None and end is not None:
            # nanoseconds → microseconds
            getattr(timeline, kind).append((start / 1000.0, end / 1000.0))
    timelines = [by_device[d] for d in sorted(by_device)]
    if rank is not None and len(timelines) == 1:
        timelines[0].rank = rank
    return timelines


def open_sqlite(path: Path) -> sqlite3.Connection:
    with open(path, "rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            raise ParseError("not an SQLite database: export the report with `nsys export --type sqlite`")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


# ---------------------------------------------------------------- files


def timelines_of(path: Path, classifier: Classifier | None = None) -> list[RankTimeline]:
    """Every rank's timeline in one file: an nsys `.sqlite` or a torch trace `.json` / `.json.gz`."""
    path = Path(path)
    if path.suffix in (".nsys-rep", ".qdrep"):
        raise ParseError(
            f"an Nsight Systems report: export it first with "
            f"`nsys export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}`"
        )
    if path.suffix in (".sqlite", ".db"):
        m = re.search(r"rank[-_]?(\d+)", path.name)
        conn = open_sqlite(path)
        try:
            return nsys_timelines(conn, int(m.group(1)) if m else None, classifier)
        except sqlite3.DatabaseError as e:
            raise ParseError(f"unreadable SQLite export: {e}") from None
        finally:
            conn.close()
    data = load_json_trace(path)
    return [kineto_timeline(data, rank_of(data, path), classifier)]


def parse_file(path: Path) -> dict[str, Any]:
    """`python -m suite parse trace FILE`: {"ranks": [{rank, comm_us, compute_us, overlap_us,
    overlap_pct}]}."""
    timelines = timelines_of(Path(path))
    return {"ranks": [t.overlap().to_dict() for t in timelines]}


# ---------------------------------------------------------------- sniffing (suite ingest)

KIND = "nsys SQLite export"
TORCH_KIND = "torch profiler trace"
GZIP_MAGIC = b"\x1f\x8b"


def sniff(head: bytes) -> bool:
    """An SQLite database (nsys export --type sqlite); whether it holds kernels is for the parse to say."""
    return head.startswith(b"SQLite format 3\x00")


def sniff_torch(head: bytes) -> bool:
    """A torch profiler (Kineto) / Chrome trace, plain or gzipped: a traceEvents array, or a bare event
    array."""
    if head.startswith(GZIP_MAGIC):  # inflate what the head holds (a cut stream gives what it has)
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 64 * 1024)
        # the magic and garbage after it: no trace (ingest names it "gzip data that does not …")
        except zlib.error:
            return False
    start = head.lstrip()[:1]
    return (start == b"{" and b'"traceEvents"' in head) or (start == b"[" and b'"ph"' in head[:4096])
