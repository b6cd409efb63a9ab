"""A rank's side of the forensics: what it tells about itself, asked or on its way out.

    start(rank, raw_dir, prefix)     # in worker_session, once the group is up
    leave_post_mortem(error)         # on an exception leaving the worker

The question comes through the launch's rendezvous store (MASTER_ADDR:MASTER_PORT), polled by a daemon thread
on a connection of its own: the main thread may be blocked inside a collective, which releases the GIL, so the
thread can still answer. A stopped (SIGSTOP) or dead rank cannot: collect.py names it from its process state.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import socket
import sys
import tempfile
import threading
import time
import traceback
from datetime import timedelta
from pathlib import Path

ASK_KEY = "cardtime/forensics/ask"
POLL_S = 0.25
COLLECTIVE_FILES = ("distributed_c10d.py",)
"""Where torch's collectives raise from: an exception through it was the collective's own."""
COMMUNICATION_ERROR = re.compile(
    r"gloo|nccl|ProcessGroup|c10d|Connection (?:closed|reset) by peer|Broken pipe|timed out|Timeout", re.I
)
"""A backend's error words: DDP's gradient all-reduce raises through autograd, not distributed_c10d.py."""
FOLDER = "forensics"
"""raw/<stage>/[<tag>.]forensics/: each rank's hello (pid, host) and, on an exception, its post-mortem."""


def answer_key(rank: int) -> str:
    return f"cardtime/forensics/rank{rank}"


def folder(raw_dir: Path, prefix: str) -> Path:
    return Path(raw_dir) / f"{prefix}{FOLDER}"


def host_name() -> str:
    """The node's name as the run knows it (multi-node launches set CARDTIME_NODE_NAME), else the host's."""
    return os.environ.get("CARDTIME_NODE_NAME") or socket.gethostname()


RECORDERS = ("_dump_fr_trace_json", "_dump_nccl_trace_json")
"""torch's dumps of its Flight Recorder: the one of CPU backends (gloo) and, in CUDA builds, NCCL's own
(each `(includeCollectives, onlyActive) -> JSON bytes`); a rank's answer holds the entries of both."""


def flight_record() -> dict:
    """This process's Flight Recorder entries, condensed to what the diagnosis reads; empty when it is off."""
    import torch._C._distributed_c10d as c10d

    entries, errors, version = [], [], ""
    for name in RECORDERS:
        dump_json = getattr(c10d, name, None)
        if dump_json is None:  # a CPU build has no NCCL recorder
            continue
        try:
            dump = condense(json.loads(dump_json(True, False)))
        except Exception as e:  # noqa: BLE001 - a recorder that is off or failed: the answer says so
            errors.append(f"{name}: {type(e).__name__}: {e}")
            continue
        entries += dump["entries"]
        version = version or dump["version"]
    return {"version": version, "entries": entries, **({"error": "; ".join(errors)} if errors else {})}


def condense(dump: dict) -> dict:
    """The fields of a Flight Recorder dump (torch's `_dump_fr_trace_json`) that the diagnosis reads."""
    entries = []
    for e in dump.get("entries", []):
        group_id, group_name = (e.get("process_group") or [str(e.get("pg_id", 0)), ""])[:2]
        entries.append(
            {
                # a group created without a name is 'undefined' on every rank: its id tells them apart
                "pg": str(group_id if group_name in ("", "undefined") else group_name),
                "seq": int(e.get("collective_seq_id", 0)),
                "record": int(e.get("record_id", 0)),  # the order of recording, across every group
                "p2p": bool(e.get("is_p2p", False)),
                "p2p_seq": int(e.get("p2p_seq_id", 0)),
                "op": str(e.get("profiling_name", "")),
                "sizes": e.get("input_sizes", []),
                # gloo leaves state at "scheduled" and marks a finished work retired; NCCL moves state on
                "done": bool(e.get("retired")) or e.get("state") == "completed",
                "state": str(e.get("state", "")),
            }
        )
    return {"version": dump.get("version", ""), "entries": entries}


def stacks() -> str:
    """Every thread's Python stack, as faulthandler writes it (it reads frames without taking the GIL)."""
    with tempfile.TemporaryFile(mode="w+") as f:
        faulthandler.dump_traceback(f, all_threads=True)
        f.seek(0)
        return f.read()


def snapshot(rank: int, error: str | None = None) -> dict:
    return {
        "rank": rank,
        "host": host_name(),
        "pid": os.getpid(),
        "main_thread": _main_thread(),
        "local_world": int(os.environ.get("LOCAL_WORLD_SIZE", "0")),
        "time": time.time(),
        "flight_record": flight_record(),
        "stacks": stacks(),
        **({"error": error[:2000]} if error else {}),
    }


_state: dict = {}


def start(rank: int, raw_dir: Path, prefix: str) -> None:
    """Leave a hello (who this rank is and where) and start answering the launcher's question."""
    out = folder(raw_dir, prefix)
    out.mkdir(parents=True, exist_ok=True)
    hello = {
        "rank": rank,
        "host": host_name(),
        "pid": os.getpid(),
        "local_world": int(os.environ.get("LOCAL_WORLD_SIZE", "0")),
        "world": int(os.environ.get("WORLD_SIZE", "0")),
        # where it listens for the question: under c10d rendezvous not the rendezvous endpoint but the store
        # the hosting agent opened for the workers on a port of its own
        "store": [os.environ.get("MASTER_ADDR", ""), int(os.environ.get("MASTER_PORT", "0") or 0)],
    }
    (out / f"rank{rank}.hello.json").write_text(json.dumps(hello))
    _state.update(rank=rank, folder=out)
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if addr and port:
        threading.Thread(target=_answer_when_asked, args=(rank, addr, int(port), out), daemon=True).start()


def _answer_when_asked(rank: int, addr: str, port: int, out: Path) -> None:
    """Poll for the question; answer through the store and beside the hello (a node whose disk is its own
    has its answer copied back with its logs)."""
    import torch.distributed as dist

    try:
        store = dist.TCPStore(addr, port, is_master=False, timeout=timedelta(seconds=30))
        while not store.check([ASK_KEY]):
            time.sleep(POLL_S)
        said = json.dumps(snapshot(rank))
        (out / f"rank{rank}.answer.json").write_text(said)
        store.set(answer_key(rank), said)
    except Exception as e:  # noqa: BLE001 - the store went away with the launch: nobody is asking any more
        print(
            f"forensics: rank {rank} stopped listening: {type(e).__name__}: {e}", file=sys.stderr, flush=True
        )


def raised_in(error: BaseException) -> str:
    """The exception's traceback as faulthandler words a stack (most recent call first), so that one reader
    serves both."""
    frames = traceback.extract_tb(error.__traceback__)
    lines = [f'  File "{f.filename}", line {f.lineno} in {f.name}' for f in reversed(frames)]
    return f"Thread {_main_thread()} (most recent call first):\n" + "\n".join(lines)


def raised_by_communication(error: BaseException) -> bool:
    """Whether a collective raised `error` (its last recorded collective then failed, whatever the recorder
    marked): raised through torch's collectives, or in a backend's words."""
    frames = traceback.extract_tb(error.__traceback__)
    if any(f.filename.endswith(COLLECTIVE_FILES) for f in frames):
        return True
    return type(error).__name__ in ("DistBackendError", "DistNetworkError") or bool(
        COMMUNICATION_ERROR.search(str(error))
    )


def _main_thread() -> str:
    return f"0x{threading.main_thread().ident:016x}"


def leave_post_mortem(error: BaseException) -> None:
    """Write this rank's record beside its hello before an exception ends it (a peer died, a timeout): the
    traceback it raised with, and whether a collective raised it (its last recorded collective then failed,
    whatever the recorder marked)."""
    if "folder" not in _state:
        return
    try:
        record = snapshot(_state["rank"], error=f"{type(error).__name__}: {error}")
        record["stacks"] = raised_in(error)
        record["in_collective"] = raised_by_communication(error)
        (_state["folder"] / f"rank{_state['rank']}.post_mortem.json").write_text(json.dumps(record))
    except Exception:  # noqa: BLE001 - the original exception matters more than its record
        pass
