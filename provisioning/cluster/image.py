"""`make remote HOSTS=a,b RUNTIME=docker` (or IMAGE=): one image, the same on every node, before any card
time.

The image is made once, on the first node, by the detached job's set-up exactly as for one host
(remote_docker.image_setup: IMAGE= pulled, else cardtime:<commit> built from HEAD's files). Then:

  carried (built)   each other node that does not hold the same image ID gets it over the node-to-node ssh
                    the run needs anyway: `docker save IMAGE | ssh <node> docker load` (no registry involved)
  pulled (IMAGE=)   each other node pulls IMAGE itself (`ssh <node> docker pull IMAGE`)

and every node's image ID (`docker image inspect --format {{.Id}}`) is compared with the first node's: a node
that lacks the image or holds another one ends the set-up with exit 2 and one line naming the node and the fix
(in the job's log and in jobs/<id>/refused, which the laptop shows), before the GPU check and any stage.

On GPU profiles the GPU check (provisioning/runtime/cuda_check.py) then runs in the image on every node, as
RUNTIME=host checks every node's venv: the first node's own (refused as one host's), then each other node's
over ssh, all at once (`nodes_gpu_check_lines`); a node whose torch does not see its GPUs ends the set-up with
exit 2 and "node <name>: <why>" in jobs/<id>/refused. Last, the image must hold an ssh client
(`ssh_client_lines`): the suite in it reaches the other nodes through it.

The run itself: the suite in the image on the first node (`first_node_run_argv`), which reaches the other
nodes over ssh with the host's keys (~/.ssh mounted) and runs each node's command in the same image with the
same settings (`node_container_prefix`, handed down in CARDTIME_NODE_CONTAINER:
suite/cluster/node_container.py).
"""

from __future__ import annotations

import json
import posixpath

from provisioning.cluster.nodes import on_node
from provisioning.cuda_check_host import REFUSED
from provisioning.runtime import host_kernel_log, suite_container
from provisioning.runtime.cuda_check import REFUSED_FILE
from provisioning.runtime.efa import Efa
from provisioning.session.shell import join, quote
from suite.cluster.multinode import Node
from suite.cluster.node_container import NODE_CONTAINER_ENV

IDS_DIR = "image-ids"
"""Under the job's folder: one file per node holding its image ID (empty: the node lacks the image)."""


def image_id_argv(image: str) -> list[str]:
    """The image ID a node's engine holds under `image` (nothing, exit 1, when it holds none)."""
    return ["docker", "image", "inspect", "--format", "{{.Id}}", image]


def carry_lines(image: str, nodes: list[Node], ssh_config: str, *, pulled: bool) -> str:
    """The set-up's lines after the first node has `image`: each other node pulls it (IMAGE=) or, when it does
    not hold the same ID already, receives the first node's copy (`docker save | ssh docker load`)."""
    q, lines = quote, []
    if not pulled:
        lines.append(f"here=$({on_node(None, image_id_argv(image), ssh_config)} 2>/dev/null)")
    for node in nodes:
        if pulled:
            lines.append(f"echo {q(f'── node {node.name}: docker pull {image}')}")
            pull = on_node(node, ["docker", "pull", image], ssh_config)
            lines.append(f"{pull} < /dev/null 2>&1 | sed {q(f's/^/[{node.name}] /')}")
            continue
        lines.append(f"there=$({on_node(node, image_id_argv(image), ssh_config)} 2>/dev/null < /dev/null)")
        lines.append('if [ -n "$here" ] && [ "$there" = "$here" ]; then')
        lines.append(f"  echo {q(f'── node {node.name} holds {image} already')}")
        lines.append("else")
        lines.append(
            f"  echo {q(f'── carrying {image} to node {node.name} (docker save | ssh docker load)')}"
        )
        lines.append(
            f"  {join(['docker', 'save', image])} | {on_node(node, ['docker', 'load'], ssh_config)} 2>&1 "
            f"| sed {q(f's/^/[{node.name}] /')}"
        )
        lines.append("fi")
    return "\n".join(lines) + "\n"


def read_ids_lines(image: str, first: str, nodes: list[Node], ssh_config: str, job_dir: str) -> str:
    """Each node's image ID into <job_dir>/image-ids/<node> (the first node's own engine, the others over
    ssh)."""
    ids = f"{job_dir}/{IDS_DIR}"
    lines = [f"mkdir -p -- {quote(ids)}"]
    for name, node in [(first, None), *((n.name, n) for n in nodes)]:
        out = quote(f"{ids}/{name}")
        lines.append(
            f"{on_node(node, image_id_argv(image), ssh_config)} > {out} 2>/dev/null < /dev/null || : > {out}"
        )
    return "\n".join(lines) + "\n"


def _fixes(image: str, first: str, node: Node, pulled: bool) -> tuple[str, str]:
    """(the fix when `node` lacks the image, the fix when it holds another one)."""
    if pulled:
        return (
            f"the pull failed there (see its [{node.name}] lines above): `docker login` on {node.name} for a "
            f"private registry, or let it reach the registry, then run the same make remote again",
            f"the tag {image} names another image there (pushed again between the pulls?): pin one with "
            f"IMAGE=<name>@sha256:<digest> and run again",
        )
    return (
        f"the copy from {first} did not load there (see its [{node.name}] lines above): free Docker's disk "
        f"on {node.name} (docker system df) and run the same make remote again",
        f"remove the other copy there (ssh {node.destination} docker rmi {image}) and run the same make "
        "remote again: the job carries the first node's anew",
    )


def compare_lines(image: str, first: str, nodes: list[Node], job_dir: str, *, pulled: bool) -> str:
    """The set-up's check that every node holds the first node's image ID (files from read_ids_lines): the
    first node that lacks it or holds another ends the set-up with exit 2, its one line in the log and in
    <job_dir>/refused; else one line saying the ID every node holds."""
    q, ids = quote, f"{job_dir}/{IDS_DIR}"
    refused = q(f"{job_dir}/{REFUSED_FILE}")
    no_first = (
        f"node {first}: no image {image} after the set-up (see the lines above): fix the build or pull "
        "and run the same make remote again"
    )
    lines = [
        f"first_id=$(cat {q(f'{ids}/{first}')})",
        'if [ -z "$first_id" ]; then',
        f"  line={q(no_first)}",
        f'  echo "REFUSED: $line"; echo "$line" > {refused}; exit 2',
        "fi",
    ]
    for node in nodes:
        missing, differs = _fixes(image, first, node, pulled)
        lines += [
            f"id=$(cat {q(f'{ids}/{node.name}')})",
            'if [ -z "$id" ]; then',
            f"  line={q(f'node {node.name}: no image {image} there: {missing}')}",
            'elif [ "$id" != "$first_id" ]; then',
            f'  line={q(f"node {node.name}: image {image} is ")}"$id"{q(" there but ")}"$first_id"'
            f"{q(f' on {first}: {differs}')}",
            "else",
            "  line=''",
            "fi",
            f'if [ -n "$line" ]; then echo "REFUSED: $line"; echo "$line" > {refused}; exit 2; fi',
        ]
    lines.append(f'echo "── every node holds {image} as $first_id"')
    return "\n".join(lines) + "\n"


def same_image_setup(
    image: str, first: str, nodes: list[Node], ssh_config: str, job_dir: str, *, pulled: bool
) -> str:
    """What the set-up runs after the first node has the image: carry or pull it to the others, then check
    IDs."""
    return (
        carry_lines(image, nodes, ssh_config, pulled=pulled)
        + read_ids_lines(image, first, nodes, ssh_config, job_dir)
        + compare_lines(image, first, nodes, job_dir, pulled=pulled)
    )


NO_SSH = "cardtime-no-ssh-client"


def ssh_client_lines(image: str, first: str, job_dir: str) -> str:
    """The set-up's check that the image has an ssh client: the suite in it starts every other node's commands
    over ssh, and without one each multi-node stage would fail in turn after the run started. Refused (exit 2,
    the line in <job_dir>/refused) only when the image answers that it has none; a container that does not
    start at all is left to the run, which says why."""
    q = quote
    probe = join(
        [
            "docker",
            "run",
            "--rm",
            "--network=host",
            "--entrypoint",
            "sh",
            image,
            "-c",
            f"command -v ssh || echo {NO_SSH}",
        ]
    )
    line = (
        f"node {first}: image {image} has no ssh client, which the suite in it needs to start the other "
        f"nodes' "
        "commands: install openssh-client in the image (the project's Dockerfile does), or use RUNTIME=host"
    )
    return (
        f"echo {q(f'── an ssh client in {image} (the suite in it reaches the other nodes)')}\n"
        f"said=$({probe} 2>&1 < /dev/null) || :\n"
        f'case "$said" in *{NO_SSH}*)\n'
        f"  line={q(line)}\n"
        f'  echo "REFUSED: $line"; echo "$line" > {q(f"{job_dir}/{REFUSED_FILE}")}; exit 2 ;;\n'
        "esac\n"
    )


def nodes_gpu_check_lines(checks: list[tuple[Node, list[str]]], ssh_config: str, job_dir: str) -> str:
    """The set-up's lines after the first node's own GPU check: each other node's check (its `docker run` of
    the image, cuda_check.image_argv with that node's GPU count and driver) over ssh, all at once, each one's
    output kept in <job_dir>/cuda-check-<node>.out and shown prefixed with its name; any node refused ends the
    set-up with exit 2, the first such node's line, named, in <job_dir>/refused."""
    q, refused = quote, quote(f"{job_dir}/{REFUSED_FILE}")
    lines = []
    for i, (node, argv) in enumerate(checks):
        out = q(f"{job_dir}/cuda-check-{node.name}.out")
        lines.append(f"echo {q(f'── GPU check on node {node.name} (the image there, over ssh)')}")
        lines.append(f"{on_node(node, argv, ssh_config)} > {out} 2>&1 < /dev/null &")
        lines.append(f"check{i}=$!")
    lines.append("failed=''")
    for i, (node, _) in enumerate(checks):
        out = q(f"{job_dir}/cuda-check-{node.name}.out")
        unread = f"the GPU check itself failed there (exit $rc): see the [{node.name}] lines of the job's log"
        lines += [
            f"if wait $check{i}; then rc=0; else rc=$?; fi",
            f"sed {q(f's/^/[{node.name}] /')} {out}",
            'if [ "$rc" -ne 0 ]; then',
            f"  line=$(sed -n {q('s/^' + REFUSED + '//p')} {out} | tail -n 1)",
            f'  [ -n "$line" ] || line="{unread}"',
            f'  [ -n "$failed" ] || echo "node {node.name}: $line" > {refused}',
            f'  failed="$failed {node.name}"',
            "fi",
        ]
    lines += [
        'if [ -n "$failed" ]; then',
        '  echo "GPU check REFUSED on node(s)$failed: see the [node] lines above"; exit 2',
        "fi",
    ]
    return "\n".join(lines) + "\n"


def node_container_prefix(
    image: str,
    *,
    runs_dir: str,
    job_dir: str,
    gpus: bool,
    user: str | None,
    rdma: bool = False,
    login_home: str = "",
    efa: Efa | None = None,
) -> list[str]:
    """`docker run … IMAGE` of every other node's commands: the single-host container's settings and mounts
    (host network and IPC, `--gpus all`, the ulimits, the run and job folders at the same paths), removed at
    its end; suite/cluster/node_container.py adds the name, working folder, environment and command per
    launch. A login other than root runs as its uid:gid, known inside as on the host
    (RunSettings.login_home)."""
    settings = suite_container.RunSettings(
        gpus=gpus,
        mounts=(runs_dir, job_dir),
        user=user,
        rdma=rdma and gpus,
        login_home=login_home if user else "",
        host_folders=efa.folders if efa else (),
        environment=dict(efa.environment) if efa else {},
    )
    return ["docker", "run", "--rm", *settings.docker_flags(), image]


def first_node_run_argv(
    image: str,
    suite_args: list[str],
    *,
    job_id: str,
    runs_dir: str,
    job_dir: str,
    home: str,
    ssh_config: str,
    gpus: bool,
    user: str | None,
    rdma: bool = False,
    efa: Efa | None = None,
) -> list[str]:
    """The detached job's `docker run` of the suite on the first node: the single-host settings, plus the host
    user's ~/.ssh (and NODE_SSH_CONFIG's folder) at the same paths, so the suite inside reaches the other
    nodes with the host's keys, and the other nodes' container argv in CARDTIME_NODE_CONTAINER. A login other
    than root (`user`) is the same account inside, its home `home` (ssh runs as it, with its ~/.ssh)."""
    ssh_dirs = [f"{home.rstrip('/')}/.ssh"]
    if ssh_config and posixpath.dirname(ssh_config) not in ssh_dirs:
        ssh_dirs.append(posixpath.dirname(ssh_config))
    login_home = home if user else ""
    prefix = node_container_prefix(
        image,
        runs_dir=runs_dir,
        job_dir=job_dir,
        gpus=gpus,
        user=user,
        rdma=rdma,
        login_home=login_home,
        efa=efa,
    )
    settings = suite_container.RunSettings(
        gpus=gpus,
        mounts=(runs_dir, job_dir, *ssh_dirs),
        user=user,
        rdma=rdma and gpus,
        login_home=login_home,
        host_folders=efa.folders if efa else (),
        environment={
            NODE_CONTAINER_ENV: json.dumps(prefix),
            **host_kernel_log.environment(job_dir),
            **(efa.environment if efa else {}),
        },
    )
    return suite_container.docker_run_argv(image, settings, suite_args, name=f"cardtime-{job_id}")
