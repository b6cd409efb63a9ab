"""`make plan HOST=` and make remote's preflight list, before any billed stage, each planned check that
depends on the box and whether this box can decide it, and why not — on the kinds of box people rent."""

from __future__ import annotations

import subprocess

from provisioning.session import preflight
from provisioning.session.decidable import decidable, lines

H100 = ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5269b708-a8a1-4d8d-8bd1-0f1b5a8c7e01)"]


def box(**changes) -> preflight.HostFacts:
    facts = preflight.HostFacts(
        gpus=list(H100),
        box_tools={"kernel_log": "dmesg", "dcgmi": "/usr/bin/dcgmi", "ib_tool": "/usr/sbin/ibstat"},
    )
    for key, value in changes.items():
        setattr(facts, key, value)
    return facts


def verdicts(facts, runtime) -> dict[str, bool]:
    return {d.check: d.can for d in decidable(facts, runtime)}


def test_a_docker_vm_reads_the_kernel_log_on_the_host_but_cannot_run_dcgm_in_the_image():
    found = verdicts(box(), "docker")
    assert found == {
        "health.kernel_log": True,  # the job reads it on the host before the container starts
        "health.dcgm": False,
        "health.network": True,
        "bandwidth (nccl-tests)": True,
        "peaks (link, GEMM)": True,
        "burnin.links.hbm.sku": True,
    }
    text = "\n".join(lines(box(), "docker"))
    assert "5 of 6" in text and "before the container starts" in text and "dcgmi diag -r 1" in text
    locked = verdicts(box(box_tools={"kernel_log": "none", "dcgmi": "-", "ib_tool": "-"}), "docker")
    assert locked["health.kernel_log"] is False  # a login that may not read it on the host either


def test_a_pod_without_dmesg_dcgm_or_nccl_tests_says_each_and_how_to_fix_it():
    pod = box(box_tools={"kernel_log": "none", "dcgmi": "-", "ib_tool": "-"}, nccl_tests=None)
    said = {d.check: d for d in decidable(pod, "host")}
    assert not said["health.kernel_log"].can and "adm group" in said["health.kernel_log"].why
    assert not said["health.dcgm"].can and "datacenter-gpu-manager" in said["health.dcgm"].why
    # no IB device: not applicable
    assert not said["bandwidth (nccl-tests)"].can and said["health.network"].can
    healthy = box(nccl_tests="/opt/nccl-tests/bin")
    assert all(verdicts(healthy, "host").values())


def test_a_gvisor_sandbox_log_is_never_the_hosts_and_sizes_and_models_are_named():
    sandbox = box(box_tools={"kernel_log": "gvisor", "dcgmi": "-", "ib_tool": "-"})
    assert "gVisor" in {d.check: d for d in decidable(sandbox, "host")}["health.kernel_log"].why
    a100 = box(gpus=["GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-1)"])
    sku = {d.check: d for d in decidable(a100, "host")}["burnin.links.hbm.sku"]
    assert sku.can and "1,555 GB/s" in sku.why
    unknown = verdicts(box(gpus=["GPU 0: NVIDIA B9000 (UUID: GPU-1)"]), "host")
    assert unknown["peaks and SKU figures"] is False


def test_the_probe_reads_the_box_tools_for_real(tmp_path):
    done = subprocess.run(
        ["sh", "-c", preflight.probe_command(str(tmp_path / "base"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    facts = preflight.parse_probe(done.stdout)
    assert facts.box_tools["kernel_log"] in ("dmesg", "sudo", "journalctl", "gvisor", "none")
    assert set(facts.box_tools) == {"kernel_log", "dcgmi", "ib_tool"}
