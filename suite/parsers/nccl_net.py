"""Which network NCCL chose between nodes, from NCCL_DEBUG=INFO's init lines (real captures:
tests/data/nccl-net/).

    NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:11.5.5.50<0>
    NCCL INFO NET/IB : No device found.
    NCCL INFO NET/Socket : Using [0]eno1:192.168.1.15<0>
    NCCL INFO Using network IB | Socket | IBext_v8 (a net plugin's name)
    NCCL INFO Channel 00 : 1[101d0] -> 8[101c0] [send] via NET/AWS Libfabric/1/GDRDMA
    NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'

A channel over the network names its NIC (NCCL's index, not `mlx5_<n>`) and ends `/GDRDMA` when the NIC reads
and writes GPU memory directly (GPUDirect RDMA); without it every byte is staged through host memory.

The `Using network` line is NCCL's choice; older NCCL prints none, and then the transport is IB when an IB
device was taken, else Socket when a socket interface was. `sockets` is what an inter-node verdict says when
it is not RDMA: NCCL went over TCP, so the fabric's line rate is not what was measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

USING_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")  # `AWS Libfabric`: two words
NET_IB = re.compile(r"NCCL INFO NET/IB : Using (.*?)\s*(?:; OOB .*)?$")
NET_IB_NONE = re.compile(r"NCCL INFO NET/IB : No device found")
NET_SOCKET = re.compile(r"NCCL INFO NET/Socket : Using (.*)$")
DEVICE = re.compile(r"\[\d+\](\S+)")
NET_CHANNEL = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : .* via NET/(.+?)/(\d+)(/GDRDMA)?(?:/Shared)?\s*$")
OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is (\S+)")
OFI_SOCKETS = ("tcp", "sockets", "tcp;ofi_rxm", "sockets;ofi_rxm")
"""libfabric providers that are TCP underneath: aws-ofi-nccl over them is a sockets run in a plugin's name."""
GDR_DISABLED = re.compile(r"GPU Direct RDMA Disabled for HCA \d+ '([^']+)'")


@dataclass
class NcclNet:
    transport: str | None = None
    """'IB', 'Socket', or a net plugin's name (IBext_v8, AWS Libfabric …); None: no line said."""
    ib_devices: list[str] = field(default_factory=list)
    """'mlx5_0:1/IB' …, as NET/IB listed them."""
    socket_interfaces: list[str] = field(default_factory=list)
    """'eno1:192.168.1.15<0>' …, as NET/Socket listed them."""
    ib_missing: bool = False
    """NET/IB said it found no device (no HCA, no /dev/infiniband in the container, no ibverbs provider)."""
    net_channels: int = 0
    """Channel lines over the network (`… via NET/IB/0[/GDRDMA]`)."""
    gdr_channels: int = 0
    """Of them, those over GPUDirect RDMA (`/GDRDMA`)."""
    gdr_disabled: list[str] = field(default_factory=list)
    """HCAs NCCL said GPUDirect RDMA is disabled for (`GPU Direct RDMA Disabled for HCA 0 'mlx5_0'`)."""
    ofi_provider: str | None = None
    """The libfabric provider aws-ofi-nccl chose (`NET/OFI Selected Provider is efa`)."""

    @property
    def gdr(self) -> str | None:
        """'on' (every network channel over GPUDirect RDMA), 'partial', 'off'; None where the log shows no
        network channel and no GDR line (NCCL_DEBUG_SUBSYS without INIT's channel lines)."""
        if self.net_channels:
            if self.gdr_channels == self.net_channels:
                return "on"
            return "partial" if self.gdr_channels else "off"
        return "off" if self.gdr_disabled else None

    def gdr_text(self) -> str:
        """What the log says of GPUDirect RDMA, for a row's text."""
        disabled = f"; disabled for {', '.join(self.gdr_disabled[:4])}" if self.gdr_disabled else ""
        if not self.net_channels:
            return f"GPUDirect RDMA: no network channel line{disabled}"
        return (
            f"GPUDirect RDMA on {self.gdr_channels} of {self.net_channels} network channel(s) "
            f"({self.gdr}){disabled}"
        )

    @property
    def sockets(self) -> bool:
        return self.transport == "Socket" or (self.ofi_provider or "").lower() in OFI_SOCKETS

    def why_sockets(self) -> str:
        """'NCCL used sockets: …' with what the log says about why; '' when NCCL used something else."""
        if not self.sockets:
            return ""
        over = ", ".join(self.socket_interfaces[:3]) or "TCP"
        if self.transport != "Socket":  # the OFI plugin over a TCP provider
            return (
                f"NCCL used sockets: {self.transport} with libfabric's {self.ofi_provider} provider (TCP); "
                "the efa provider was not found (FI_PROVIDER=efa, the EFA software, /dev/infiniband)"
            )
        cause = (
            "NET/IB found no device (no HCA visible: /dev/infiniband not passed to the container, or no "
            "ibverbs provider installed)"
            if self.ib_missing
            else "IB not tried or disabled (NCCL_IB_DISABLE, NCCL_NET=Socket)"
            if not self.ib_devices
            else "IB devices were listed but not used"
        )
        return f"NCCL used sockets: over {over}; {cause}"


def parse_nccl_net(text: str) -> NcclNet:
    out = NcclNet()
    for line in text.splitlines():
        if m := USING_NETWORK.search(line):
            out.transport = m.group(1)
        elif NET_IB_NONE.search(line):
            out.ib_missing = True
        elif m := NET_IB.search(line):
            out.ib_devices = out.ib_devices or DEVICE.findall(m.group(1))
        elif m := NET_SOCKET.search(line):
            out.socket_interfaces = out.socket_interfaces or DEVICE.findall(m.group(1))
        elif m := OFI_PROVIDER.search(line):
            out.ofi_provider = m.group(1).rstrip(".,")
        elif m := NET_CHANNEL.search(line):
            out.net_channels += 1
            out.gdr_channels += bool(m.group(3))
        elif (m := GDR_DISABLED.search(line)) and m.group(1) not in out.gdr_disabled:
            out.gdr_disabled.append(m.group(1))
    if out.transport is None:  # NCCL before 2.6 prints no `Using network`
        out.transport = "IB" if out.ib_devices else "Socket" if out.socket_interfaces else None
    return out
