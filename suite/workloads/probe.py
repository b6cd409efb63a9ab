"""Which collective and point-to-point primitives the backend supports, each tried for real on every rank.

    python -m suite probe --profile gloo-cpu                        # its own launch (suite/commands/probe.py)
    ctx.torchrun("suite.workloads.collective_sweep", [..., "--probe"])   # inside the bandwidth stage's launch

Each primitive runs once on a small buffer of known values (rank + 1 + i, small integers: any summation
order gives the same bits) and its result is compared elementwise with the value it must have. A primitive
that raises is recorded with its error's first line; the others go on. Every rank writes its own rows
(case `probe.<primitive>`, metric `wrong`: elements differing from the expected value, NaN when it raised;
text `ok: …` or `error: …`), so no collective is needed to gather them.

Deliberate mistakes (`--mistakes wrong.<primitive>`, for the tests): the last rank adds 1 to its result's
first element before the check, as a broken link or library would.
"""

from __future__ import annotations

import argparse
from typing import Callable

import torch
import torch.distributed as dist

from suite.results import Row
from suite.stages._probe import CASE_PREFIX, MISTAKE_PREFIX, PRIMITIVES, unknown_mistakes
from suite.workloads.worker import Worker, worker_session
from suite.workloads.worker_cli import mistakes_from

COUNT = 16
"""Elements per rank: enough to tell a misplaced chunk from a right one, small enough for any backend."""
POINT_TO_POINT = ("send_recv", "isend_irecv", "batch_isend_irecv")


def values(base: int, count: int, device) -> torch.Tensor:
    """base + i, float32: exact small integers."""
    return torch.arange(count, dtype=torch.float32, device=device) + base


# Each trial runs the primitive and returns (results, expected): lists of tensors compared elementwise.
Trial = Callable[[int, int, torch.device], tuple[list[torch.Tensor], list[torch.Tensor]]]


def all_reduce(rank, n, device):
    x = values(rank + 1, COUNT, device)
    dist.all_reduce(x)
    return [x], [values(0, COUNT, device) * n + n * (n + 1) // 2]


def all_gather(rank, n, device):
    out = [torch.zeros(COUNT, device=device) for _ in range(n)]
    dist.all_gather(out, values(rank + 1, COUNT, device))
    return out, [values(j + 1, COUNT, device) for j in range(n)]


def all_gather_into_tensor(rank, n, device):
    out = torch.zeros(n * COUNT, device=device)
    dist.all_gather_into_tensor(out, values(rank + 1, COUNT, device))
    return [out], [torch.cat([values(j + 1, COUNT, device) for j in range(n)])]


def reduce_scatter_tensor(rank, n, device):
    inp = values(rank + 1, n * COUNT, device)
    out = torch.zeros(COUNT, device=device)
    dist.reduce_scatter_tensor(out, inp)
    mine = values(rank * COUNT, COUNT, device)  # chunk `rank` of every input: Σ_j (j + 1 + rank·COUNT + i)
    return [out], [mine * n + n * (n + 1) // 2]


def all_to_all_single(rank, n, device):
    # rank r's chunk for peer j holds 100·r + j + i; rank r then holds, from each j, 100·j + r + i
    inp = torch.cat([values(100 * rank + j, COUNT, device) for j in range(n)])
    out = torch.zeros_like(inp)
    dist.all_to_all_single(out, inp)
    return [out], [torch.cat([values(100 * j + rank, COUNT, device) for j in range(n)])]


def broadcast(rank, n, device):
    x = values(7, COUNT, device) if rank == 0 else torch.zeros(COUNT, device=device)
    dist.broadcast(x, src=0)
    return [x], [values(7, COUNT, device)]


def barrier(rank, n, device):
    dist.barrier()
    return [], []


def _ring(rank, n):
    return (rank + 1) % n, (rank - 1) % n


def send_recv(rank, n, device):
    """A ring shift with blocking calls: even ranks send first, odd ones receive first (no deadlock)."""
    nxt, prv = _ring(rank, n)
    send, recv = values(rank + 1, COUNT, device), torch.zeros(COUNT, device=device)
    if rank % 2 == 0:
        dist.send(send, nxt)
        dist.recv(recv, prv)
    else:
        dist.recv(recv, prv)
        dist.send(send, nxt)
    return [recv], [values(prv + 1, COUNT, device)]


def isend_irecv(rank, n, device):
    nxt, prv = _ring(rank, n)
    send, recv = values(rank + 1, COUNT, device), torch.zeros(COUNT, device=device)
    for request in (dist.irecv(recv, prv), dist.isend(send, nxt)):
        request.wait()
    return [recv], [values(prv + 1, COUNT, device)]


def batch_isend_irecv(rank, n, device):
    nxt, prv = _ring(rank, n)
    send, recv = values(rank + 1, COUNT, device), torch.zeros(COUNT, device=device)
    for request in dist.batch_isend_irecv(
        [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
    ):
        request.wait()
    return [recv], [values(prv + 1, COUNT, device)]


TRIALS: dict[str, Trial] = {name: globals()[name] for name in PRIMITIVES}


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip()


def try_one(name: str, w: Worker, mistakes: list[str]) -> tuple[float, str]:
    """(wrong elements, or NaN when it raised or cannot run; the row's text)."""
    if name in POINT_TO_POINT and w.world < 2:
        return float("nan"), "not run: point-to-point needs 2 ranks"
    try:
        results, expected = TRIALS[name](w.rank, w.world, w.device)
        w.synchronize()
    except Exception as error:  # noqa: BLE001 - an unsupported primitive is a finding, not a crash
        return float("nan"), "error: " + first_line(error)
    if MISTAKE_PREFIX + name in mistakes and w.rank == w.world - 1 and results:
        results[0].view(-1)[0] += 1
    wrong = sum(int((got != want).sum().item()) for got, want in zip(results, expected))
    checked = sum(t.numel() for t in expected)
    return float(wrong), (f"ok: {checked} elements checked, {wrong} wrong" if checked else "ok: completed")


def probe_rows(w: Worker, stage: str, mistakes: list[str]) -> list[Row]:
    """This rank's row for every primitive, in PRIMITIVES order."""
    rows = []
    for i, name in enumerate(PRIMITIVES):
        w.progress(f"probe {name}", done=i, of=len(PRIMITIVES))
        wrong, text = try_one(name, w, mistakes)
        rows.append(
            Row(
                stage=stage,
                case=CASE_PREFIX + name,
                metric="wrong",
                value=wrong,
                unit="count",
                count=COUNT,
                dtype="float32",
                source="torch",
                world=w.world,
                rank=w.rank,
                text=text,
            )
        )
        print(f"probe {name}: {text}", flush=True)
    return rows


def check_mistakes(mistakes: list[str], error: Callable[[str], None]) -> None:
    problem = unknown_mistakes(mistakes)
    if problem:
        error(problem)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stage", default="probe", help="stage name the rows carry")
    p.add_argument("--mistakes", default="", help="comma-separated wrong.<primitive> (tests)")
    args = p.parse_args(argv)
    mistakes = mistakes_from(args)
    check_mistakes(mistakes, p.error)
    with worker_session() as w:
        w.emit(probe_rows(w, args.stage, mistakes))


if __name__ == "__main__":
    main()
