"""Before any billed stage: each planned check that depends on what the box gives, and whether this box can
decide it — and, where it cannot, why and what would (a permission, a tool, a capture to ingest).

A renter fixes group membership or installs DCGM before paying for an hour, or knows which capture to take by
hand; the box verdict later names the same checks open (suite/box_verdict.py, suite/next_steps.py). Read from
preflight's probe (provisioning/session/preflight.py `box_tools`, the GPUs, the tools found) and the runtime
chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.session.preflight import HostFacts
from suite.hardware.gpus import gpu_for, memory_bandwidth

DMESG = "capture `sudo dmesg -T` on the host and `cardtime ingest` it beside the run"


@dataclass(frozen=True)
class Decidable:
    check: str
    can: bool
    why: str

    def line(self) -> str:
        return f"{'yes' if self.can else 'NO ':<4} {self.check:<26} {self.why}"


def kernel_log(facts: HostFacts, runtime: str) -> Decidable:
    how = facts.box_tools.get("kernel_log", "none")
    if how == "gvisor":
        return Decidable(
            "health.kernel_log",
            False,
            "the box is a gVisor sandbox: its dmesg is the sandbox's own, "
            "never the host's XIDs; ask the provider for the host's kernel log",
        )
    if how in ("dmesg", "sudo", "journalctl"):
        readable = f"readable ({'sudo -n dmesg' if how == 'sudo' else how})"
        if runtime == "docker":  # the container cannot: the job reads it on the host before it starts
            readable += " on the host by the job, before the container starts: XIDs after that are not seen"
        return Decidable("health.kernel_log", True, readable)
    return Decidable(
        "health.kernel_log",
        False,
        "this login may not read the kernel log: allow `sudo -n dmesg` or "
        f"add the user to the adm group; or {DMESG}",
    )


def dcgm(facts: HostFacts, runtime: str) -> Decidable:
    found = facts.box_tools.get("dcgmi", "-") != "-"
    if runtime == "docker":
        return Decidable(
            "health.dcgm",
            False,
            "the image has no DCGM: run `dcgmi diag -r 1` on the host and `cardtime ingest` its output"
            if found
            else "no DCGM in the image nor on the host: install datacenter-gpu-manager "
            "on the host, run `dcgmi diag -r 1` there and ingest its output",
        )
    return (
        Decidable("health.dcgm", True, "dcgmi installed (nv-hostengine must be running)")
        if found
        else Decidable(
            "health.dcgm", False, "dcgmi not installed: install datacenter-gpu-manager matching the driver"
        )
    )


def nccl_tests(facts: HostFacts, runtime: str) -> Decidable:
    if runtime == "docker" or facts.nccl_tests:
        return Decidable(
            "bandwidth (nccl-tests)",
            True,
            "built into the image" if runtime == "docker" else f"all_reduce_perf in {facts.nccl_tests}",
        )
    return Decidable(
        "bandwidth (nccl-tests)",
        False,
        "no all_reduce_perf on the host: RUNTIME=docker builds it, or "
        "install nccl-tests; the torch sweep still runs",
    )


def datasheet(facts: HostFacts) -> list[Decidable]:
    name = facts.gpus[0].split(": ", 1)[-1].split(" (UUID")[0] if facts.gpus else ""
    model = gpu_for(name)
    if model is None:
        return [
            Decidable(
                "peaks and SKU figures",
                False,
                f"{name or 'no GPU'} is not in suite/hardware/gpus.py: add its datasheet figures",
            )
        ]
    sheet = memory_bandwidth(model, name)
    return [
        Decidable("peaks (link, GEMM)", True, f"{model.model}: {model.peak_source}"),
        Decidable(
            "burnin.links.hbm.sku",
            sheet is not None,
            sheet[1]
            if sheet
            else f"{model.model}: no datasheet memory figure known for it (its memory size "
            "is read when the run starts)",
        ),
    ]


def network(facts: HostFacts) -> Decidable:
    if not facts.rdma_devices:
        return Decidable("health.network", True, "no InfiniBand/RoCE device: not applicable")
    tool = facts.box_tools.get("ib_tool", "-")
    return Decidable(
        "health.network",
        True,
        f"ports read with {tool}" if tool != "-" else "ports read from /sys/class/infiniband (no ibstat)",
    )


def decidable(facts: HostFacts, runtime: str) -> list[Decidable]:
    """Every box-dependent planned check and whether this box, under this runtime, can decide it."""
    return [
        kernel_log(facts, runtime),
        dcgm(facts, runtime),
        network(facts),
        nccl_tests(facts, runtime),
        *datasheet(facts),
    ]


def lines(facts: HostFacts, runtime: str) -> list[str]:
    found = decidable(facts, runtime)
    open_ = [d for d in found if not d.can]
    head = (
        f"RUNTIME={runtime}: planned checks this box can decide: {len(found) - len(open_)} of {len(found)} "
        f"that "
        "depend on the box"
        + (f"; {len(open_)} would stay open (fix before the billed stages):" if open_ else "")
    )
    return [head, *(f"  {d.line()}" for d in found)]
