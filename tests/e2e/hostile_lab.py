"""The two-node lab made as unfriendly as a rented cluster (two_node_cluster(…, hostile=True)).

  * NAT: the laptop (the root namespace) reaches the nodes at *public* addresses <pub>.1 and <pub>.2 that no
    node has on an interface. A router namespace sits between a veth to the root namespace (<pub>.253; the
    root end <pub>.254) and the nodes' bridge (<net>.253, the nodes' default route) and DNATs <pub>.N →
    <net>.N. Traffic from a node to another node's public address is NAT'd back in (hairpin, masqueraded), as
    a cloud's public addresses are reachable from inside it.
  * Firewall (nf_tables through iptables-nft): the router forwards only TCP 22 to a public address, so the
    laptop, and a node dialling a public address, reach ssh and nothing else; each node accepts from the
    bridge's own address (the root namespace's direct path) only TCP 22; the nodes' private network is open.
  * Host names as a stock image has them: each node's /etc/hosts maps its own name to 127.0.1.1 and does not
    name the other node.

The laptop's ssh_config names node-a and node-b by their public addresses; so does what the nodes use to reach
each other (the same file: the namespaces share the disk). Everything here lives inside the namespaces and the
veth's root end; teardown removes the router namespace with the nodes'.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Mapping

ROUTER_SUFFIX = "r"


def _run(*argv: str) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")


def _ipt(ns: str, *rule: str) -> None:
    _run("ip", "netns", "exec", ns, "iptables", "-w", *rule)


def router_namespace(tag: str) -> str:
    return f"{tag}{ROUTER_SUFFIX}"


def write_node_hosts(folder: Path, nodes: tuple[str, ...]) -> None:
    """Each node's own /etc/hosts (folder/<node>/hosts, which its sshd bind-mounts): its name → 127.0.1.1
    only."""
    for node in nodes:
        (folder / node / "hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {node}\n")


def use_public_addresses(folder: Path, net: str, pub: str, nodes: tuple[str, ...]) -> None:
    """The ssh_config's HostName of each node becomes its public address; known_hosts learns those
    addresses."""
    config, known = folder / "ssh_config", folder / "known_hosts"
    text, keys = config.read_text(), known.read_text()
    for i, _node in enumerate(nodes, 1):
        text = text.replace(f"HostName {net}.{i}\n", f"HostName {pub}.{i}\n")
        keys = keys.replace(f",{net}.{i} ", f",{net}.{i},{pub}.{i} ")
    config.write_text(text)
    known.write_text(keys)


def build_router(tag: str, net: str, pub: str, bridge: str, namespaces: Mapping[str, str]) -> str:
    """The router namespace (DNAT, hairpin, forward only TCP 22 to public addresses) and the nodes' default
    route through it; returns its name."""
    router = router_namespace(tag)
    _run("ip", "netns", "add", router)
    up_h, up_n, br_h, br_n = f"{tag}u-h", f"{tag}u-n", f"{tag}rb-h", f"{tag}rb-n"
    _run("ip", "link", "add", up_h, "type", "veth", "peer", "name", up_n)
    _run("ip", "link", "set", up_n, "netns", router)
    _run("ip", "addr", "add", f"{pub}.254/24", "dev", up_h)
    _run("ip", "link", "set", up_h, "up")
    _run("ip", "link", "add", br_h, "type", "veth", "peer", "name", br_n)
    _run("ip", "link", "set", br_h, "master", bridge)
    _run("ip", "link", "set", br_h, "up")
    _run("ip", "link", "set", br_n, "netns", router)
    _run("ip", "-n", router, "addr", "add", f"{pub}.253/24", "dev", up_n)
    _run("ip", "-n", router, "addr", "add", f"{net}.253/24", "dev", br_n)
    for link in (up_n, br_n, "lo"):
        _run("ip", "-n", router, "link", "set", link, "up")
    _run("ip", "netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    for i, ns in enumerate(namespaces.values(), 1):
        _ipt(
            router,
            "-t",
            "nat",
            "-A",
            "PREROUTING",
            "-d",
            f"{pub}.{i}",
            "-j",
            "DNAT",
            "--to-destination",
            f"{net}.{i}",
        )
        _run("ip", "-n", ns, "route", "add", "default", "via", f"{net}.253")
        # the laptop's way to a public address: through the router (no one answers ARP for it on the link)
        _run("ip", "route", "replace", f"{pub}.{i}/32", "via", f"{pub}.253", "dev", up_h)
    # a node dialling another's public address: its reply must come back through the router (hairpin NAT)
    _ipt(
        router,
        "-t",
        "nat",
        "-A",
        "POSTROUTING",
        "-s",
        f"{net}.0/24",
        "-d",
        f"{net}.0/24",
        "-m",
        "conntrack",
        "--ctstate",
        "DNAT",
        "-j",
        "MASQUERADE",
    )
    # a public address forwards ssh only (a security group open to port 22)
    _ipt(router, "-A", "FORWARD", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
    _ipt(
        router,
        "-A",
        "FORWARD",
        "-m",
        "conntrack",
        "--ctstate",
        "DNAT",
        "-p",
        "tcp",
        "--dport",
        "22",
        "-j",
        "ACCEPT",
    )
    _ipt(router, "-A", "FORWARD", "-m", "conntrack", "--ctstate", "DNAT", "-j", "DROP")
    return router


def build_firewalls(net: str, namespaces: Mapping[str, str]) -> None:
    """Each node: from the root namespace's bridge address only TCP 22; the nodes' private network open."""
    for ns in namespaces.values():
        _ipt(ns, "-A", "INPUT", "-i", "lo", "-j", "ACCEPT")
        _ipt(ns, "-A", "INPUT", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
        _ipt(ns, "-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")
        _ipt(ns, "-A", "INPUT", "-s", f"{net}.254", "-j", "DROP")
        _ipt(ns, "-A", "INPUT", "-s", f"{net}.0/24", "-j", "ACCEPT")
        _ipt(ns, "-A", "INPUT", "-j", "DROP")


def close_port(ns: str, port: int) -> list[str]:
    """A rule dropping TCP `port` on the node (its firewall closed to the rendezvous); the rule, to remove
    it."""
    rule = ["INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP"]
    _ipt(ns, "-I", *rule)
    return rule


def close_picked_ports(ns: str) -> list[str]:
    """A rule dropping new TCP connections to the ports the node's kernel picks from (its
    ip_local_port_range): a firewall open to ssh and the rendezvous alone. Replies to the node's own
    connections are not new and pass. The rule, to remove it."""
    low, high = subprocess.run(
        ["ip", "netns", "exec", ns, "cat", "/proc/sys/net/ipv4/ip_local_port_range"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    rule = [
        "INPUT",
        "-p",
        "tcp",
        "--dport",
        f"{low}:{high}",
        "-m",
        "conntrack",
        "--ctstate",
        "NEW",
        "-j",
        "DROP",
    ]
    _ipt(ns, "-I", *rule)
    return rule


def reopen_port(ns: str, rule: list[str]) -> None:
    _ipt(ns, "-D", *rule)


def remove_router(tag: str) -> None:
    """The router namespace and the root ends of its two veths (uplink, bridge side), deleted at once."""
    for root_end in (f"{tag}u-h", f"{tag}rb-h"):
        subprocess.run(["ip", "link", "del", root_end], capture_output=True)
    subprocess.run(["ip", "netns", "delete", router_namespace(tag)], capture_output=True)


def private_disk_mount(disk: Path, private: Path | None) -> str:
    """The shell words that give a node's sessions `private` on a disk of its own (`disk`, bind-mounted over
    it in the node's mount namespace: the other node and the root namespace keep seeing the folder
    beneath)."""
    if private is None:
        return ""
    import shlex

    disk.mkdir(parents=True, exist_ok=True)
    return f"mount --bind {shlex.quote(str(disk))} {shlex.quote(str(private))} && "


LOGIN_UID = 60123
"""The lab's ordinary login (as a rented VM's `ubuntu`): a uid no account of this machine has."""


def add_login(
    folder: Path, nodes: tuple[str, ...], name: str, home: Path, public: str, client_key: Path
) -> int:
    """An ordinary user `name` on every node, as a stock cloud image has one: no root, no sudo, in the docker
    group (where the machine has one), its home `home` (a private mount: each node's on its own disk,
    folder/<node>/disk). Each node's sshd bind-mounts folder/<node>/passwd and group over /etc's, so the
    machine's own files are never touched. In each home: ~/.ssh with the lab's key and a config naming the
    nodes by their public addresses (the nodes reach each other as the user, with the default ~/.ssh/config),
    and the pip settings this machine's own user has (its wheel folders: no index is reachable here). Returns
    the uid."""
    import os
    import shutil

    uid = gid = LOGIN_UID
    passwd, group = Path("/etc/passwd").read_text(), Path("/etc/group").read_text()
    members = [
        line + ("," if not line.endswith(":") else "") + name if line.startswith("docker:") else line
        for line in group.splitlines()
    ]
    pip_conf = Path.home() / ".config" / "pip" / "pip.conf"
    ssh_config = "".join(f"Host {n}\n  HostName {public}.{i}\n" for i, n in enumerate(nodes, 1)) + (
        f"Host *\n  User {name}\n  IdentityFile ~/.ssh/id_ed25519\n  IdentitiesOnly yes\n"
        "  UserKnownHostsFile ~/.ssh/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
        "  ConnectTimeout 10\n  LogLevel ERROR\n"
    )
    for node in nodes:
        (folder / node / "passwd").write_text(passwd + f"{name}:x:{uid}:{gid}:{name}:{home}:/bin/sh\n")
        (folder / node / "group").write_text("\n".join(members) + f"\n{name}:x:{gid}:\n")
        disk = folder / node / "disk"
        dot_ssh = disk / ".ssh"
        dot_ssh.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(client_key, dot_ssh / "id_ed25519")
        (dot_ssh / "config").write_text(ssh_config)
        (dot_ssh / "known_hosts").write_text((folder / "known_hosts").read_text())
        if pip_conf.is_file():
            (disk / ".config" / "pip").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pip_conf, disk / ".config" / "pip" / "pip.conf")
        for path in [disk, *disk.rglob("*")]:
            os.chown(path, uid, gid)
        for path in dot_ssh.iterdir():
            path.chmod(0o600)
        dot_ssh.chmod(0o700)
    return uid


def login_mounts(folder: Path, node: str) -> str:
    """The shell words that give a node's sessions its own passwd and group (add_login), or none."""
    import shlex

    words = ""
    for name in ("passwd", "group"):
        if (folder / node / name).exists():
            words += f"mount --bind {shlex.quote(str(folder / node / name))} /etc/{name} && "
    return words
