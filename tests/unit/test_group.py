"""One driver for one host and for several (provisioning/group.py, drive.py): HOST= is a group of one, whose
steps about "the other nodes" have nothing to do, and whose lines name no node; HOSTS= a group of several."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from provisioning.cluster.node_lines import (
    other_nodes_setup,
    release_node_locks_lines,
    touch_node_locks_command,
)
from provisioning.group import Group, GroupResult, Member, nodes_runtime
from provisioning.session import preflight
from provisioning.session.hosts import parse_host
from provisioning.session.options import RemoteOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cluster_preflight import facts  # noqa: E402


def member(label: str, runtime: str = "docker") -> Member:
    return Member(parse_host(label), facts(), preflight.Decision(runtime, []))


def test_a_group_of_one_has_no_other_node_and_names_none():
    one = Group([member("root@gpu-a")], remote=None)
    assert one.single and one.others == [] and one.labels == ["root@gpu-a"]
    assert one.said(one.first, "code shipped") == "code shipped"
    # what preflight chose for the one host (Docker with GPU support), whatever the options left unset
    assert one.runtime(RemoteOptions(host=parse_host("root@gpu-a"))) == "docker"
    assert other_nodes_setup("/b/jobs/j", [], "") == ""  # no set-up over ssh, no lock to keep or give back
    assert (
        release_node_locks_lines([], "/b", "j", "") == ""
        and touch_node_locks_command([], "/b", "j", "") == ""
    )
    assert one.reach("").ok and one.reach("").succeeded == {}


def test_a_group_of_several_names_each_node_and_settles_its_runtime_before_preflight():
    two = Group([member("root@gpu-a", "host"), member("root@gpu-b", "host")], remote=None)
    assert not two.single and [m.spec.label for m in two.others] == ["root@gpu-b"]
    assert two.said(two.others[0], "code shipped") == "node root@gpu-b: code shipped"
    opts = RemoteOptions(host=parse_host("root@gpu-a"))
    assert (
        nodes_runtime(opts) == "host" and nodes_runtime(dataclasses.replace(opts, image="r/x:1")) == "docker"
    )
    assert two.runtime(dataclasses.replace(opts, runtime="host")) == "host"


def test_a_group_result_says_what_succeeded_where():
    result = GroupResult()
    result.succeeded["root@gpu-b"] = True
    assert result.ok
    result.failed["root@gpu-c"] = "node root@gpu-a cannot reach node gpu-c over ssh"
    assert not result.ok and list(result.failed) == ["root@gpu-c"]
