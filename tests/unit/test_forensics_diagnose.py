"""The forensics' reading, on records built from real dumps: torch's Flight Recorder on gloo
(tests/data/forensics/fr-gloo-rank0-pending.json), torchrun's failure summary
(tests/data/forensics/torchrun-failure-sigkill.log); and the lines each kind of hang gets."""

from __future__ import annotations

import json
from pathlib import Path

from suite.forensics.answer import condense
from suite.forensics.collect import every_failure, torchrun_failures
from suite.forensics.diagnose import Record, diagnose, main_stack, where

DATA = Path(__file__).resolve().parents[1] / "data" / "forensics"


def fr_entries() -> list[dict]:
    return condense(json.loads((DATA / "fr-gloo-rank0-pending.json").read_text()))["entries"]


def at(entries: list[dict], upto: int, pending: bool, pg: str = "0") -> list[dict]:
    """The real dump's default-group entries cut to sequence number `upto`; the last pending or done."""
    out = [dict(e) for e in entries if e["pg"] != pg or e["seq"] <= upto]
    last = max((e for e in out if e["pg"] == pg), key=lambda e: e["seq"])
    last["done"] = not pending
    return out


def test_a_real_gloo_dump_condenses_to_groups_sequence_numbers_and_completion():
    entries = fr_entries()
    assert [(e["pg"], e["seq"], e["op"], e["done"]) for e in entries] == [
        ("default_pg", 1, "gloo:all_reduce", True),
        ("default_pg", 2, "gloo:all_reduce", True),
        ("default_pg", 3, "gloo:all_reduce", True),
        ("default_pg", 4, "gloo:all_gather", True),
        ("1", 1, "gloo:all_reduce", True),  # a group made without a name: its id
        ("default_pg", 5, "gloo:all_reduce", False),  # in flight when dumped: the other rank slept
    ]


def default(entries, upto, pending):
    return at(entries, upto, pending, pg="default_pg")


def test_one_rank_behind_is_named_with_where_it_is():
    e = fr_entries()
    stack = (
        "Thread 0x1 (most recent call first):\n"
        '  File "/x/train.py", line 41 in step\n  File "/x/train.py", line 9 in <module>'
    )
    records = [Record(r, "node-a", "answered", entries=e) for r in (0, 1, 3)]
    records.append(Record(2, "node-b", "answered", entries=default(e, 4, pending=False), stack=stack))
    rows, line = diagnose(records, 4)
    expected = "rank 2 on node-b never entered all_reduce #5 (it is at train.py:41 in step)"
    assert line == expected + "; the other 3 wait in it"
    assert [(r.rank, r.last_completed, r.first_pending) for r in rows if r.pg == "default_pg"] == [
        (0, "all_gather #4", "all_reduce #5"),
        (1, "all_gather #4", "all_reduce #5"),
        (2, "all_gather #4", "—"),
        (3, "all_gather #4", "all_reduce #5"),
    ]


def test_every_rank_in_the_same_collective_blames_no_rank():
    e = fr_entries()
    _, line = diagnose([Record(r, "a", "answered", entries=e) for r in range(4)], 4)
    assert line == "every rank waits in all_reduce #5: the fabric or the library, not one rank"


def test_different_operations_at_one_sequence_number_are_a_mismatch():
    e = fr_entries()
    other = [dict(x, op="gloo:broadcast") if x["seq"] == 5 and x["pg"] == "default_pg" else x for x in e]
    records = [Record(0, "a", "answered", entries=e), Record(1, "a", "answered", entries=other)]
    _, line = diagnose(records, 2)
    assert line == "collective mismatch at #5: rank 0 on a in all_reduce; rank 1 on a in broadcast"


def test_a_rank_ahead_is_counted_in_collectives():
    e = fr_entries()
    ahead = default(e, 5, pending=False) + [dict(e[-1], seq=6, done=False), dict(e[-1], seq=7, done=False)]
    records = [Record(0, "a", "answered", entries=ahead)]
    records += [Record(r, "b", "answered", entries=e) for r in (1, 2, 3)]
    _, line = diagnose(records, 4)
    assert line == "rank 0 on a is 1 collective ahead (in all_reduce #6); the other 3 wait in all_reduce #5"


def test_a_rank_stuck_in_an_earlier_collective_is_named_as_behind():
    e = fr_entries()
    records = [Record(0, "a", "answered", entries=default(e, 4, pending=True))]
    records += [Record(r, "b", "answered", entries=e) for r in (1, 2, 3)]
    _, line = diagnose(records, 4)
    assert (
        line
        == "rank 0 on a is still in all_gather #4, so it never entered all_reduce #5; the other 3 wait in it"
    )


def test_sequence_numbers_are_never_compared_across_groups():
    e = fr_entries()
    # group 1's #1 pending on rank 1 only: in the default group both wait in #5, in group 1 rank 0 is done
    sub_pending = [dict(x, done=False) if x["pg"] == "1" else x for x in e]
    rows, line = diagnose(
        [Record(0, "a", "answered", entries=e), Record(1, "a", "answered", entries=sub_pending)], 2
    )
    assert line == "every rank waits in all_reduce #5: the fabric or the library, not one rank"
    assert {(r.pg, r.rank): r.first_pending for r in rows}[("1", 1)] == "all_reduce #1"


def test_silent_ranks_are_named_by_what_the_launcher_saw():
    e = fr_entries()
    waiting = [Record(r, "a", "answered", entries=e) for r in (0, 1)]
    _, stopped = diagnose([*waiting, Record(2, "a", "stopped", detail="process state T (stopped)")], 3)
    expected = "rank 2 on a was stopped (it could not answer: process state T (stopped))"
    assert stopped == expected + "; the other 2 wait in all_reduce #5"
    _, dead = diagnose([*waiting, Record(2, "a", "dead", detail="exit code -9: killed by SIGKILL")], 3)
    assert dead.startswith("rank 2 on a died (exit code -9: killed by SIGKILL); the other 2 wait in")
    _, alone = diagnose([Record(0, "a", "dead", detail="exit code 1"), Record(1, "a", "ended")], 2)
    assert alone == "rank 0 on a died (exit code 1); the others were ended before they told where they were"


def test_torchruns_failure_summary_gives_each_ranks_exit_and_the_root_cause():
    failures, root = torchrun_failures(DATA / "torchrun-failure-sigkill.log")
    assert root == 2
    assert failures[2].startswith("exit code -9: Signal 9 (SIGKILL) received by PID")
    assert {r: failures[r].split(":")[0] for r in (0, 1, 3)} == dict.fromkeys((0, 1, 3), "exit code -15")


def test_the_killed_rank_is_the_root_cause_even_when_torchrun_saw_a_peer_fail_first():
    log = DATA / "torchrun-failure-root-not-killed.log"
    failures, named = torchrun_failures(log)
    assert named == 0 and failures[0].startswith("exit code 1")  # torchrun's own root cause: a peer
    assert failures[3].startswith("exit code -9") and failures[1].startswith("exit code -15")
    assert every_failure([log]) == (failures, 3)
    assert every_failure([DATA / "torchrun-failure-sigkill.log"])[1] == 2  # there torchrun named it itself


def test_across_nodes_the_killed_rank_is_the_cause_not_the_peer_that_aborted_on_losing_it():
    logs = [DATA / "torchrun-two-nodes-kill-node-a.log", DATA / "torchrun-two-nodes-kill-node-b.log"]
    failures, first_named = every_failure(logs)
    assert failures[1].startswith("exit code -6") and failures[3].startswith("exit code -9")
    assert first_named == 1  # node-a's summary comes first and names its aborted rank
    # rank 1's post-mortem says a collective raised it (gloo: "Connection closed by peer"): a consequence
    assert every_failure(logs, raised_by_peer=lambda rank: rank == 1)[1] == 3


def test_the_main_threads_stack_is_read_past_torchs_frames():
    dump = (
        "Current thread 0x00007f26477fe6c0 (most recent call first):\n  <no Python frame>\n\n"
        "Thread 0x00007f266dc91b80 (most recent call first):\n"
        '  File "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252 '
        "in all_reduce\n"
        '  File "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper\n'
        '  File "/tmp/fr/w.py", line 12 in <module>'
    )  # faulthandler's dump of a rank blocked in all_reduce (seen 2026-12-07, torch 2.13 on gloo)
    stack = main_stack(dump, "0x00007f266dc91b80")
    assert stack.startswith("Thread 0x00007f266dc91b80")
    assert where(stack) == "w.py:12 in <module>"


def test_a_ranks_answer_holds_both_recorders_entries_where_the_build_has_both(monkeypatch):
    """A CUDA build dumps NCCL's entries through its own function (not run here: no CUDA build); the
    answer takes the entries of every recorder the build has, each in the same format."""
    import torch._C._distributed_c10d as c10d

    from suite.forensics import answer

    gloo = (DATA / "fr-gloo-rank0-pending.json").read_bytes()
    nccl = json.loads(gloo)
    for e in nccl["entries"]:  # NCCL moves its entries' state on: completed, or started while in flight
        e.update(profiling_name=e["profiling_name"].replace("gloo", "nccl"), retired=False)
        e["state"] = "completed" if e["collective_seq_id"] < 5 else "started"
    monkeypatch.setattr(c10d, "_dump_fr_trace_json", lambda *a: gloo, raising=False)
    monkeypatch.setattr(c10d, "_dump_nccl_trace_json", lambda *a: json.dumps(nccl).encode(), raising=False)
    got = answer.flight_record()
    assert len(got["entries"]) == 12 and "error" not in got
    assert [(e["op"], e["done"]) for e in got["entries"][6:] if e["pg"] == "default_pg"] == [
        ("nccl:all_reduce", True),
        ("nccl:all_reduce", True),
        ("nccl:all_reduce", True),
        ("nccl:all_gather", True),
        ("nccl:all_reduce", False),
    ]
    monkeypatch.delattr(c10d, "_dump_nccl_trace_json")
    assert len(answer.flight_record()["entries"]) == 6  # the CPU build: gloo's alone


def test_a_stage_killed_just_after_its_launch_asked_reports_that_reading(tmp_path):
    """The launch's own timeout can come with the stage's: the launch asked its ranks and wrote its reading;
    the runner, finding no launch left to ask, takes that reading (one written before the stage began is not
    this attempt's)."""
    import os
    import time

    from suite.forensics.collect import ask_before_the_stage_is_killed

    old = tmp_path / "probe.forensics.json"
    old.write_text(json.dumps({"line": "an earlier attempt's", "reason": "timeout"}))
    os.utime(old, (time.time() - 100, time.time() - 100))
    since = time.time() - 1
    assert ask_before_the_stage_is_killed(tmp_path, since) == []
    (tmp_path / "torch.forensics.json").write_text((DATA / "stop-rank2-fork.forensics.json").read_text())
    (found,) = ask_before_the_stage_is_killed(tmp_path, since)
    assert found.line.startswith("rank 2 on ") and found.path.name == "torch.forensics.json"


def test_the_reading_after_the_kill_keeps_what_the_live_ask_saw_of_a_silent_rank(tmp_path):
    """Across nodes the launcher asks, kills, copies every node's records back and reads again: a rank that
    did not answer the live ask is gone by then by the launcher's hand, and must not read as one that died."""
    from suite.forensics import answer
    from suite.forensics.collect import RESULT, collect

    folder = answer.folder(tmp_path, "hang.")
    folder.mkdir(parents=True)
    for rank in (0, 1):
        # pids at or past 2**22 (Linux's highest pid_max) never exist: both processes are gone
        hello = {"rank": rank, "host": answer.host_name(), "pid": 2**22 + rank, "local_world": 2, "world": 2}
        (folder / f"rank{rank}.hello.json").write_text(json.dumps(hello))
    (folder / "rank0.answer.json").write_text(
        json.dumps({"rank": 0, "host": answer.host_name(), "flight_record": {"entries": fr_entries()}})
    )
    live = {"rank": 1, "heard": "silent", "detail": "process state S (sleeping)", "host": answer.host_name()}
    (tmp_path / f"hang.{RESULT}").write_text(
        json.dumps({"reason": "timeout", "asked": "…", "records": [live]})
    )
    found = collect(tmp_path, "hang.", world=2, reason="timeout", ask_live=False)
    assert found.line.startswith(
        f"rank 1 on {answer.host_name()} did not answer (process state S (sleeping))"
    )
    # a reading after a failure is not the live ask's second half: there the gone process is what was seen
    failed = collect(tmp_path, "hang.", world=2, reason="failed", ask_live=False)
    assert "rank 1" in failed.line and "did not answer (process state S" not in failed.line


def test_answers_still_arriving_extend_the_wait_and_a_silent_rank_does_not(monkeypatch):
    """A busy machine answers slowly: the wait goes on LATE_ANSWER_S past the latest answer, so a rank that
    answers late is not taken for a silent one; with no answer coming the wait ends at its bound."""
    import threading
    import time
    from datetime import timedelta

    import torch.distributed as dist

    from suite.forensics import answer, collect

    monkeypatch.setattr(collect, "LATE_ANSWER_S", 2.0)
    store = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10)
    )

    def answer_at(rank: int, after_s: float) -> threading.Thread:
        def say() -> None:
            time.sleep(after_s)
            store.set(answer.answer_key(rank), json.dumps({"rank": rank}))

        return threading.Thread(target=say, daemon=True)

    late = [answer_at(0, 0.5), answer_at(1, 1.5)]  # the second after the 1-s bound, 1 s after the first
    for t in late:
        t.start()
    answers, said = collect.ask(("127.0.0.1", store.port), 3, 1.0, lambda got: False)
    assert sorted(answers) == [0, 1], said
    assert "2 of 3 answered" in said
    took = float(said.rsplit(" in ", 1)[1].split(" s")[0])
    assert 3.0 <= took < 10.0, said  # rank 2 never answers: 2 s past the last answer, not ANSWER_WAIT_MAX_S
