"""Which network NCCL chose between nodes, from NCCL_DEBUG=INFO's init lines (real captures:
tests/data/nccl-net/).

    NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:11.5.5.50<0>
    NCCL INFO NET/IB : No device found.
    NCCL INFO NET/Socket : Using [0]eno1:192.168.1.15<0>
    NCCL INFO Using network IB | Socket | IBext_v8 (a net plugin's name)

The `Using network` line is NCCL's choice; older NCCL prints none, and then the transport is IB when an IB
device was taken, else Socket when a socket interface was. `sockets` is what an inter-node verdict says when
it is not RDMA: NCCL went over TCP, so the fabric's line rate is not what was measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

USING_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
NET_IB = re.compile(r"NCCL INFO NET/IB : Using (.*?)\s*(?:; OOB .*)?$")
NET_IB_NONE = re.compile(r"NCCL INFO NET/IB : No device found")
NET_SOCKET = re.compile(r"NCCL INFO NET/Socket : Using (.*)$")
DEVICE = re.compile(r"\[\d+\](\S+)")


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

    @property
    def sockets(self) -> bool:
        return self.transport == "Socket"

    def why_sockets(self) -> str:
        """'NCCL used sockets: …' with what the log says about why; '' when NCCL used something else."""
        if not self.sockets:
            return ""
        over = ", ".join(self.socket_interfaces[:3]) or "TCP"
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
    if out.transport is None:  # NCCL before 2.6 prints no `Using network`
        out.transport = "IB" if out.ib_devices else "Socket" if out.socket_interfaces else None
    return out
