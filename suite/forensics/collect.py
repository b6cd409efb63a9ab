"""The launcher's side: ask every rank before the kill, read what the dead left, name what stayed silent.

    findings = collect(raw_dir, prefix, world=4, store=("127.0.0.1", 29500), exit_codes={2: -9})

Asked at a timeout (the ranks are alive: each answers through the rendezvous store within ANSWER_WAIT_S) and
after a failure (the ranks that raised left a post-mortem; torchrun's own failure table or the fork launcher's
exit codes say who died of what). A rank that neither answered nor left a record is told apart by its process
state where it ran on this host (`T`: stopped). Writes raw/<stage>/[<tag>.]forensics.json.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Callable, Sequence

from suite.forensics import answer
from suite.forensics.diagnose import SILENT, Record, Row, diagnose, main_stack

ANSWER_WAIT_S = 5.0
"""How long the ranks get to answer once asked: the bound the forensics state for naming a rank."""
LATE_ANSWER_S = 3.0
"""While answers still arrive, the wait goes on this long after the latest (a busy machine answers slowly,
and a rank that answers late must not be taken for a silent one), up to ANSWER_WAIT_MAX_S."""
ANSWER_WAIT_MAX_S = 20.0
"""The longest the ranks are waited for while answers still arrive."""
CONNECT_S = 10.0
"""How long the launcher waits to reach the store: a loaded node's agent can take seconds to accept."""
RESULT = "forensics.json"


@dataclass
class Findings:
    line: str
    rows: list[Row]
    path: Path
    reason: str

    def table(self) -> str:
        head = ("host", "rank", "group", "last completed", "first pending", "where", "heard")
        body = [
            (r.host, str(r.rank), r.pg, r.last_completed, r.first_pending, r.where, r.heard)
            for r in self.rows
        ]
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        return "\n".join(
            "  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in (head, *body)
        )


def ask(store: tuple[str, int], world: int, wait_s: float, settled) -> tuple[dict[int, dict], str]:
    """Set the question in the launch's store and gather the answers until every rank answered, `settled()`
    says the rest cannot, or wait_s passed with no answer in the last LATE_ANSWER_S; and what happened, in
    words."""
    import torch.distributed as dist

    try:
        client = dist.TCPStore(store[0], store[1], is_master=False, timeout=timedelta(seconds=CONNECT_S))
        client.set(answer.ASK_KEY, "1")
    except Exception as e:  # noqa: BLE001 - the store ended with its launch: only the written records remain
        return {}, f"could not ask through the store at {store[0]}:{store[1]}: {str(e).splitlines()[0][:200]}"
    answers: dict[int, dict] = {}
    started = time.monotonic()
    deadline = started + wait_s
    while time.monotonic() < deadline:
        for rank in range(world):
            if rank not in answers and client.check([answer.answer_key(rank)]):
                answers[rank] = json.loads(client.get(answer.answer_key(rank)))
                late = time.monotonic() + LATE_ANSWER_S
                deadline = max(deadline, min(late, started + max(wait_s, ANSWER_WAIT_MAX_S)))
        if len(answers) == world or settled(answers):
            break
        time.sleep(0.1)
    took = time.monotonic() - started
    return answers, f"asked through {store[0]}:{store[1]}: {len(answers)} of {world} answered in {took:.1f} s"


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def process_state(pid: int) -> str | None:
    """'T (stopped)' from /proc/<pid>/status; None when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


FAILURE_ENTRY = re.compile(
    r"host\s*:\s*(?P<host>\S+)\s*\n\s*rank\s*:\s*(?P<rank>\d+).*?\n\s*exitcode\s*:\s*(?P<code>-?\d+)"
    r"(?:.*?\n\s*error_file.*?\n\s*traceback\s*:\s*(?P<why>[^\n]*))?",
    re.S,
)


def torchrun_failures(log: Path) -> tuple[dict[int, str], int | None]:
    """rank → 'exit code -9: Signal 9 (SIGKILL) received by PID 1234' from torchrun's failure summary, and the
    rank of its "Root Cause (first observed failure)"."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {}, None
    out, root = {}, None
    _, _, root_part = text.rpartition("Root Cause (first observed failure)")
    for m in FAILURE_ENTRY.finditer(text):
        why = (m["why"] or "").strip()
        out[int(m["rank"])] = f"exit code {m['code']}" + (f": {why}" if why and why != "<N/A>" else "")
    if root_part and (m := FAILURE_ENTRY.search(root_part)):
        root = int(m["rank"])
    return out, root


AGENT_STOP = "exit code -15"
"""SIGTERM: how torchrun's agent stops its other workers once one failed, so not a cause."""


def every_failure(
    logs: Sequence[Path], raised_by_peer: Callable[[int], bool] = lambda rank: False
) -> tuple[dict[int, str], int | None]:
    """Every node's torchrun failure summary merged, and the root cause: a rank a signal other than the
    agent's own SIGTERM ended and that did not raise on a peer's loss first (`raised_by_peer`: its
    post-mortem says a collective raised), else one a signal ended, else torchrun's first named.

    torchrun names the failure it saw first, and a consequence is often seen before the cause: a peer that
    raised on the lost connection (exit code 1: the capture tests/data/forensics/torchrun-failure-root-not-
    killed.log), or one that aborted as it did (SIGABRT, seen across nodes), while the rank that was killed
    sits under Failures or in another node's summary."""
    failures, roots = {}, []
    for log in logs:
        found, root = torchrun_failures(log)
        failures.update(found)
        roots += [] if root is None else [root]

    def by_signal(rank: int) -> bool:
        return failures.get(rank, "").startswith("exit code -")

    causes = [
        r
        for r in dict.fromkeys([*roots, *sorted(failures)])
        if by_signal(r) and not failures[r].startswith(AGENT_STOP)
    ]
    first = [r for r in causes if not raised_by_peer(r)] or causes or [r for r in roots if by_signal(r)]
    return failures, (first or roots or [None])[0]


def exit_detail(code: int) -> str:
    if code < 0:
        try:
            return f"exit code {code}: killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"exit code {code}"
    return f"exit code {code}"


def collect(
    raw_dir: Path,
    prefix: str,
    *,
    world: int,
    reason: str,
    store: tuple[str, int] | None = None,
    exit_codes: dict[int, int] | None = None,
    first_failed: int | None = None,
    torchrun_logs: Sequence[Path] = (),
    wait_s: float = ANSWER_WAIT_S,
    node_dirs: Sequence[Path] = (),
    ask_live: bool = True,
) -> Findings:
    """Ask (unless ask_live is False: the ranks already left their records), read, classify and diagnose; the
    result is written beside the logs. The store asked is the one the ranks' hellos name, else `store`."""
    here = socket.gethostname()
    folders = [answer.folder(d, prefix) for d in (node_dirs or [raw_dir])]

    def written(rank: int, kind: str) -> dict | None:  # a rank's file, in whichever node's folder holds it
        return next(
            (found for f in folders if (found := read_json(f / f"rank{rank}.{kind}.json")) is not None), None
        )

    def hello_of(rank: int) -> dict:  # read when needed: a rank slow to start writes its hello late
        return written(rank, "hello") or {}

    def local_state(rank: int) -> str | None:
        hello = hello_of(rank)
        if "pid" not in hello or hello.get("host") not in (here, answer.host_name()):
            return "unknown"
        return process_state(int(hello["pid"]))

    def settled(answers: dict) -> bool:  # every rank not answering is one this host sees stopped or gone
        return all(r in answers or (local_state(r) or "T").startswith(("T", "Z")) for r in range(world))

    hellos = {r: h for r in range(world) if (h := hello_of(r))}
    told = next((tuple(h["store"]) for h in hellos.values() if h.get("store", [""])[0]), None)
    path = Path(raw_dir) / f"{prefix}{RESULT}"
    before = read_json(path) or {}  # this launch's live ask, when this is the reading after the copy-back
    answers, asked = (
        {},
        f"before the kill: {before['asked']}" if "asked" in before else "not asked: the ranks had ended",
    )
    ras = before.get("ncclras", "not asked after a failure")
    if ask_live and (told or store):
        answers, asked = ask(told or store, world, wait_s, settled)
        asked += f" (the store named by {len(hellos)} hellos)" if told else f" (no hello in {folders[0]} yet)"
        ras = ras_view(Path(raw_dir) / f"{prefix}ncclras.txt")
    failures, root = every_failure(
        torchrun_logs, lambda rank: bool((written(rank, "post_mortem") or {}).get("in_collective"))
    )
    first = first_failed if first_failed is not None else root
    codes = {**{r: exit_detail(c) for r, c in (exit_codes or {}).items() if c != 0}, **failures}

    def said_by(rank: int) -> tuple[dict | None, str]:
        """What the rank told: asked just now, asked and read from its node's folder, or on its way out."""
        if rank in answers:
            return answers[rank], "answered"
        if (said := written(rank, "answer")) is not None:
            return said, "answered"
        return written(rank, "post_mortem"), "post_mortem"

    # the reading after the kill, of a rank that did not answer the live ask: its process is gone by the
    # launcher's hand now, so what was seen of it then stands
    again = not ask_live and reason == before.get("reason") == "timeout"
    silent_before = {
        r["rank"]: (r["heard"], r.get("detail", ""))
        for r in before.get("records", [])
        if again and isinstance(r, dict) and r.get("heard") in SILENT
    }
    records = []
    for rank in range(world):
        said, heard = said_by(rank)
        record = Record(rank=rank, host=str((said or hello_of(rank)).get("host", "?")))
        if said is None and rank in silent_before and rank not in codes:
            record.heard, record.detail = silent_before[rank]
        elif said is None:
            record.heard, record.detail = _silence(rank, local_state(rank), codes, hello_of(rank), first)
        else:
            record.heard = heard
            record.entries = said.get("flight_record", {}).get("entries", [])
            record.stack = main_stack(said.get("stacks", ""), said.get("main_thread", ""))
            record.error = said.get("error", "")
            if said.get("in_collective") and record.entries:
                # the newest recorded, in any group (sequence numbers are each group's own); the recorder
                # may have retired it
                failed = max(record.entries, key=lambda e: e.get("record", 0))
                failed.update(done=False, state="failed")
            if rank in codes and heard == "post_mortem":
                record.detail = codes[rank]
        records.append(record)
    name_silent_hosts(records, [*hellos.values(), *answers.values()])
    rows, line = diagnose(records, world)
    path.write_text(
        json.dumps(
            {
                "reason": reason,
                "line": line,
                "rows": [r.as_dict() for r in rows],
                "answer_wait_s": wait_s,
                "asked": asked,
                "ncclras": ras,
                "records": [
                    {k: v for k, v in r.__dict__.items() if k != "entries"} | {"entries": r.entries[-16:]}
                    for r in records
                ],
            },
            indent=1,
        )
    )
    return Findings(line=line, rows=rows, path=path, reason=reason)


def name_silent_hosts(records: list[Record], told: list[dict]) -> None:
    """A rank whose hello is on another node's disk takes its host from a rank of the same node that told
    (a hello or an answer): torchrun numbers a node's ranks contiguously, LOCAL_WORLD_SIZE of them."""
    for record in records:
        if record.host != "?":
            continue
        for said in told:
            width = int(said.get("local_world") or 0)
            if width and said["rank"] // width == record.rank // width:
                record.host = str(said["host"])
                break


def _silence(
    rank: int, state: str | None, codes: dict[int, str], hello: dict, first: int | None
) -> tuple[str, str]:
    """(heard, detail) of a rank that neither answered nor left a record."""
    if first is not None and rank != first and (rank in codes or state is None):
        return "ended", f"{codes.get(rank, 'its process is gone')}, after rank {first} failed first"
    if rank in codes:
        return "dead", codes[rank]
    if not hello:  # its hello is on another node's disk, or it never started
        return "silent", "no answer within the wait, and its node's records are not readable from here"
    if state is None:
        return "dead", "its process is gone"
    if state.startswith("T"):
        return "stopped", f"process state {state}"
    if state == "unknown":
        return "silent", f"on {hello.get('host', '?')}, not this host: its state is not readable here"
    return "silent", f"process state {state}"


RAS_TIMEOUT_S = 15.0


def ras_view(out: Path) -> str:
    """NCCL RAS's own view of the job (`ncclras`, NCCL >= 2.26, asked on this node), kept beside the
    forensics; never a verdict of its own: RAS saying the job is fine never clears a hang."""
    if not shutil.which("ncclras"):
        return "ncclras is not on this machine's PATH (NCCL >= 2.26 installs it)"
    try:
        done = subprocess.run(["ncclras"], capture_output=True, text=True, timeout=RAS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"ncclras gave no answer within {RAS_TIMEOUT_S:.0f} s"
    out.write_text(done.stdout + done.stderr)
    return f"ncclras exited {done.returncode}: its output is {out.name}"


def forget_hellos(raw_dir: Path, prefix: str) -> None:
    """Remove the ranks' hellos of a launch that ended well (they only serve a diagnosis)."""
    shutil.rmtree(answer.folder(raw_dir, prefix), ignore_errors=True)


def in_flight(stage_dir: Path) -> list[tuple[Path, str, int]]:
    """The launches under a stage's raw folder whose ranks said hello and that no reading has diagnosed yet:
    (their raw folder, their log prefix, their world size)."""
    out = []
    for folder in sorted(Path(stage_dir).glob(f"**/*{answer.FOLDER}")):
        prefix = folder.name[: -len(answer.FOLDER)]
        hellos = [h for p in folder.glob("rank*.hello.json") if (h := read_json(p))]
        if hellos and not (folder.parent / f"{prefix}{RESULT}").exists():
            out.append((folder.parent, prefix, max(int(h.get("world") or 0) for h in hellos) or len(hellos)))
    return out


def ask_before_the_stage_is_killed(stage_dir: Path, since: float) -> list[Findings]:
    """At a stage's own timeout (the runner's kill, not a launch's): every launch still in flight asked; where
    none was left to ask, the readings its launches made themselves since `since` (wall clock): a launch's
    timeout that came with the stage's has just asked its ranks."""
    asked = [
        collect_quietly(d, prefix, world=world, reason="timeout") for d, prefix, world in in_flight(stage_dir)
    ]
    found = [f for f in asked if f is not None]
    return found or readings_since(stage_dir, since)


def readings_since(stage_dir: Path, since: float) -> list[Findings]:
    """The forensics readings under a stage's raw folder written since `since`, newest first."""
    out = []
    for path in Path(stage_dir).glob(f"**/*{RESULT}"):
        mtime = path.stat().st_mtime
        reading = read_json(path) if mtime >= since else None
        if reading and reading.get("line"):
            out.append((mtime, Findings(reading["line"], [], path, str(reading.get("reason", "")))))
    return [f for _, f in sorted(out, key=lambda x: -x[0])]


def collect_quietly(raw_dir: Path, prefix: str, **kwargs) -> Findings | None:
    """collect(), never in the way of the failure it explains: its own error is printed, not raised."""
    try:
        return collect(raw_dir, prefix, **kwargs)
    except Exception as e:  # noqa: BLE001
        print(f"hang forensics failed: {type(e).__name__}: {e}", flush=True)
        return None


def explained(message: str, findings: Findings | None) -> str:
    """A launch's failure message with the forensics' line."""
    return (
        message if findings is None else f"{message}. Forensics: {findings.line} (raw/{findings.path.name})"
    )
