"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
NCCL semantics on one card: what two ranks on one GPU get (a refusal), and what one card can check.

    python -m suite run --stages nccl1gpu --profile nccl-1gpu

Three launches of suite/stages/nccl1gpu/worker.py:
* duplicate — 2 NCCL ranks both on cuda:0. Since NCCL 2.5 this is refused at communicator creation:
  `ncclInvalidUsage … Duplicate GPU detected : rank 1 and rank 0 both on CUDA device <busid>`; an NCCL
  maintainer confirms it is not supported, even with MPS (NVIDIA/nccl#418). The refusal with that text is
  the expected, explained result: `pass`. An NCCL that accepts is a `warn` (the notebook's "2 to 4 NCCL ranks
  on one card" would then work: say which version did).
* one_rank — 1 NCCL rank: communicator creation, new_group, all_reduce with async_op=True behind a GEMM
  chain: work.wait() returns to the host at once (it orders the current stream), synchronize() waits.
* gloo_cuda — N gloo ranks with CUDA tensors on the one card: every collective against the CPU result.
On gloo-cpu the stage is skipped (CPU_SKIP says why).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from suite.config import ConfigSection, Profile
from suite.context import StageContext
from suite.facts import Facts
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.verdicts import verdicts_for

NAME = "nccl1gpu"

V = verdicts_for(NAME)

DUPLICATE_RE = re.compile(
    r"Duplicate GPU detected\s*:\s*rank (\d+) and rank (\d+) both on CUDA device ([0-9a-fA-F]+)"
)
"""NCCL's refusal (init.cc, since 2.5), as torch's DistBackendError carries it under "Last error:" and as
NCCL_DEBUG=WARN prints it."""


@dataclass(frozen=True, kw_only=True)
class Nccl1Config:
    gloo_ranks: int = 2
    """gloo processes sharing the card in the gloo_cuda case."""
    gemm_n: int = 4096
    """Size n of the fp32 n×n matmuls of the async case."""
    gemm_count: int = 40
    """fp32 n×n matmuls the async collective waits behind (~90 ms on an H100-class card)."""
    launch_timeout_s: float = 180.0
    """Limit of each launch, seconds (a refusal that hangs instead is killed and judged)."""


CONFIG = ConfigSection("nccl1", Nccl1Config, {})


def estimate(p) -> tuple[float, str]:
    return (
        3 * p.assume.torchrun_launch_s + 10.0,
        "3 launches: duplicate ranks, one rank, gloo with CUDA tensors",
    )


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    return []


def match_duplicate(text: str | None) -> dict | None:
    """The ranks and bus id of NCCL's duplicate-GPU refusal in `text`, or None."""
    m = DUPLICATE_RE.search(text or "")
    return None if m is None else {"ranks": (int(m.group(1)), int(m.group(2))), "bus_id": m.group(3)}


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    import torch

    from suite.launch.torchrun import LaunchError, loopback_interface

    nc = profile.section(CONFIG)
    version = torch.cuda.nccl.version()  # a tuple since torch 1.x's int form (e.g. 2708 for 2.7.8)
    rows = [
        Row(
            stage=NAME,
            case="versions",
            metric="nccl",
            value=float("nan"),
            unit="count",
            text=".".join(map(str, version)) if isinstance(version, tuple) else str(version),
        )
    ]
    ctx.say("2 NCCL ranks on cuda:0 (expected: refused)")
    env = {**os.environ, "NCCL_DEBUG": "WARN"}
    try:
        rows += ctx.torchrun(
            "suite.stages.nccl1gpu.worker",
            ["--case", "duplicate"],
            tag="duplicate",
            nproc=2,
            env=env,
            timeout_s=nc.launch_timeout_s,
        ).rows()
    except LaunchError as e:  # NCCL may abort the process instead of raising: its log is then the measurement
        rows.append(
            Row(
                stage=NAME,
                case="duplicate",
                metric="launch_failed",
                value=float(e.exit_code or -1),
                unit="count",
                text=f"{e}\n{e.log_tail}"[-4000:],
            )
        )
    for log in sorted(ctx.raw_dir.glob("duplicate.rank*.log")):
        warn = [
            line
            for line in log.read_text(errors="replace").splitlines()
            if "NCCL WARN" in line and DUPLICATE_RE.search(line)
        ]
        if warn:
            rows.append(
                Row(
                    stage=NAME,
                    case="duplicate",
                    metric="nccl_warn",
                    value=float("nan"),
                    unit="count",
                    text=warn[0][-400:],
                )
            )
    ctx.say("1 NCCL rank: init, new_group, async_op")
    rows += ctx.torchrun(
        "suite.stages.nccl1gpu.worker",
        ["--case", "one_rank", "--gemm-n", str(nc.gemm_n), "--gemm-count", str(nc.gemm_count)],
        tag="one_rank",
        nproc=1,
        timeout_s=nc.launch_timeout_s,
    ).rows()
    ctx.say(f"{nc.gloo_ranks} gloo ranks with CUDA tensors")
    gloo_env = {**os.environ, "GLOO_SOCKET_IFNAME": loopback_interface()}
    rows += ctx.torchrun(
        "suite.stages.nccl1gpu.worker",
        ["--case", "gloo_cuda"],
        tag="gloo_cuda",
        nproc=nc.gloo_ranks,
        env=gloo_env,
        timeout_s=nc.launch_timeout_s,
    ).rows()
    return rows


def _value(rows, case, metric, default=None):
    found = [r.value for r in rows if r.case == case and r.metric == metric]
    return found[0] if found else default


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    return duplicate_verdicts(rows) + one_rank_verdicts(rows) + gloo_cuda_verdicts(rows)


def duplicate_verdicts(rows: list[Row]) -> list[Verdict]:
    dup = [r for r in rows if r.case == "duplicate"]
    version = next((r.text for r in rows if r.case == "versions" and r.metric == "nccl"), "?")
    expected = (
        "NCCL refuses two ranks on one device: 'Duplicate GPU detected : rank A and rank B both on "
        "CUDA device …'"
    )
    if not dup:
        return [
            V.fail(
                "duplicate_gpu",
                expected=expected,
                observed="no row from the duplicate launch",
                reason="see raw/nccl1gpu/duplicate.*.log",
            )
        ]
    found = next((m for m in (match_duplicate(r.text) for r in dup) if m), None)
    if found:
        a, b = found["ranks"]
        return [
            V.passed(
                "duplicate_gpu",
                expected=expected,
                observed=f"NCCL {version}: rank {a} and rank {b} both on CUDA device {found['bus_id']}",
                reason="expected and explained: since NCCL 2.5 one communicator takes one rank per GPU "
                "(not supported, even with MPS: NVIDIA/nccl#418); one card runs one NCCL rank",
            )
        ]
    accepted = [r for r in dup if r.metric == "refused" and r.value == 0]
    if accepted and len(accepted) == len([r for r in dup if r.metric == "refused"]):
        return [
            V.warn(
                "duplicate_gpu",
                expected=expected,
                observed=f"NCCL {version} accepted: {accepted[0].text}",
                reason="this NCCL runs two ranks on one device, unlike every version since 2.5: record the "
                "version; multi-rank NCCL semantics can then be rehearsed on this card",
            )
        ]
    text = next((r.text for r in dup if r.text), "")
    return [
        V.fail(
            "duplicate_gpu",
            expected=expected,
            observed=(text.splitlines() or ["no text"])[0][:300],
            reason="the duplicate launch failed some other way: read raw/nccl1gpu/duplicate.rank*.log",
        )
    ]


def one_rank_verdicts(rows: list[Row]) -> list[Verdict]:
    out = [
        V.check(
            "one_rank.init",
            _value(rows, "init", "identity_ok") == 1.0,
            expected="a one-rank NCCL communicator; all_reduce(SUM) over one rank leaves the tensor as it "
            "was",
            observed=f"first collective after {_value(rows, 'init', 'first_collective_s', float('nan')):.2f} "
            f"s, "
            f"identity {'kept' if _value(rows, 'init', 'identity_ok') == 1.0 else 'NOT kept'}",
            reason_ok="communicator creation works on one card",
            reason_bad="one NCCL rank did not give the identity: see raw/nccl1gpu/one_rank.rank0.log",
        )
    ]
    out.append(
        V.check(
            "one_rank.new_group",
            _value(rows, "new_group", "result_ok") == 1.0,
            expected="new_group([0]) on NCCL: all_reduce and broadcast on it",
            observed="right" if _value(rows, "new_group", "result_ok") == 1.0 else "wrong or missing",
            reason_ok="a sub-communicator of one rank works",
            reason_bad="new_group on one card failed: see the rank log",
        )
    )
    wait, sync = _value(rows, "async", "wait_host_s"), _value(rows, "async", "sync_host_s")
    gemm = _value(rows, "async", "gemm_device_s")
    if None in (wait, sync, gemm):
        return out + [
            V.fail(
                "async.wait_vs_synchronize",
                expected="async rows",
                observed="missing",
                reason="the async case did not run: see the rank log",
            )
        ]
    host_free = wait < 0.5 * gemm and _value(rows, "async", "completed_after_wait") == 0.0
    ordered = (
        _value(rows, "async", "value_ok") == 1.0 and _value(rows, "async", "completed_after_sync") == 1.0
    )
    out.append(
        V.check(
            "async.wait_vs_synchronize",
            host_free and ordered,
            expected="work.wait() returns before the device is done (it orders the current stream); "
            "synchronize() waits; work after wait() sees the result",
            observed=f"wait {wait * 1e3:.2f} ms, synchronize {sync * 1e3:.1f} ms, GEMM chain "
            f"{gemm * 1e3:.1f} ms; done after wait: {bool(_value(rows, 'async', 'completed_after_wait'))}",
            reason_ok="asynchronous NCCL work is stream-ordered, not host-blocking",
            reason_bad=(
                "the result was wrong after wait(): stream ordering is broken"
                if not ordered
                else "wait() blocked the host until the device finished: TORCH_NCCL_BLOCKING_WAIT=1 set?"
            ),
        )
    )
    return out


def gloo_cuda_verdicts(rows: list[Row]) -> list[Verdict]:
    gloo = [r for r in rows if r.source == "gloo"]
    if not gloo:
        return [
            V.fail(
                "gloo_cuda",
                expected="collectives over gloo with CUDA tensors",
                observed="no rows",
                reason="the gloo_cuda launch emitted nothing: see raw/nccl1gpu/gloo_cuda.rank*.log",
            )
        ]
    out = []
    for name in sorted({r.case for r in gloo}):
        part = [r for r in gloo if r.case == name]
        refused = [r for r in part if r.metric == "supported" and r.value == 0]
        if refused:
            out.append(
                V.skip(
                    f"gloo_cuda.{name}",
                    expected=f"{name} on CUDA tensors over gloo equal to CPU",
                    observed=refused[0].text or "refused",
                    reason="gloo has no CUDA implementation of this collective: NCCL (one rank per card) "
                    "or CPU tensors carry it",
                )
            )
            continue
        diffs = [r.value for r in part if r.metric == "max_abs_diff_vs_cpu"]
        worst = max(diffs) if diffs else float("inf")
        out.append(
            V.check(
                f"gloo_cuda.{name}",
                bool(diffs) and worst == 0.0,
                expected=f"{name} on CUDA tensors equal to the CPU result, elementwise, on every rank",
                observed=f"max |CUDA − CPU| {worst:g} over {len(diffs)} ranks",
                reason_ok="the same semantics on CUDA tensors as on CPU",
                reason_bad="gloo on CUDA tensors gave another result than on CPU: see the rank logs",
            )
        )
    return out


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """async_op: wait() against synchronize() and the GEMM chain's device time; the two-ranks-one-GPU refusal;
    gloo on CUDA tensors against CPU."""
    from suite import headlines as hl

    parts = []
    wait, sync = hl.matching(rows, "async", "wait_host_s"), hl.matching(rows, "async", "sync_host_s")
    gemm = hl.matching(rows, "async", "gemm_device_s")
    if wait and sync:
        parts.append(
            f"wait() {hl.seconds(wait[0].value)} vs synchronize() {hl.seconds(sync[0].value)}"
            + (f" (GEMM chain {hl.seconds(gemm[0].value)})" if gemm else "")
        )
    duplicate = hl.verdict(verdicts, "nccl1gpu.duplicate_gpu")
    if duplicate:
        parts.append(
            {"pass": "two ranks on one GPU refused", "warn": "two ranks on one GPU accepted"}.get(
                duplicate.status, f"two ranks on one GPU: {duplicate.status}"
            )
        )
    gloo = hl.passed(verdicts, "nccl1gpu.gloo_cuda.")
    if gloo:
        parts.append(f"gloo on CUDA = CPU {gloo}")
    return " · ".join(parts) or None


STAGE = Stage(
    row=33,
    after=("baseline",),
    # a multi-card box has one rank per card: nothing of this to learn there
    profiles=(
        "gloo-cpu",
        "nccl-1gpu",
    ),
    title="NCCL on one card: two ranks refused (Duplicate GPU), one rank, async_op, gloo with CUDA tensors",
    measures="two NCCL ranks on one card refused as NCCL says; one-rank NCCL, async wait semantics, gloo on "
    "CUDA tensors",
    wrong="a refusal with another text; a collective result on CUDA differing from CPU's; wait() blocking "
    "the host",
    rehearsal="",
    cpu_skip="NCCL needs a CUDA device: on gloo-cpu there is no communicator to create, no stream to order "
    "and "
    "no CUDA tensor to give gloo (nccl-1gpu runs it on one card)",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
