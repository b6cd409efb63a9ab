"""make remote HOSTS= RUNTIME=docker (provisioning/cluster/image.py, suite/cluster/node_container.py): the
exact docker and ssh command lines per node, the image-ID comparison run for real by sh on ID files, its
refusal lines, and the other nodes' container command the suite's launcher really starts."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest

from provisioning.cluster.image import (
    carry_lines,
    compare_lines,
    first_node_run_argv,
    node_container_prefix,
    read_ids_lines,
    same_image_setup,
)
from suite.cluster.multinode import parse_node
from suite.cluster.node_container import (
    NODE_CONTAINER_ENV,
    container_name,
    container_node_command,
    container_prefix,
)

IMAGE = "cardtime:0123456789ab"
B = parse_node("root@gpu-b:2222")
C = parse_node("ubuntu@gpu-c")
SSH_B = [
    "ssh",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "BatchMode=yes",
    "-F",
    "/etc/cluster_ssh",
    "-p",
    "2222",
    "root@gpu-b",
]
SSH_C = ["ssh", "-o", "ConnectTimeout=10", "-o", "BatchMode=yes", "-F", "/etc/cluster_ssh", "ubuntu@gpu-c"]
INSPECT = ["docker", "image", "inspect", "--format", "{{.Id}}", IMAGE]


def words(line: str) -> list[str]:
    return shlex.split(line)


def test_each_nodes_image_id_is_read_by_its_own_engine():
    lines = read_ids_lines(IMAGE, "gpu-a", [B, C], "/etc/cluster_ssh", "/w/jobs/j1").splitlines()
    assert len(lines) == 4 and lines[0] == "mkdir -p -- /w/jobs/j1/image-ids"
    redirect = ["2>/dev/null", "<", "/dev/null", "||", ":", ">"]
    assert words(lines[1]) == [
        *INSPECT,
        ">",
        "/w/jobs/j1/image-ids/gpu-a",
        *redirect,
        "/w/jobs/j1/image-ids/gpu-a",
    ]
    assert words(lines[2]) == [
        *SSH_B,
        shlex.join(INSPECT),
        ">",
        "/w/jobs/j1/image-ids/gpu-b",
        *redirect,
        "/w/jobs/j1/image-ids/gpu-b",
    ]
    assert words(lines[3])[: len(SSH_C) + 1] == [*SSH_C, shlex.join(INSPECT)]


def test_a_built_image_is_carried_by_save_and_load_unless_the_node_holds_it():
    lines = carry_lines(IMAGE, [B, C], "/etc/cluster_ssh", pulled=False).splitlines()
    assert lines[0] == f"here=$({shlex.join(INSPECT)} 2>/dev/null)"
    carries = [line.strip() for line in lines if line.strip().startswith("docker save")]
    assert len(carries) == 2
    save, load, prefix = (part.strip() for part in carries[0].split(" | "))
    assert words(save) == ["docker", "save", IMAGE]
    assert words(load) == [*SSH_B, "docker load", "2>&1"] and words(prefix) == ["sed", "s/^/[gpu-b] /"]
    assert words(carries[1].split(" | ")[1]) == [*SSH_C, "docker load", "2>&1"]
    checks = [line for line in lines if line.startswith("there=$(")]
    assert words(checks[0][len("there=$(") :].split(" 2>")[0]) == [*SSH_B, shlex.join(INSPECT)]


def test_a_pushed_image_is_pulled_by_every_other_node_itself():
    lines = carry_lines("reg.example/cardtime:cu130", [B], "", pulled=True).splitlines()
    assert "docker save" not in "\n".join(lines) and "here=" not in "\n".join(lines)
    (pull,) = [line for line in lines if "docker pull" in line and not line.startswith("echo")]
    assert words(pull.split(" | ")[0]) == [
        "ssh",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "BatchMode=yes",
        "-p",
        "2222",
        "root@gpu-b",
        "docker pull reg.example/cardtime:cu130",
        "<",
        "/dev/null",
        "2>&1",
    ]


def compare(tmp_path, ids: dict[str, str], *, pulled: bool = False, image: str = IMAGE):
    """compare_lines run by sh on ID files as read_ids_lines leaves them: (exit code, stdout, refused
    file)."""
    (tmp_path / "image-ids").mkdir()
    for name, image_id in ids.items():
        (tmp_path / "image-ids" / name).write_text(image_id + "\n" if image_id else "")
    script = compare_lines(image, "gpu-a", [B, C], str(tmp_path), pulled=pulled)
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    refused = tmp_path / "refused"
    return done.returncode, done.stdout, refused.read_text() if refused.exists() else None


A_ID, OTHER_ID = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def test_every_node_holding_the_first_nodes_image_id_passes(tmp_path):
    code, out, refused = compare(tmp_path, {"gpu-a": A_ID, "gpu-b": A_ID, "gpu-c": A_ID})
    assert (code, refused) == (0, None)
    assert out.splitlines() == [f"── every node holds {IMAGE} as {A_ID}"]


def test_a_node_holding_another_image_is_refused_naming_it_and_the_fix(tmp_path):
    code, out, refused = compare(tmp_path, {"gpu-a": A_ID, "gpu-b": A_ID, "gpu-c": OTHER_ID})
    line = (
        f"node gpu-c: image {IMAGE} is {OTHER_ID} there but {A_ID} on gpu-a: remove the other copy there "
        f"(ssh ubuntu@gpu-c docker rmi {IMAGE}) and run the same make remote again: the job carries the "
        "first node's anew"
    )
    assert code == 2 and refused == line + "\n" and out.splitlines() == [f"REFUSED: {line}"]


def test_a_node_without_the_image_is_refused_before_one_that_differs(tmp_path):
    code, out, refused = compare(tmp_path, {"gpu-a": A_ID, "gpu-b": "", "gpu-c": OTHER_ID})
    assert code == 2 and refused == (
        f"node gpu-b: no image {IMAGE} there: the copy from gpu-a did not load there "
        "(see its [gpu-b] lines above): free Docker's disk on gpu-b (docker system df) "
        "and run the same make remote again\n"
    )


def test_a_pulled_tag_naming_two_images_asks_for_a_digest(tmp_path):
    image = "reg.example/cardtime:cu130"
    code, _, refused = compare(
        tmp_path, {"gpu-a": A_ID, "gpu-b": OTHER_ID, "gpu-c": A_ID}, pulled=True, image=image
    )
    assert code == 2 and refused == (
        f"node gpu-b: image {image} is {OTHER_ID} there but {A_ID} on gpu-a: the tag "
        f"{image} names another image there (pushed again between the pulls?): pin one "
        "with IMAGE=<name>@sha256:<digest> and run again\n"
    )


def test_no_image_on_the_first_node_is_refused_first(tmp_path):
    code, _, refused = compare(tmp_path, {"gpu-a": "", "gpu-b": "", "gpu-c": ""})
    assert code == 2 and refused.startswith(f"node gpu-a: no image {IMAGE} after the set-up")


def test_the_whole_set_up_with_unreachable_nodes_ends_refused(tmp_path):
    """carry, read and compare run for real by sh: the other node's ssh fails at once (an unresolvable name),
    so it holds no image and the set-up ends with exit 2 naming it; the first node's ID is its own engine's
    (none here either without an engine: the refusal then names the first node)."""
    nodes = [parse_node("root@nosuch-b.invalid")]
    script = same_image_setup(IMAGE, "gpu-a", nodes, "", str(tmp_path), pulled=False)
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (tmp_path / "image-ids" / "nosuch-b.invalid").read_text() == ""
    refused = (tmp_path / "refused").read_text()
    first_id = (tmp_path / "image-ids" / "gpu-a").read_text().strip()
    expected = "node gpu-a: no image" if not first_id else "node nosuch-b.invalid: no image"
    assert refused.startswith(expected), refused
    assert any(
        line.startswith("[nosuch-b.invalid] ssh: Could not resolve hostname")
        for line in done.stdout.splitlines()
    )


def test_the_other_nodes_container_has_the_single_host_settings_and_mounts():
    prefix = node_container_prefix(IMAGE, runs_dir="/w/runs", job_dir="/w/jobs/j1", gpus=True, user=None)
    assert prefix == [
        "docker",
        "run",
        "--rm",
        "--gpus",
        "all",
        "--ipc=host",
        "--network=host",
        "--ulimit",
        "memlock=-1",
        "--ulimit",
        "stack=67108864",
        "-v",
        "/w/runs:/w/runs:rw",
        "-v",
        "/w/jobs/j1:/w/jobs/j1:rw",
        "-e",
        "PYTHONUNBUFFERED=1",
        IMAGE,
    ]
    command = container_node_command(
        prefix,
        "cardtime-gpu-b-1",
        "/runs",
        {"NCCL_IB_HCA": "mlx5", "RANK": "x y"},
        ["/opt/venv/bin/python", "-m", "torch.distributed.run", "--nnodes=2"],
    )
    assert command.startswith("exec ")
    assert words(command[len("exec ") :]) == [
        *prefix[:-1],
        "--name",
        "cardtime-gpu-b-1",
        "-w",
        "/runs",
        "-e",
        "NCCL_IB_HCA=mlx5",
        "-e",
        "RANK=x y",
        IMAGE,
        "/opt/venv/bin/python",
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
    ]


def test_the_first_nodes_suite_gets_the_keys_and_the_other_nodes_container():
    argv = first_node_run_argv(
        IMAGE,
        ["run", "--nodes", "root@gpu-a,root@gpu-b:2222"],
        job_id="j1",
        runs_dir="/w/runs",
        job_dir="/w/jobs/j1",
        home="/root",
        ssh_config="/etc/cluster/ssh",
        gpus=False,
        user="1000:1000",
    )
    assert argv[:4] == ["docker", "run", "--rm", "--name"] and argv[4] == "cardtime-j1"
    assert argv[-4:] == [IMAGE, "run", "--nodes", "root@gpu-a,root@gpu-b:2222"]
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert mounts == [
        "/w/runs:/w/runs:rw",
        "/w/jobs/j1:/w/jobs/j1:rw",
        "/root/.ssh:/root/.ssh:rw",
        "/etc/cluster:/etc/cluster:rw",
        "/etc/passwd:/etc/passwd:ro",
        "/etc/group:/etc/group:ro",
    ]
    assert "--gpus" not in argv and argv[argv.index("--user") + 1] == "1000:1000"
    (handed,) = [
        argv[i + 1] for i, a in enumerate(argv) if a == "-e" and argv[i + 1].startswith(NODE_CONTAINER_ENV)
    ]
    prefix = container_prefix({NODE_CONTAINER_ENV: handed.split("=", 1)[1]})
    assert prefix == node_container_prefix(
        IMAGE, runs_dir="/w/runs", job_dir="/w/jobs/j1", gpus=False, user="1000:1000", login_home="/root"
    )


def test_a_bad_node_container_setting_is_one_clear_error():
    assert container_prefix({}) is None
    for bad in ("[1, 2]", json.dumps(["podman", "run", IMAGE]), json.dumps(["docker", "run"])):
        with pytest.raises(ValueError, match=f"{NODE_CONTAINER_ENV} is not the JSON argv"):
            container_prefix({NODE_CONTAINER_ENV: bad})
    assert container_name("cardtime", "gpu-b", "dp.torchrun", "77") == "cardtime-gpu-b-dp.torchrun-77"
    assert container_name("cardtime", "10.77.0.2", "a b/c") == "cardtime-10.77.0.2-a-b-c"


def test_the_launcher_starts_another_nodes_torchrun_in_the_image(tmp_path, monkeypatch):
    """suite/cluster/multilaunch.py's start of another node, for real (ssh to an unresolvable name fails at
    once): the command it ran, logged first in the node's log, is ssh to the node running docker run of the
    same image."""
    from suite.cluster import multilaunch

    prefix = node_container_prefix(IMAGE, runs_dir=str(tmp_path), job_dir=str(tmp_path), gpus=True, user=None)
    monkeypatch.setenv(NODE_CONTAINER_ENV, json.dumps(prefix))
    node = parse_node("root@nosuch-b.invalid")
    log = tmp_path / "torchrun.log"
    proc = multilaunch._start(
        node,
        1,
        ["/opt/venv/bin/python", "-m", "torch.distributed.run"],
        {"NCCL_DEBUG": "INFO", "HOME": "/root"},
        log,
        "",
    )
    assert proc.wait(timeout=30) != 0
    ran = words(log.read_text().splitlines()[0][len("$ ") :])
    assert ran[:-1] == ["ssh", "-o", "BatchMode=yes", "-tt", "root@nosuch-b.invalid"]
    remote = words(ran[-1])
    name = remote[remote.index("--name") + 1]
    assert remote[0] == "exec" and name.startswith("cardtime-nosuch-b.invalid-torchrun-")
    assert remote[1:] == [
        *prefix[:-1],
        "--name",
        name,
        "-w",
        os.getcwd(),
        "-e",
        "NCCL_DEBUG=INFO",
        IMAGE,
        "/opt/venv/bin/python",
        "-m",
        "torch.distributed.run",
    ]


def test_mpirun_starts_its_daemon_on_another_node_in_the_image():
    """A containerised run's mpirun (suite/cluster/mpirun.py) names suite/cluster/node_rsh.py as its agent,
    which runs the daemon's command line (as Open MPI hands it over: node, then shell text) in the same image
    on that node."""
    import sys

    from suite.cluster.mpirun import mpirun_across_nodes
    from suite.cluster.multinode import parse_nodes
    from suite.cluster.node_rsh import agent_argv, main

    launch = mpirun_across_nodes(
        "mpirun", parse_nodes("root@gpu-a,root@gpu-b"), 8, "hf", ssh_config="/c", in_image=True
    )
    agent = launch[launch.index("plm_rsh_agent") + 1]
    assert launch.count("plm_rsh_agent") == 1
    assert shlex.split(agent) == [
        sys.executable,
        "-m",
        "suite.cluster.node_rsh",
        "ssh",
        "-o",
        "BatchMode=yes",
        "-F",
        "/c",
        "-l",
        "root",
        "--",
    ]
    prefix = node_container_prefix(IMAGE, runs_dir="/w/runs", job_dir="/w/jobs/j1", gpus=True, user=None)
    daemon = ["PATH=/usr/bin:$PATH", ";", "export", "PATH", ";", "orted", "-mca", "ess", "env"]
    argv = agent_argv(
        ["ssh", "-o", "BatchMode=yes", "-l", "root"], ["-x", "gpu-b", *daemon], prefix, "orted-1", "/runs"
    )
    assert (
        argv[:6] == ["ssh", "-o", "BatchMode=yes", "-l", "root", "-x"]
        and argv[6] == "gpu-b"
        and len(argv) == 8
    )
    assert words(argv[7]) == [
        "exec",
        *prefix[:-1],
        "--name",
        "orted-1",
        "-w",
        "/runs",
        IMAGE,
        "sh",
        "-c",
        "PATH=/usr/bin:$PATH ; export PATH ; orted -mca ess env",
    ]
    assert main(["ssh", "gpu-b", "true"]) == 2  # no `--`: the usage line, never an ssh


# The GPU check on every node (RUNTIME=docker): nodes_gpu_check_lines run by sh, each node's `ssh … docker
# run` answered by a stand-in ssh on PATH that prints what that node's check printed and exits with its code.
STAND_IN_SSH = """#!/bin/sh
for word; do node=$command; command=$word; done   # the last two words: user@node, then its command line
node=${node#*@}
printf '%s\\n' "$command" > "$ANSWERS/$node.ran"
cat "$ANSWERS/$node.out"; exit "$(cat "$ANSWERS/$node.rc")"
"""


def gpu_checks(tmp_path, answers: dict[str, tuple[int, str]]):
    """(exit code, stdout, refused file or None, {node: the command its ssh ran}) of the other nodes'
    checks."""
    from provisioning.cluster.image import nodes_gpu_check_lines
    from provisioning.runtime import cuda_check

    bin_dir, answer_dir = tmp_path / "bin", tmp_path / "answers"
    bin_dir.mkdir()
    answer_dir.mkdir()
    (bin_dir / "ssh").write_text(STAND_IN_SSH)
    (bin_dir / "ssh").chmod(0o755)
    for node, (rc, out) in answers.items():
        (answer_dir / f"{node}.rc").write_text(str(rc))
        (answer_dir / f"{node}.out").write_text(out)
    checks = [
        (B, cuda_check.image_argv(IMAGE, "j1", gpus_seen=8, driver="550.54.15")),
        (C, cuda_check.image_argv(IMAGE, "j1", gpus_seen=4, driver="550.54.15")),
    ]
    script = nodes_gpu_check_lines(checks, "/etc/cluster_ssh", str(tmp_path))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ANSWERS": str(answer_dir)}
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30, env=env)
    refused = tmp_path / "refused"
    ran = {
        node: words((answer_dir / f"{node}.ran").read_text())
        for node in answers
        if (answer_dir / f"{node}.ran").exists()
    }
    return done.returncode, done.stdout, refused.read_text() if refused.exists() else None, ran


SEES = "torch 2.13.0 (CUDA 12.6) in the image {IMAGE} sees its {n} GPU(s)\n"


def test_every_other_nodes_gpu_check_runs_in_the_image_there(tmp_path):
    code, out, refused, ran = gpu_checks(
        tmp_path, {"gpu-b": (0, SEES.format(IMAGE=IMAGE, n=8)), "gpu-c": (0, SEES.format(IMAGE=IMAGE, n=4))}
    )
    assert (code, refused) == (0, None), out
    assert f"[gpu-b] {SEES.format(IMAGE=IMAGE, n=8).strip()}" in out.splitlines()
    assert f"[gpu-c] {SEES.format(IMAGE=IMAGE, n=4).strip()}" in out.splitlines()
    assert len(ran) == 2
    # each node's own GPU count, in the image, with --gpus all
    for node, gpus in (
        ("gpu-b", "8"),
        ("gpu-c", "4"),
    ):
        argv = ran[node]
        assert argv[:3] == ["docker", "run", "--rm"] and argv[argv.index("--gpus") + 1] == "all"
        assert argv[argv.index(IMAGE) + 1 : argv.index(IMAGE) + 3] == ["python", "-c"]
        assert argv[argv.index("--gpus", argv.index(IMAGE)) + 1] == gpus


def test_a_node_whose_torch_misses_its_gpus_is_refused_naming_it(tmp_path):
    from provisioning.cuda_check_host import REFUSED

    why = "torch in the image cardtime:x sees 0 GPU(s) where nvidia-smi lists 4: give the container every GPU"
    code, out, refused, _ = gpu_checks(
        tmp_path,
        {"gpu-b": (0, SEES.format(IMAGE=IMAGE, n=8)), "gpu-c": (2, f"some import noise\n{REFUSED}{why}\n")},
    )
    assert code == 2 and refused == f"node gpu-c: {why}\n"
    assert out.splitlines()[-1] == "GPU check REFUSED on node(s) gpu-c: see the [node] lines above"
    assert f"[gpu-c] {REFUSED}{why}" in out.splitlines()


def test_a_check_that_could_not_run_is_refused_with_its_exit_code_and_the_first_failing_node(tmp_path):
    """`docker run --gpus all` on an engine without the NVIDIA toolkit exits 125 before the check prints a
    line."""
    said = (
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].\n'
    )
    code, out, refused, _ = gpu_checks(tmp_path, {"gpu-b": (125, said), "gpu-c": (2, "")})
    assert code == 2
    assert refused == (
        "node gpu-b: the GPU check itself failed there (exit 125): see the [gpu-b] lines of the job's log\n"
    )
    assert out.splitlines()[-1] == "GPU check REFUSED on node(s) gpu-b gpu-c: see the [node] lines above"


# The image's ssh client: ssh_client_lines run by sh, `docker` a stand-in that answers as the image would.
STAND_IN_DOCKER = """#!/bin/sh
printf '%s\\n' "$@" > "$ANSWERS/docker.argv"
cat "$ANSWERS/docker.out"; exit "$(cat "$ANSWERS/docker.rc")"
"""


def ssh_client_check(tmp_path, rc: int, said: str):
    """(exit code, stdout, refused file or None, the docker argv) of ssh_client_lines with that docker
    answer."""
    from provisioning.cluster.image import ssh_client_lines

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(STAND_IN_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    (tmp_path / "docker.rc").write_text(str(rc))
    (tmp_path / "docker.out").write_text(said)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ANSWERS": str(tmp_path)}
    done = subprocess.run(
        ["sh", "-c", ssh_client_lines(IMAGE, "gpu-a", str(tmp_path))],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    refused = tmp_path / "refused"
    argv = (tmp_path / "docker.argv").read_text().splitlines()
    return done.returncode, done.stdout, refused.read_text() if refused.exists() else None, argv


def test_an_image_without_an_ssh_client_is_refused_before_the_run(tmp_path):
    """The rehearsal's CPU image (docker/cpu.Dockerfile) has no ssh: run across nodes, the suite in it could
    start no other node's command, and every multi-node stage failed in turn (seen on the two-namespace
    cluster)."""
    code, out, refused, argv = ssh_client_check(tmp_path, 0, "cardtime-no-ssh-client\n")
    line = (
        f"node gpu-a: image {IMAGE} has no ssh client, which the suite in it needs to start the other nodes' "
        "commands: install openssh-client in the image (the project's Dockerfile does), or use RUNTIME=host"
    )
    assert code == 2 and refused == line + "\n" and out.splitlines()[-1] == f"REFUSED: {line}"
    assert argv == [
        "run",
        "--rm",
        "--network=host",
        "--entrypoint",
        "sh",
        IMAGE,
        "-c",
        "command -v ssh || echo cardtime-no-ssh-client",
    ]


def test_an_image_with_ssh_or_one_that_does_not_start_goes_on_to_the_run(tmp_path):
    """Only an image that answers "none" is refused: one that does not start is left to the run, which says
    why."""
    for i, (rc, said) in enumerate(
        [(0, "/usr/bin/ssh\n"), (125, "docker: Error response from daemon: ...\n")]
    ):
        (tmp_path / str(i)).mkdir()
        code, _, refused, argv = ssh_client_check(tmp_path / str(i), rc, said)
        assert (code, refused) == (0, None) and argv[:2] == ["run", "--rm"], (rc, said)


def test_an_ordinary_login_is_mapped_into_the_image_on_every_node():
    """ubuntu (uid 1000) on every node: the suite's container and the other nodes' run as 1000:1000, with the
    host's account files read-only (ssh in the image knows the uid and finds its ~/.ssh) and HOME the login's
    home."""
    argv = first_node_run_argv(
        IMAGE,
        ["run"],
        job_id="j1",
        runs_dir="/home/ubuntu/cardtime/runs",
        job_dir="/home/ubuntu/cardtime/jobs/j1",
        home="/home/ubuntu",
        ssh_config="",
        gpus=False,
        user="1000:1000",
    )
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert mounts[-3:] == [
        "/home/ubuntu/.ssh:/home/ubuntu/.ssh:rw",
        "/etc/passwd:/etc/passwd:ro",
        "/etc/group:/etc/group:ro",
    ]
    env = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-e")
    assert env["HOME"] == "/home/ubuntu" and env["XDG_CACHE_HOME"].startswith("/tmp")
    prefix = container_prefix({NODE_CONTAINER_ENV: env[NODE_CONTAINER_ENV]})
    assert prefix[prefix.index("--user") + 1] == "1000:1000" and "/etc/passwd:/etc/passwd:ro" in prefix
    assert "HOME=/home/ubuntu" in prefix
    # root: nothing mapped, the image's own accounts
    as_root = first_node_run_argv(
        IMAGE,
        ["run"],
        job_id="j1",
        runs_dir="/r",
        job_dir="/j",
        home="/root",
        ssh_config="",
        gpus=False,
        user=None,
    )
    assert "--user" not in as_root and not [a for a in as_root if a.startswith("/etc/passwd")]
