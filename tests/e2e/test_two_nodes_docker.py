"""`make remote HOSTS=node-a,node-b RUNTIME=docker` (and IMAGE=) on a real two-node cluster, a Docker engine
per node.

tests/e2e/two_nodes.py with docker=True: each network namespace runs its own dockerd (own data root, socket,
hostname and /etc/hosts), and each node's sshd hands its sessions DOCKER_HOST for that node's engine, so
`docker` over ssh on node-b is node-b's engine and nothing is shared between the two but the disk. The laptop
is this process (the root namespace), as in tests/e2e/test_two_nodes.py.

The images are small (what is measured is the set-up, not the suite): the local Debian base
(docker/debian-base.sh,
~120 MB) plus a stand-in `python` that answers the GPU check as provisioning/cuda_check_host.py would, torch
seeing
its GPU on node-a and none on node-b (a `--network host` container's hostname is its node's). The nodes' other
tools are stand-ins too: nvidia-smi listing one H100 on an R550 driver (preflight then takes the cu126 line),
and
nvidia-container-runtime-hook on dockerd's PATH, with which dockerd accepts `--gpus all` (the hook runs and
gives
the container nothing: there is no GPU here), and runc behind a stand-in runtime that drops the container's
memlock limit (`--ulimit memlock=-1` of the GPU settings: root here lacks CAP_SYS_RESOURCE, so runc cannot
raise
it, where a GPU box's dockerd runs with LimitMEMLOCK=infinity). What runs for real: preflight of both nodes
through their engines, the detached job's set-up on node-a (the image found, `docker save | ssh node-b docker
load`, every node's image ID read from its own engine and compared), the GPU check's `docker run --gpus all`
on
each node's engine, the refusals as the laptop shows them.

  1. IMAGE= naming a tag that node-b's engine holds as another image (no registry answers, so the pulls fail
     and each node keeps its copy): refused before any stage, naming node-b, the two IDs and the fix.
  2. RUNTIME=docker on a GPU profile: the image built on node-a (placed there under cardtime:<commit>-cu126,
     as a previous `make remote` leaves it) carried to node-b, the IDs equal; then the GPU check in the image
     on both nodes: node-a's passes, node-b's refuses, and the job ends before any stage naming node-b.
  3. RUNTIME=docker on the CPU profile, both nodes holding the image already: nothing carried; the image (a
     Debian minbase) has no ssh client, which the suite in it needs to reach node-b: refused before the run.

Cost on this 2-core machine under load ~5 (other sessions): the engines up in 2–4 s (on a tmpfs of their own),
the base imported in 2–6 s, the three `make remote` 11–14 s (IMAGE=), 17–25 s (the carry, the GPU checks) and
13–18 s (held already), teardown ~1.5 s: the file 50–67 s in all (load 3.5–5). The suite's own CPU image
(docker/cpu.Dockerfile, 1.9 GB) costs ~50 s to load into one engine and ~60–95 s to carry to the other
(measured here, December 2026): too much for `make test`; tests/e2e/two_nodes_docker_run.py runs it across
both engines by hand.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.remote_loopback import WORKTREE, make_repo, provisioning
from tests.e2e.two_nodes import _alive, cgroup_parent, docker_missing, netns_missing, two_node_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.needs("netns", "docker", "debian-base"), pytest.mark.timeout(600)]

BASE = "cardtime-base:bookworm"
STAND_IN = "cardtime-test:stand-in"

FAKE_NVIDIA_SMI = """#!/bin/sh
# One H100 on an R550 driver, as nvidia-smi answers the preflight probe (provisioning/session/preflight.py's PROBE_SCRIPT).
case "$*" in -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6f1f3b4c-0000-0000-0000-00000000000b)" ;;
  *compute_cap*) printf 'index, name, compute_cap, driver_version\n0, NVIDIA H100 80GB HBM3, 9.0, 550.54.15\n' ;;
  *driver_version*) echo "550.54.15" ;; esac
"""  # noqa: E501

FAKE_HOOK = """#!/bin/sh
# Stand-in for the NVIDIA container toolkit's OCI hook: dockerd accepts --gpus when it finds this on its PATH;
# runc runs it before the container starts, the container's state on stdin. It gives the container nothing.
cat > /dev/null
"""

MEMLOCK_FREE_RUNC = """#!{python}
# Stand-in OCI runtime: runc, minus the container's RLIMIT_MEMLOCK (see the module's docstring).
import json, os, sys
args = sys.argv[1:]
if "create" in args and "--bundle" in args:
    config = os.path.join(args[args.index("--bundle") + 1], "config.json")
    with open(config) as f:
        spec = json.load(f)
    spec["process"]["rlimits"] = [r for r in spec["process"].get("rlimits", []) if r["type"] != "RLIMIT_MEMLOCK"]
    with open(config, "w") as f:
        json.dump(spec, f)
os.execvp("runc", ["runc", *args])
"""  # noqa: E501

STAND_IN_PYTHON = """#!/bin/sh
# The image's `python` for the GPU check (provisioning/cuda_check_host.py's output, no torch here): torch sees
# its GPU on node-a and none on node-b. Under --network host the container's hostname is its node's.
if [ "$(hostname)" = node-a ]; then
  echo "torch 2.13.0 (CUDA 12.6) in the image sees its 1 GPU(s) and computes a matmul on each as the CPU does on node-a"
  exit 0
fi
echo "cardtime GPU check REFUSED: torch in the image sees 0 GPU(s) where nvidia-smi lists 1 on $(hostname): \
unset CUDA_VISIBLE_DEVICES or give the container every GPU (--gpus all)"
exit 2
"""  # noqa: E501


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = netns_missing() or docker_missing()
    if why:
        pytest.skip(f"no two-node cluster with engines on this machine: {why}")
    folder = tmp_path_factory.mktemp("docker-nodes")
    fake = folder / "fakebin"
    fake.mkdir()
    for name, text in (
        ("nvidia-smi", FAKE_NVIDIA_SMI),
        ("nvidia-container-runtime-hook", FAKE_HOOK),
        ("memlock-free-runc", MEMLOCK_FREE_RUNC.format(python=sys.executable)),
    ):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    runtime = (
        "--add-runtime",
        f"memlock-free={fake / 'memlock-free-runc'}",
        "--default-runtime",
        "memlock-free",
    )
    started = time.monotonic()
    with two_node_cluster(folder / "cluster", docker=True, path_first=fake, dockerd_args=runtime) as made:
        print(f"\ncluster with two engines up in {time.monotonic() - started:.1f} s")
        base_on(made, "node-a")
        yield made
        engines = list(made.engines.values())
    print(f"cluster down {time.monotonic() - started:.1f} s after it started")
    # Nothing the cluster started or made is left: the engines, their folders, their cgroups, the namespaces.
    assert len(engines) == 2 and not [e.pid for e in engines if _alive(e.pid)]
    assert not [e for e in engines if e.data_root.exists() or e.socket.exists()]
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{cgroup_parent(made.namespaces['node-a'])}"))
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in made.namespaces.values() if ns in listed.split()]


def base_on(cluster, node: str) -> None:
    """The local Debian base on `node`'s engine: docker/debian-base.sh (the cached tarball imported)."""
    started = time.monotonic()
    done = subprocess.run(
        [str(WORKTREE / "docker" / "debian-base.sh"), BASE],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "DOCKER_HOST": cluster.engines[node].host},
    )
    if done.returncode != 0:
        pytest.skip(f"no local Debian base image: {done.stdout[-500:]}{done.stderr[-800:]}")
    print(f"{BASE} on {node} in {time.monotonic() - started:.1f} s")


def image_id(cluster, node: str, image: str) -> str:
    done = cluster.docker(node, "image", "inspect", "--format", "{{.Id}}", image, check=False, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


@pytest.fixture(scope="module")
def stand_in(cluster) -> str:
    """The base plus the stand-in python, committed on node-a's engine; its image ID."""
    cluster.docker(
        "node-a",
        "run",
        "--name",
        "cardtime-make-stand-in",
        "--network",
        "none",
        "-i",
        BASE,
        "sh",
        "-c",
        "cat > /usr/local/bin/python && chmod 755 /usr/local/bin/python",
        input=STAND_IN_PYTHON.encode(),
    )
    cluster.docker("node-a", "commit", "cardtime-make-stand-in", STAND_IN)
    cluster.docker("node-a", "rm", "cardtime-make-stand-in")
    return image_id(cluster, "node-a", STAND_IN)


@pytest.fixture(scope="module")
def laptop(tmp_path_factory) -> Path:
    """The laptop: a fresh repository of this tree's files, one commit (both tests run make remote from
    it)."""
    return make_repo(tmp_path_factory.mktemp("laptop"))


def make_remote(cluster, laptop: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    """`make remote HOSTS=node-a,node-b` from the laptop, RUNTIME=docker, a remote folder both nodes see (they
    share this machine's disk), node-a reaching node-b with the cluster's keys."""
    return provisioning(
        "remote",
        "--host",
        "",
        "--hosts",
        "node-a,node-b",
        "--ssh-config",
        str(cluster.ssh_config),
        "--node-ssh-config",
        str(cluster.ssh_config),
        "--runtime",
        "docker",
        "--remote-dir",
        str(tmp_path / "remote"),
        "--runs-dir",
        str(tmp_path / "fetched"),
        "--detach",
        "setsid",
        "--stages",
        "topology",
        *extra,
        cwd=laptop,
    )


def refused_make_remote(
    cluster, laptop: Path, tmp_path: Path, what: str, *extra: str
) -> tuple[str, Path, str]:
    """make_remote that must end refused (exit 2) after starting its job: (what the laptop said, the job's
    folder, the job's log)."""
    started = time.monotonic()
    done = make_remote(cluster, laptop, tmp_path, *extra)
    print(f"make remote {what} in {time.monotonic() - started:.1f} s")
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-4000:]
    jobs = [p.parent for p in (tmp_path / "remote" / "jobs").glob("*/job.json")]
    assert len(jobs) == 1, out[-4000:]
    return out, jobs[0], (jobs[0] / "log").read_text()


def laptop_commit(laptop: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(laptop), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_node_holding_another_image_under_the_tag_is_refused_before_any_stage(
    cluster, stand_in, laptop, tmp_path
):
    tag = "cardtime-test:two-nodes"
    cluster.docker("node-a", "tag", STAND_IN, tag)
    other = tmp_path / "other.tar"  # node-b's image under the same tag: one file, another ID
    subprocess.run(["tar", "-C", str(WORKTREE), "-cf", str(other), "README.md"], check=True)
    cluster.docker("node-b", "import", str(other), tag)
    a_id, b_id = image_id(cluster, "node-a", tag), image_id(cluster, "node-b", tag)
    assert a_id == stand_in and b_id.startswith("sha256:") and b_id != a_id
    out, job, log = refused_make_remote(
        cluster, laptop, tmp_path, "IMAGE= (refused)", "--image", tag, "--profile", "gloo-cpu"
    )
    line = (
        f"node node-b: image {tag} is {b_id} there but {a_id} on node-a: the tag {tag} names another image "
        f"there (pushed again between the pulls?): pin one with IMAGE=<name>@sha256:<digest> and run again"
    )
    assert (job / "refused").read_text().strip() == line
    assert f"error: node-a: {line}" in out, out[-4000:]  # the laptop shows the node and the fix
    # Each engine was asked by its own node: the pulls failed there (no registry), each kept its copy.
    assert f"pull failed; using the copy of {tag} already on the host" in log
    assert "[node-b] " in log and f"── node node-b: docker pull {tag}" in log
    assert (job / "image-ids" / "node-a").read_text().strip() == a_id
    assert (job / "image-ids" / "node-b").read_text().strip() == b_id
    assert "── GPU check" not in log and "topology" not in log.split("REFUSED")[-1]  # no stage, no check
    assert not list((tmp_path / "remote" / "runs").glob("*/manifest.json"))
    assert image_id(cluster, "node-b", tag) == b_id  # refused, not overwritten


def test_the_image_is_carried_to_node_b_and_its_gpu_check_refuses_naming_it(
    cluster, stand_in, laptop, tmp_path
):
    from provisioning.runtime.remote_docker import image_tag
    from suite.hardware.cuda_lines import line_named

    # what the job builds for the R550 driver, found on node-a
    tag = image_tag(laptop_commit(laptop), line_named("cu126"))
    cluster.docker("node-a", "tag", STAND_IN, tag)
    assert image_id(cluster, "node-b", tag) == ""
    out, job, log = refused_make_remote(
        cluster, laptop, tmp_path, "RUNTIME=docker (carry, GPU checks)", "--profile", "nccl-gpu"
    )
    # Built once (found, here) on node-a, carried by save | ssh load, every node's engine holding the same ID.
    assert f"image {tag} already on the host" in log, log[-3000:]
    assert f"── carrying {tag} to node node-b (docker save | ssh docker load)" in log
    assert f"[node-b] Loaded image: {tag}" in log
    assert image_id(cluster, "node-b", tag) == stand_in
    assert f"── every node holds {tag} as {stand_in}" in log
    # Then the GPU check in the image on each node's own engine: node-a's passes, node-b's refuses, named.
    assert (
        "torch 2.13.0 (CUDA 12.6) in the image sees its 1 GPU(s) and computes a matmul on each as the CPU "
        "does on node-a" in log
    )
    why = (
        "torch in the image sees 0 GPU(s) where nvidia-smi lists 1 on node-b: unset CUDA_VISIBLE_DEVICES or "
        "give the container every GPU (--gpus all)"
    )
    assert (job / "refused").read_text().strip() == f"node node-b: {why}"
    assert f"error: node-a: node node-b: {why}" in out, out[-4000:]
    order = [
        log.index(s)
        for s in (
            f"── carrying {tag}",
            "── every node holds",
            "── GPU check: does torch",
            "── GPU check on node node-b",
            f"[node-b] cardtime GPU check REFUSED: {why}",
            "GPU check REFUSED on node(s) node-b",
        )
    ]
    assert order == sorted(order), order
    assert not list((tmp_path / "remote" / "runs").glob("*/manifest.json"))  # no stage ran
    assert (job / "exit").read_text().strip() == "2"


def test_a_node_holding_the_image_already_is_not_carried_to_and_an_image_without_ssh_is_refused(
    cluster, stand_in, laptop, tmp_path
):
    """gloo-cpu, RUNTIME=docker, both engines holding the stand-in under cardtime:<commit> (node-b from the
    carry above, or loaded here): nothing is carried; then the stand-in, a Debian minbase, has no ssh client,
    which the suite in it needs to start node-b's commands: refused before the run (else every multi-node
    stage failed)."""
    from provisioning.runtime.remote_docker import image_tag

    tag = image_tag(laptop_commit(laptop))
    if image_id(cluster, "node-b", stand_in) != stand_in:
        subprocess.run(
            [
                "sh",
                "-c",
                f"docker save {STAND_IN} | DOCKER_HOST={cluster.engines['node-b'].host} docker load",
            ],
            env={**os.environ, "DOCKER_HOST": cluster.engines["node-a"].host},
            check=True,
            capture_output=True,
            timeout=300,
        )
    for node in ("node-a", "node-b"):
        cluster.docker(node, "tag", stand_in, tag)
    out, job, log = refused_make_remote(
        cluster, laptop, tmp_path, "RUNTIME=docker (held already, no ssh)", "--profile", "gloo-cpu"
    )
    assert f"── node node-b holds {tag} already" in log and "── carrying" not in log, log[-3000:]
    assert f"── every node holds {tag} as {stand_in}" in log
    line = (
        f"node node-a: image {tag} has no ssh client, which the suite in it needs to start the other nodes' "
        "commands: install openssh-client in the image (the project's Dockerfile does), or use RUNTIME=host"
    )
    assert (job / "refused").read_text().strip() == line
    assert f"error: node-a: {line}" in out, out[-4000:]
    assert "── GPU check" not in log and "── set-up done" not in log  # a CPU profile; and no run started
    assert not list((tmp_path / "remote" / "runs").glob("*/manifest.json"))
