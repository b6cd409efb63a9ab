"""The link matrix's colours separate normal from wrong for the board: on a PCIe box (no NVLink) the paths
across the CPU sockets pass the topology check and are drawn grey, not red; on an NVLink box a pair off NVLink
stays red, and a GPU's NIC across the sockets stays red on either."""

from __future__ import annotations

from suite.results import Row, rows_to_frame
from suite.stages.topology import figure
from suite.stages.topology.figure import PATH_COLOURS, PCIE_BOX_COLOURS


def matrix(pairs: dict[str, str], nics: dict[str, str] | None = None):
    rows = [
        Row(stage="topology", case=p, metric="link", value=0.0, unit="", text=t) for p, t in pairs.items()
    ]
    rows += [
        Row(stage="topology", case=p, metric="nic_link", value=0.0, unit="", text=t)
        for p, t in (nics or {}).items()
    ]
    return figure.figures(rows_to_frame(rows), None, {"topology": {}})


def legend(fig) -> dict[str, str]:
    from matplotlib.colors import to_hex

    ax = fig.get_axes()[0]
    return {h.get_label(): to_hex(h.get_facecolor()) for h in ax.get_legend().legend_handles}


def test_a_two_socket_pcie_box_draws_its_sys_pairs_grey_and_says_why():
    pcie = {
        "GPU0-GPU1": "PIX",
        "GPU0-GPU2": "SYS",
        "GPU0-GPU3": "SYS",
        "GPU1-GPU2": "SYS",
        "GPU1-GPU3": "SYS",
        "GPU2-GPU3": "PIX",
    }
    gpus, nic = matrix(pcie, {"GPU0-NIC0": "PIX", "GPU2-NIC0": "SYS"})
    assert legend(gpus)["SYS"] == PCIE_BOX_COLOURS["SYS"] != PATH_COLOURS["SYS"]
    assert "how the board is built" in gpus.caption and "PIX" in nic.caption
    assert legend(nic)["SYS"] == PATH_COLOURS["SYS"]  # a GPU far from its NIC: still the alarm colour


def test_an_nvlink_box_keeps_a_pair_off_nvlink_red():
    nv = {"GPU0-GPU1": "NV12", "GPU0-GPU2": "SYS", "GPU1-GPU2": "NV12"}
    (gpus,) = matrix(nv)
    assert legend(gpus)["SYS"] == PATH_COLOURS["SYS"]
