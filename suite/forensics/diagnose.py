"""From what each rank told (or could not tell) to one table and one line.

    rows, line = diagnose(records, world)

A record per rank: its host, how it was heard from (`heard`: answered, post_mortem, stopped, dead,
silent, ended), its Flight Recorder entries and its Python stack. Sequence numbers are compared within one
process group only. The line names a culprit only from evidence: a rank that never entered the collective
the others wait in (its record shows the one before it completed and nothing pending), a rank that could
not answer while the others wait (stopped, dead), ranks in different operations at the same sequence
number (a mismatch), a rank ahead; when every rank waits in the same collective the culprit is not a rank.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

SILENT = ("stopped", "dead", "silent")
HEARD = ("answered", "post_mortem")
"""`ended`: killed by the launcher after another rank failed first: neither heard nor a culprit."""
TORCH_FRAME = re.compile(r"[/\\](torch|site-packages|dist-packages|lib/python3[.\d]*)[/\\]")
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


@dataclass
class Record:
    rank: int
    host: str = "?"
    heard: str = "silent"
    """answered (asked live), post_mortem (written on its exception), stopped, dead, silent."""
    detail: str = ""
    """What the launcher saw of a rank that did not answer: 'process state T (stopped)', 'exit code -9'."""
    entries: list[dict] = field(default_factory=list)
    stack: str = ""
    """The main thread's stack, most recent call first."""
    error: str = ""


@dataclass
class Row:
    host: str
    rank: int
    pg: str
    last_completed: str
    first_pending: str
    where: str
    heard: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def op_name(entry: dict) -> str:
    """'all_reduce' from 'gloo:all_reduce' or 'nccl:all_reduce'."""
    return entry["op"].split(":", 1)[-1] or "collective"


def label(entry: dict | None) -> str:
    return "—" if entry is None else f"{op_name(entry)} #{entry['seq']}"


def main_stack(stacks: str, main_thread: str) -> str:
    """The main thread's block of faulthandler's dump (the answering thread's own is of no interest)."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", stacks.strip())
    for block in blocks:
        if block.split(" (", 1)[0].endswith(main_thread):
            return block
    return blocks[-1] if blocks else ""


def where(stack: str) -> str:
    """The innermost frame of the rank's own code ('drill.py:41 in main'), past torch's own frames."""
    frames = [m for m in map(FRAME.match, stack.splitlines()) if m]
    for m in frames:
        if not TORCH_FRAME.search(m["file"]):
            return f"{m['file'].rsplit('/', 1)[-1]}:{m['line']} in {m['func']}"
    return f"{frames[0]['file'].rsplit('/', 1)[-1]}:{frames[0]['line']}" if frames else ""


def collective_state(entries: list[dict], pg: str) -> tuple[dict | None, dict | None]:
    """(last completed, first pending) collective of one process group."""
    own = [e for e in entries if e["pg"] == pg and not e["p2p"]]
    done = [e for e in own if e["done"]]
    pending = [e for e in own if not e["done"]]
    last = max(done, key=lambda e: e["seq"], default=None)
    first = min(pending, key=lambda e: e["seq"], default=None)
    return last, first


def groups(records: list[Record]) -> list[str]:
    """Process groups in the records, the default group first."""
    seen = Counter(e["pg"] for r in records for e in r.entries if not e["p2p"])
    return sorted(seen, key=lambda pg: (pg != "default_pg", pg != "0", pg))


def diagnose(records: list[Record], world: int) -> tuple[list[Row], str]:
    by_rank = {r.rank: r for r in records}
    records = [by_rank.get(k) or Record(rank=k) for k in range(world)]
    pgs = groups(records) or ["default_pg"]
    rows = []
    for pg in pgs:
        for r in records:
            last, first = collective_state(r.entries, pg)
            heard = r.heard + (f": {r.detail}" if r.detail else "")
            rows.append(Row(r.host, r.rank, pg, label(last), label(first), where(r.stack), heard))
    line = next((found for pg in pgs if (found := _line(records, pg))), None)
    return rows, line or _quiet_line(records)


def _who(r: Record) -> str:
    return f"rank {r.rank} on {r.host}"


def _ranks(rs: list[Record]) -> str:
    if len(rs) == 1:
        return _who(rs[0])
    return "ranks " + ", ".join(str(r.rank) for r in rs)


def _line(records: list[Record], pg: str) -> str | None:
    state = {r.rank: collective_state(r.entries, pg) for r in records if r.heard in HEARD}
    pending = {k: first for k, (_, first) in state.items() if first is not None}
    if not pending:
        return None
    counts = Counter(e["seq"] for e in pending.values())
    at = max(counts, key=lambda seq: (counts[seq], seq))  # where most ranks wait; on a tie the newest
    waiting = [r for r in records if r.rank in pending and pending[r.rank]["seq"] == at]
    ops = Counter(op_name(pending[r.rank]) for r in waiting)
    where_pg = "" if pg in ("default_pg", "0") else f" (process group {pg})"
    if len(ops) > 1:
        parts = "; ".join(
            f"{_ranks([r for r in waiting if op_name(pending[r.rank]) == op])} in {op}" for op in sorted(ops)
        )
        return f"collective mismatch at #{at}{where_pg}: {parts}"
    name = f"{op_name(pending[waiting[0].rank])} #{at}{where_pg}"

    def reached(rank: int) -> int:  # the newest collective this rank entered
        last, first = state[rank]
        return first["seq"] if first is not None else (last["seq"] if last is not None else 0)

    behind = [r for r in records if r.rank in state and r not in waiting and reached(r.rank) < at]
    ahead = [r for r in records if r.rank in state and r not in waiting and reached(r.rank) > at]
    silent = [r for r in records if r.heard in SILENT]
    others = _the_others(waiting)
    if behind:
        places = "; ".join(_behind(r, state[r.rank], name) for r in behind)
        return f"{places}; {others} it"
    if silent:
        what = "; ".join(f"{_who(r)} {_silence(r)}" for r in silent)
        return f"{what}; {others} {name}"
    if ahead:
        leads = "; ".join(
            f"{_who(r)} is {reached(r.rank) - at} collective{'s' if reached(r.rank) - at != 1 else ''} ahead"
            + (f" (in {label(state[r.rank][1])})" if state[r.rank][1] else "")
            for r in ahead
        )
        return f"{leads}; {others} {name}"
    return f"every rank waits in {name}: the fabric or the library, not one rank"


def _behind(r: Record, state: tuple[dict | None, dict | None], name: str) -> str:
    _, first = state
    place = where(r.stack)
    if r.error:  # its post-mortem: it raised outside the collective, before entering it
        at = f" (it raised {r.error.split(':', 1)[0]}" + (f" at {place})" if place else ")")
    else:
        at = f" (it is at {place})" if place else ""
    if first is not None:
        return f"{_who(r)} is still in {label(first)}{at}, so it never entered {name}"
    return f"{_who(r)} never entered {name}{at}"


def _the_others(waiting: list[Record]) -> str:
    """'the other 3 wait in' (asked live) or 'the other 3 were in' (read from their post-mortems)."""
    past = any(r.heard == "post_mortem" for r in waiting)
    if len(waiting) == 1:
        return "the one other rank heard " + ("was in" if past else "waits in")
    return f"the other {len(waiting)} " + ("were in" if past else "wait in")


def _silence(r: Record) -> str:
    if r.heard == "stopped":
        return "was stopped (it could not answer: " + (r.detail or "process state T") + ")"
    if r.heard == "dead":
        return "died" + (f" ({r.detail})" if r.detail else "")
    return "did not answer" + (f" ({r.detail})" if r.detail else "")


def _quiet_line(records: list[Record]) -> str:
    silent = [r for r in records if r.heard in SILENT]
    ended = any(r.heard == "ended" for r in records)
    if silent:
        rest = (
            "the others were ended before they told where they were"
            if ended
            else "no other rank waits in a collective"
        )
        return "; ".join(f"{_who(r)} {_silence(r)}" for r in silent) + "; " + rest
    return "no rank waits in a collective: the launch stopped outside communication"
