"""A real two-node cluster on this machine, for the multi-node tests (how it was found: shared/MULTINODE.md).

Two network namespaces joined by a bridge: node-a at <net>.1, node-b at <net>.2, the bridge at <net>.254,
addresses that exist only inside the namespaces (and on the bridge) this fixture makes. In each node an
sshd on port 22 with a UTS and mount namespace of its own: its own hostname (torchrun's c10d rendezvous
decides which node hosts the store by the local hostname) and its own /etc/hosts naming both nodes.
The nodes share this machine's filesystem, as a cluster shares its storage.

    with two_node_cluster(tmp_path) as cluster:
        cluster.ssh("node-a", "hostname")               # → "node-a"

With `docker=True` each node also runs a Docker engine of its own (`RUNTIME=docker` across nodes): dockerd
started inside the node's network namespace, in a UTS and mount namespace like its sshd's (the node's hostname
and /etc/hosts, which `--network host` containers inherit), with its own data root, exec root, pidfile and
socket, `--bridge=none --iptables=false` (it leaves the namespace's network alone). Each node's sshd hands its
sessions DOCKER_HOST (sshd_config SetEnv), so `docker` over ssh on node-b talks to node-b's engine, and a
`--network host` container started there lives in node-b's namespace. The engines share nothing: an image on
one is not on the other until it is loaded there.

    with two_node_cluster(tmp_path, docker=True) as cluster:
        cluster.docker("node-b", "images")              # node-b's engine, from the root namespace

Teardown, on success or failure: each node's dockerd is stopped by its PID first (it stops its containers and
its containerd), then every process inside the namespaces is stopped by PID (`ip netns pids`), then each veth
is deleted from its root end, then the bridge and the namespaces, and the engines' tmpfs unmounted and
removed. (A veth left to its namespace's deletion lives on until the kernel's cleanup of that namespace gets
to it, later and in its own time, so the next lab's `ip link add` of the same name failed "File exists"; each
cluster also takes a name of its own, so that nothing a lab left behind can stand in the next one's way.)
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from tests.e2e import hostile_lab

SSHD = "/usr/sbin/sshd"
NODES = ("node-a", "node-b")
IFNAME = "mn0"  # the interface inside each namespace
SESSION_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # sshd's own for root (Debian)


def netns_missing() -> str | None:
    """Why this machine cannot make the cluster, or None (the same test as .ci/capabilities.sh's netns
    probe)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (iproute2, util-linux, openssh-client)"
    if not Path(SSHD).exists():
        return f"{SSHD} is not installed (apt-get install openssh-server)"
    probe = f"ctprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()} (no CAP_SYS_ADMIN?)"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


@dataclass
class Cluster:
    folder: Path
    net: str
    """The first three octets, e.g. '10.77.12'."""
    namespaces: dict[str, str]
    """node name → its network namespace."""
    ssh_config: Path
    sshd_pids: dict[str, int]
    engines: dict[str, "Engine"] = field(default_factory=dict)
    """node name → its Docker engine (docker=True only)."""
    public: str = ""
    """hostile=True: the first three octets of the nodes' public (NAT'd) addresses
    (tests/e2e/hostile_lab.py)."""

    private: Path | None = None
    """A folder each node sees on a disk of its own (hostile_lab.private_disk_mount); None: every folder
    shared."""

    def disk(self, node: str) -> Path:
        """Where `node`'s own copy of `private` lies, as the root namespace sees it."""
        return self.folder / node / "disk"

    def public_address(self, node: str) -> str:
        return f"{self.public}.{NODES.index(node) + 1}"

    def address(self, node: str) -> str:
        return f"{self.net}.{NODES.index(node) + 1}"

    @property
    def subnet(self) -> str:
        return f"{self.net}.0/24"

    def ssh_argv(self, node: str, command: str) -> list[str]:
        return ["ssh", "-F", str(self.ssh_config), node, command]

    def ssh(
        self, node: str, command: str, timeout_s: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess:
        done = subprocess.run(self.ssh_argv(node, command), capture_output=True, text=True, timeout=timeout_s)
        if check and done.returncode != 0:
            raise AssertionError(f"ssh {node} {command!r} exited {done.returncode}: {done.stderr[-2000:]}")
        return done

    def docker(
        self, node: str, *args: str, timeout_s: float = 300, check: bool = True, **kwargs
    ) -> subprocess.CompletedProcess:
        """The docker CLI against `node`'s engine, from the root namespace (the socket is a file both see)."""
        done = subprocess.run(
            ["docker", *args],
            env={**os.environ, "DOCKER_HOST": self.engines[node].host},
            capture_output=True,
            timeout=timeout_s,
            **kwargs,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"docker {' '.join(args)} on {node} exited {done.returncode}: {done.stderr[-2000:]!r}"
            )
        return done

    def pids(self) -> list[int]:
        """Every process inside the cluster's namespaces."""
        out = []
        for ns in self.namespaces.values():
            listed = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            out += [int(p) for p in listed.stdout.split() if p.isdigit()]
        return out


@dataclass
class Engine:
    """One node's dockerd: its folders, socket and PID."""

    data_root: Path
    exec_root: Path
    """Short (containerd's socket lives under it, and a unix socket's path has at most 107 bytes)."""
    socket: Path
    pid: int = 0

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"


def docker_missing() -> str | None:
    """Why the nodes cannot have engines of their own, or None."""
    for tool in ("dockerd", "docker", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install docker.io util-linux)"
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _write_ssh_files(
    folder: Path, net: str, engines: dict[str, Engine] | None = None, path_first: Path | None = None
) -> Path:
    """Keys, each node's sshd_config, /etc/hosts, and the client's ssh_config with a private known_hosts;
    with engines, each node's sshd gives its sessions DOCKER_HOST=its own engine; with path_first, a PATH
    that finds that folder first (a node's own tools: a stand-in nvidia-smi, say)."""
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", ""]
    subprocess.run([*keygen, "-f", str(folder / "client_key")], check=True)
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    hosts = "127.0.0.1 localhost\n" + "".join(f"{net}.{i + 1} {n}\n" for i, n in enumerate(NODES))
    (folder / "hosts").write_text(hosts)
    known, client = [], []
    for i, node in enumerate(NODES):
        nd = folder / node
        nd.mkdir()
        subprocess.run([*keygen, "-f", str(nd / "host_key")], check=True)
        env = ([f"DOCKER_HOST={engines[node].host}"] if engines else []) + (
            [f"PATH={path_first}:{SESSION_PATH}"] if path_first else []
        )
        (nd / "sshd_config").write_text(
            f"Port 22\nListenAddress {net}.{i + 1}\nHostKey {nd / 'host_key'}\nPidFile {nd / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "Subsystem sftp internal-sftp\nMaxSessions 50\nMaxStartups 50\nLogLevel VERBOSE\n"
            + (f"SetEnv {' '.join(env)}\n" if env else "")
        )
        kind, blob = (nd / "host_key.pub").read_text().split()[:2]
        known.append(f"{node},{net}.{i + 1} {kind} {blob}\n")
        client.append(f"Host {node}\n  HostName {net}.{i + 1}\n")
    (folder / "known_hosts").write_text("".join(known))
    config = folder / "ssh_config"
    config.write_text(
        "".join(client)
        + (
            f"Host *\n  User root\n  IdentityFile {folder / 'client_key'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {folder / 'known_hosts'}\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
            "  ConnectTimeout 10\n  LogLevel ERROR\n"
        )
    )
    return config


def _start_sshd(folder: Path, ns: str, node: str, private: Path | None = None) -> subprocess.Popen:
    """sshd inside `ns`, in its own UTS and mount namespace: hostname `node`, /etc/hosts naming both nodes.
    ip netns exec, unshare (no --fork) and the shell's exec keep one PID: the Popen's is sshd's."""
    # hostile: its own
    hosts = folder / node / "hosts" if (folder / node / "hosts").exists() else folder / "hosts"
    inner = (
        f"mount --bind {shlex.quote(str(hosts))} /etc/hosts && hostname {node} && "
        + hostile_lab.private_disk_mount(folder / node / "disk", private)
        + hostile_lab.login_mounts(folder, node)
        + f"exec {SSHD} -D -e -f {shlex.quote(str(folder / node / 'sshd_config'))}"
    )
    return subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            ns,
            "unshare",
            "--uts",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            inner,
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / node / "sshd.log", "w"),
    )


def cgroup_parent(ns: str) -> str:
    return f"cardtime-{ns}"


def _start_dockerd(
    folder: Path, ns: str, node: str, engine: Engine, path_first: Path | None, extra_args: tuple[str, ...]
) -> subprocess.Popen:
    """dockerd inside `ns` with the node's hostname and /etc/hosts (a `--network host` container copies both).
    nsenter, not `ip netns exec`: that one remounts /sys, and dockerd then stops at "failed to start daemon:
    Devices cgroup isn't mounted" (seen here). Its containers' cgroups go under cardtime-<ns> (removed after).
    nsenter, unshare (no --fork) and exec keep one PID: the Popen's is dockerd's (its containerd its child).
    path_first on its PATH too: a stand-in nvidia-container-runtime-hook there makes dockerd accept
    `--gpus`."""
    for path in (engine.data_root, engine.exec_root):
        path.mkdir(parents=True, exist_ok=True)
    dockerd = [
        "dockerd",
        "--data-root",
        str(engine.data_root),
        "--exec-root",
        str(engine.exec_root),
        "--pidfile",
        str(engine.exec_root / "dockerd.pid"),
        "--host",
        engine.host,
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--ip-masq=false",
        "--cgroup-parent",
        f"/{cgroup_parent(ns)}",
        "--log-level",
        "warn",
        *extra_args,
    ]
    inner = (
        f"mount --bind {shlex.quote(str(folder / 'hosts'))} /etc/hosts && hostname {node} && "
        f"exec {shlex.join(dockerd)}"
    )
    return subprocess.Popen(
        [
            "nsenter",
            f"--net=/run/netns/{ns}",
            "unshare",
            "--uts",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            inner,
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / node / "dockerd.log", "w"),
        env={
            **os.environ,
            "PATH": f"{path_first}:{os.environ['PATH']}" if path_first else os.environ["PATH"],
        },
    )


def _wait_engine(cluster: Cluster, node: str, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    def answers() -> tuple[bool, str]:
        done = cluster.docker(node, "version", "--format", "{{.Server.Version}}", timeout_s=30, check=False)
        return done.returncode == 0, f"{done.stderr[-500:]!r}"

    _wait_until(f"dockerd of {node}", proc, cluster.folder / node / "dockerd.log", answers, timeout_s)


def _stop_engines(cluster: Cluster, procs: list[subprocess.Popen]) -> None:
    """Each dockerd by its PID, SIGTERM first: it stops its containers and its containerd on the way out."""
    _stop_pids([p.pid for p in procs], grace_s=30)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _remove_cgroups(parent: str) -> None:
    """The engine's cgroup parent in every hierarchy (cgroup v1: one per controller; v2: one), deepest first:
    dockerd removes its containers' cgroups, not the parent it made for them."""
    root = Path("/sys/fs/cgroup")
    for top in [*root.glob(parent), *root.glob(f"*/{parent}")]:
        for folder in sorted((d for d in top.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)) + [top]:
            with contextlib.suppress(OSError):
                folder.rmdir()


def _mount_tmpfs(path: Path) -> None:
    """The engines' folders on a tmpfs of their own: removing an image's ~10,000 files from this machine's
    disk took ~35 s under load, unmounting a tmpfs takes none. Its size is a ceiling, not memory taken (what
    the images hold is): 48 GiB, above preflight's 40 GiB floor of free space under Docker's root for a GPU
    profile."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48g,mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        path.rmdir()
        raise RuntimeError(f"mount -t tmpfs {path}: {done.stderr.strip()}")


def _unmount_tmpfs(path: Path) -> None:
    """The engines' tmpfs (their overlay mounts went with dockerd's private mount namespace), then its
    folder."""
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(path)], capture_output=True)
    with contextlib.suppress(OSError):
        path.rmdir()


def _wait_ssh(cluster: Cluster, node: str, proc: subprocess.Popen, timeout_s: float = 30) -> None:
    def answers() -> tuple[bool, str]:
        done = subprocess.run(cluster.ssh_argv(node, "hostname"), capture_output=True, text=True, timeout=30)
        return (
            done.returncode == 0 and done.stdout.strip() == node,
            f"{done.stdout.strip()} {done.stderr.strip()}",
        )

    _wait_until(f"sshd of {node}", proc, cluster.folder / node / "sshd.log", answers, timeout_s)


def _wait_until(what: str, proc: subprocess.Popen, log: Path, answers, timeout_s: float) -> None:
    """Until answers() says (True, …); an error with the log's tail if `proc` exits, with what it said on
    timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text()[-1500:]}")
        ok, said = answers()
        if ok:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout_s} s: {said}")
        time.sleep(0.2)


def _stop_pids(pids: list[int], grace_s: float = 5.0) -> None:
    """SIGTERM each, SIGKILL what is left after the grace; only these PIDs."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


_CLUSTERS_MADE = itertools.count()


@contextlib.contextmanager
def two_node_cluster(
    folder: Path,
    *,
    docker: bool = False,
    path_first: Path | None = None,
    dockerd_args: tuple[str, ...] = (),
    hostile: bool = False,
    private: Path | None = None,
    login: str = "",
) -> Iterator[Cluster]:
    """The cluster, torn down on the way out. docker: an engine per node; path_first: a folder each node's ssh
    sessions (and dockerd) find first on their PATH; dockerd_args: more of dockerd's flags (a runtime, say);
    hostile: NAT'd public addresses, firewalls and stock host names (tests/e2e/hostile_lab.py); private: a
    folder each node's sessions see on a disk of its own (separate disks); login: an ordinary user of that
    name on every node, its home `private` (hostile_lab.add_login; the laptop still reaches root too)."""
    tag = f"ct{os.getpid() % 100000}{next(_CLUSTERS_MADE) % 10}"  # ≤ 8 characters: "<tag>rb-h" fits IFNAMSIZ
    net = f"10.{77 + os.getpid() % 100}.{os.getpid() % 250}"
    namespaces = {n: f"{tag}{n[-1]}" for n in NODES}
    bridge = f"{tag}br"
    folder.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen] = []
    engine_procs: list[subprocess.Popen] = []
    engines_root = Path(f"/run/{tag}-docker")  # a tmpfs of its own: images load fast and go at once
    engines = (
        {
            n: Engine(
                data_root=engines_root / n / "data",
                exec_root=engines_root / n / "exec",
                socket=engines_root / n / "exec" / "docker.sock",
            )
            for n in namespaces
        }
        if docker
        else {}
    )
    cluster = Cluster(
        folder=folder,
        net=net,
        namespaces=namespaces,
        ssh_config=_write_ssh_files(folder, net, engines, path_first),
        sshd_pids={},
        engines=engines,
        public=f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}" if hostile else "",
        private=private,
    )
    if private is not None:
        private.mkdir(parents=True, exist_ok=True)
    if hostile:
        hostile_lab.write_node_hosts(folder, NODES)
        hostile_lab.use_public_addresses(folder, net, cluster.public, NODES)
    if login and private is not None:
        hostile_lab.add_login(folder, NODES, login, private, cluster.public or net, folder / "client_key")
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{net}.254/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for i, (node, ns) in enumerate(namespaces.items()):
            _ip("netns", "add", ns)
            host_end, node_end = f"{ns}-h", f"{ns}-n"
            _ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
            _ip("link", "set", host_end, "master", bridge)
            _ip("link", "set", host_end, "up")
            _ip("link", "set", node_end, "netns", ns)
            _ip("-n", ns, "link", "set", node_end, "name", IFNAME)
            _ip("-n", ns, "addr", "add", f"{net}.{i + 1}/24", "dev", IFNAME)
            _ip("-n", ns, "link", "set", IFNAME, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        if hostile:
            hostile_lab.build_router(tag, net, cluster.public, bridge, namespaces)
            hostile_lab.build_firewalls(net, namespaces)
        if docker:
            _mount_tmpfs(engines_root)
        for node, ns in namespaces.items() if docker else ():
            proc = _start_dockerd(folder, ns, node, engines[node], path_first, dockerd_args)
            engine_procs.append(proc)
            engines[node].pid = proc.pid
        for node, proc in zip(namespaces, engine_procs):
            _wait_engine(cluster, node, proc)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
        for node, ns in namespaces.items():
            proc = _start_sshd(folder, ns, node, private)
            procs.append(proc)
            cluster.sshd_pids[node] = proc.pid
        for node, proc in zip(namespaces, procs):
            _wait_ssh(cluster, node, proc)
        yield cluster
    finally:
        _stop_engines(cluster, engine_procs)
        _stop_pids(sorted(set(cluster.pids()) | {p.pid for p in procs}))
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        for ns in namespaces.values():
            subprocess.run(["ip", "link", "del", f"{ns}-h"], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        if hostile:
            hostile_lab.remove_router(tag)
        for ns in namespaces.values():
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        if docker:
            _unmount_tmpfs(engines_root)
            for ns in namespaces.values():
                _remove_cgroups(cgroup_parent(ns))
