"""EFA on a RUNTIME=docker host (provisioning/runtime/efa.py): detected by PCI vendor, its libraries given to
the container read-only with FI_PROVIDER=efa, or the host refused in one line before the run; and NCCL's OFI
lines read, a TCP provider under the plugin being a sockets run (the real p4d log in tests/data/nccl-net)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from provisioning.runtime import efa
from provisioning.runtime.suite_container import RunSettings
from provisioning.session.preflight import HostFacts, decide
from suite.parsers.nccl_net import parse_nccl_net

EFA_LOG = (
    Path(__file__).resolve().parents[1] / "data/nccl-net/03-efa-p4d-2node-gdrdma-aws-efa-eks.txt"
).read_text()
# What PROBE prints on a p4d.24xlarge with the EFA installer (4 EFA devices) beside a Mellanox-less host's
# nothing: the vendor file holds 0x1d0f for Amazon's devices.
P4D = (
    "dev rdmap16s27 0x1d0f\ndev rdmap32s27 0x1d0f\ndev rdmap144s27 0x1d0f\ndev rdmap160s27 0x1d0f\n"
    "dir /opt/amazon/efa\ndir /opt/amazon/ofi-nccl\n"
)


def test_the_probe_reads_efa_devices_by_vendor_and_the_installers_folders():
    assert efa.parse_probe(P4D) == (
        ["rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"],
        ["/opt/amazon/efa", "/opt/amazon/ofi-nccl"],
    )
    assert efa.parse_probe("dev mlx5_0 0x15b3\n") == ([], [])  # a Mellanox HCA is not EFA
    # the probe's own shell, run here (no RDMA device on this machine): nothing, and no error
    done = subprocess.run(["sh", "-c", efa.PROBE], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == ""
    assert all(line.startswith(("dev ", "dir ")) for line in done.stdout.splitlines())


def test_the_container_gets_the_hosts_efa_software_or_the_host_is_refused():
    got = efa.for_container(*efa.parse_probe(P4D))
    assert got.folders == ("/opt/amazon/efa", "/opt/amazon/ofi-nccl")
    assert got.environment == {
        "FI_PROVIDER": "efa",
        "LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib",
    }
    flags = RunSettings(
        gpus=True, rdma=True, host_folders=got.folders, environment=got.environment
    ).docker_flags()
    assert (
        "/opt/amazon/efa:/opt/amazon/efa:ro" in flags
        and "/opt/amazon/ofi-nccl:/opt/amazon/ofi-nccl:ro" in flags
    )
    assert "FI_PROVIDER=efa" in flags and "--device=/dev/infiniband" in flags
    kwargs = RunSettings(gpus=True, host_folders=got.folders).sdk_create_kwargs()
    assert kwargs["volumes"]["/opt/amazon/efa"] == {"bind": "/opt/amazon/efa", "mode": "ro"}
    assert efa.for_container([], []) is None
    refused = efa.for_container(["rdmap16s27"], ["/opt/amazon/efa"])
    assert refused.startswith("the host has 1 EFA device(s) (rdmap16s27) but no aws-ofi-nccl: NCCL would")
    assert "aws-efa-installer" in refused
    facts = HostFacts(
        base="/root/cardtime",
        gpus=["GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1)"],
        docker=True,
        docker_usable=True,
        nvidia_runtime=True,
        efa_devices=["rdmap16s27"],
        efa_folders=[],
    )
    decision = decide(facts, runtime="docker", needs_gpu=True)
    assert any("but no libfabric and no aws-ofi-nccl" in p for p in decision.problems), decision.problems
    facts.efa_folders = ["/opt/amazon/efa", "/opt/aws-ofi-nccl"]
    assert not [p for p in decide(facts, runtime="docker", needs_gpu=True).problems if "EFA" in p]


def test_nccl_ofi_lines_name_the_provider_and_a_tcp_provider_is_sockets():
    net = parse_nccl_net(EFA_LOG)
    assert net.ofi_provider == "efa" and not net.sockets
    tcp = parse_nccl_net(EFA_LOG.replace("Selected Provider is efa", "Selected Provider is tcp;ofi_rxm"))
    assert tcp.sockets and "libfabric's tcp;ofi_rxm provider" in tcp.why_sockets()
