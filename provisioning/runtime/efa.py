"""AWS's Elastic Fabric Adapter on a RUNTIME=docker host: its libraries brought into the container, or the run
refused before it starts.

NCCL reaches EFA only through libfabric (its `efa` provider) and the aws-ofi-nccl net plugin
(`libnccl-net.so`); the image carries neither (they belong to the host's EFA software and its kernel
driver). Without them NCCL falls back to TCP sockets across nodes, silently — at a tenth of the fabric's
rate. So preflight reads the host's RDMA devices (an EFA device is PCI vendor 0x1d0f, named `rdmap…`) and
the folders the EFA installer makes; the container then gets those folders read-only at the same paths,
FI_PROVIDER=efa and the library path (its /dev/infiniband comes as for any RDMA host). A host with EFA
devices and no EFA software is refused in one line naming what to install.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VENDOR = "0x1d0f"
"""Amazon's PCI vendor id, as /sys/class/infiniband/<dev>/device/vendor holds it."""
LIBFABRIC_DIR = "/opt/amazon/efa"
"""aws-efa-installer's libfabric (with the efa provider)."""
PLUGIN_DIRS = ("/opt/amazon/ofi-nccl", "/opt/aws-ofi-nccl")
"""aws-ofi-nccl, NCCL's net plugin: the installer's folder (1.x ≥ 1.28), then the older build's."""
INSTALL = (
    "install the EFA software on the host (aws-efa-installer: libfabric in /opt/amazon/efa, aws-ofi-nccl in "
    "/opt/amazon/ofi-nccl), or run RUNTIME=host"
)
# The probe's lines: `dev NAME VENDOR` per RDMA device, `dir PATH` per EFA folder present (with a lib/).
PROBE = (
    'for d in /sys/class/infiniband/*; do v=$(cat "$d/device/vendor" 2>/dev/null) && echo "dev ${d##*/} $v"; '
    "done; for p in "
    + " ".join((LIBFABRIC_DIR, *PLUGIN_DIRS))
    + '; do [ -d "$p/lib" ] && echo "dir $p"; done; true'
)


@dataclass(frozen=True)
class Efa:
    devices: tuple[str, ...]
    """The host's EFA devices (rdmap16s27 …)."""
    folders: tuple[str, ...] = ()
    """Host folders the container gets read-only at the same paths."""
    environment: dict[str, str] = field(default_factory=dict)


def parse_probe(text: str) -> tuple[list[str], list[str]]:
    """PROBE's lines → (EFA device names, EFA folders present)."""
    devices, folders = [], []
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "dev" and words[2].lower() == VENDOR:
            devices.append(words[1])
        elif len(words) == 2 and words[0] == "dir":
            folders.append(words[1])
    return devices, folders


def for_container(devices: list[str], folders: list[str]) -> Efa | str | None:
    """What the container needs for the host's EFA devices (None: the host has none), or the refusal."""
    if not devices:
        return None
    plugin = next((d for d in PLUGIN_DIRS if d in folders), None)
    missing = [
        what for what, ok in (("libfabric", LIBFABRIC_DIR in folders), ("aws-ofi-nccl", plugin)) if not ok
    ]
    if missing:
        return (
            f"the host has {len(devices)} EFA device(s) ({', '.join(devices[:4])}) but no "
            f"{' and no '.join(missing)}: NCCL would cross nodes over TCP sockets; {INSTALL}"
        )
    return Efa(
        devices=tuple(devices),
        folders=(LIBFABRIC_DIR, plugin),
        environment={"FI_PROVIDER": "efa", "LD_LIBRARY_PATH": f"{plugin}/lib:{LIBFABRIC_DIR}/lib"},
    )
