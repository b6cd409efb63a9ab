"""make remote HOSTS=a,b / HOSTFILE=: the node list and the nodes' agreement (provisioning/cluster/nodes.py),
on probe outputs built from real captures (tests/unit/test_provisioning.py's gpu_probe: real `nvidia-smi -L`
lines)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from provisioning.__main__ import main as provisioning_main
from provisioning.cluster.nodes import ClusterError, cluster_hosts, cluster_problems, gpu_model
from provisioning.session import preflight

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_provisioning import gpu_probe  # noqa: E402


def facts(**changes) -> preflight.HostFacts:
    """A real 2× Quadro RTX 4000 probe, with `changes` applied."""
    return dataclasses.replace(preflight.parse_probe(gpu_probe(python="3.11.7")), **changes)


def test_the_capture_has_two_gpus_of_one_model():
    f = facts()
    assert len(f.gpus) == 2 and {gpu_model(g) for g in f.gpus} == {"Quadro RTX 4000"}
    assert cluster_problems([("root@a", f), ("root@b", facts())]) == []


def test_a_node_with_fewer_gpus_is_named_with_the_fix():
    f = facts()
    problems = cluster_problems([("root@a", f), ("root@b", facts()), ("root@c", facts(gpus=f.gpus[:1]))])
    assert problems == [
        "node root@c: 1 GPUs where root@a has 2: rent nodes of one shape, or list only the "
        "matching ones in HOSTS="
    ]


@pytest.mark.parametrize(
    "change, says",
    [
        (
            dict(
                gpus=[
                    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)",
                    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)",
                ]
            ),
            "node root@b: NVIDIA H100 80GB HBM3 where root@a has Quadro RTX 4000",
        ),
        (dict(driver="570.86.15"), "node root@b: driver 570.86.15 where root@a has 550.54.15"),
        (dict(python=(3, 12, 1)), "node root@b: Python 3.12 where root@a has 3.11"),
    ],
)
def test_each_difference_is_one_line_naming_the_node(change, says):
    (problem,) = cluster_problems([("root@a", facts()), ("root@b", facts(**change))])
    assert problem.startswith(says) and "\n" not in problem


def test_hosts_list_and_hostfile(tmp_path):
    assert [h.label for h in cluster_hosts("root@a, root@b:2222")] == ["root@a", "root@b:2222"]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two nodes\nroot@a slots=8\nroot@b:2222\n")
    assert [h.label for h in cluster_hosts(hostfile=str(hostfile))] == ["root@a", "root@b:2222"]
    hostfile.write_text("root@a\nroot@b slot=8\n")
    with pytest.raises(ClusterError, match=f"HOSTFILE {hostfile} line 2: 'slot=8' after 'root@b'"):
        cluster_hosts(hostfile=str(hostfile))
    for bad, says in (
        ("root@a,,root@b", "HOSTS entry 2 is empty"),
        ("root@a,root@a", "listed twice"),
        ("root@a,root@b:99999", "HOSTS entry 2: HOST='root@b:99999': port 99999 is outside"),
    ):
        with pytest.raises(ClusterError, match=says):
            cluster_hosts(bad)
    with pytest.raises(ClusterError, match="no such file"):
        cluster_hosts(hostfile=str(tmp_path / "missing"))


def test_a_typo_is_refused_by_the_command_before_any_ssh(capsys):
    code = provisioning_main(
        ["remote", "--host", "", "--hosts", "root@a,root@b:22x", "--profile", "gloo-cpu"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "HOSTS entry 2" in err and "root@b:22x" in err
