"""By hand, not in `make test` (minutes): the suite's own CPU image across both nodes' engines, stages run for
real.

    PYTHONPATH=$PWD .venv/bin/python -m tests.e2e.two_nodes_docker_run [FOLDER]

`make remote HOSTS=node-a,node-b RUNTIME=docker PROFILE=gloo-cpu STAGES=topology,bandwidth` on the
two-namespace
cluster with a dockerd per node (tests/e2e/two_nodes.py, docker=True): the image found on node-a, carried to
node-b
by the job's `docker save | ssh node-b docker load`, both IDs compared, the suite in the image on node-a,
node-b's
torchrun started by it over ssh as `docker run` of the same image on node-b's engine, gloo between the two
containers (each in its node's namespace: host network), the run fetched and reported. Exits 0 when the run
directory holds what it must (asserted below), 1 otherwise.

The image: docker/cpu.Dockerfile as tests/e2e/test_docker_image.py builds it (cardtime:cpu-test on this
machine's
default engine, started here if none answers), plus openssh-client, which the first node's suite needs to
reach
the others (the CUDA image, the one `make remote` builds, has it; the CPU image is the rehearsal's and has
not),
installed from Debian's mirror over the host's network; placed on node-a under cardtime:<commit>, as a
previous
`make remote` leaves it. Costs seen here (2 cores, load 3.5–5, December 2026, the engines on a tmpfs): the
image
1.9 GB; the default engine's build (cached) and the ssh layer 30–52 s; `docker save | docker load` into
node-a's
engine 48–65 s; the job's carry to node-b 58–62 s (85 s with the engines on disk); the stages 22–35 s; the
whole
`make remote` 109–123 s; 250 s in all: too slow for `make test` (its two-node docker tests use a 120 MB
image).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.e2e.docker_engine import CPU_TEST_IMAGE, build_cpu_test_image, start_engine, stop_engine
from tests.e2e.remote_loopback import WORKTREE, clean_env, make_repo
from tests.e2e.two_nodes import IFNAME, docker_missing, netns_missing, two_node_cluster

CPU_IMAGE = CPU_TEST_IMAGE
WITH_SSH = "cardtime:cpu-test-ssh"


def image_with_ssh() -> None:
    """cardtime:cpu-test built on the default engine (seconds when its layers are cached), plus
    openssh-client."""
    from provisioning.runtime.engine import connect

    client = connect()
    build_cpu_test_image(client)
    dockerfile = (
        f"FROM {CPU_IMAGE}\nRUN apt-get update && apt-get install -y --no-install-recommends "
        "openssh-client && rm -rf /var/lib/apt/lists/*\n"
    )
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=WITH_SSH, network_mode="host", rm=True)


def check(run: Path) -> list[str]:
    """What the fetched run directory lacks; [] when both nodes' containers ran their part."""
    problems = []
    manifest = json.loads((run / "manifest.json").read_text())
    for stage in ("topology", "bandwidth"):
        if manifest["stages"][stage]["status"] != "complete":
            problems.append(f"{stage}: {manifest['stages'][stage]}")
    first = (run / "raw" / "bandwidth" / "node-b" / "torch.torchrun.log").read_text().splitlines()[0]
    if not (first.startswith("$ ssh ") and "exec docker run --rm" in first and "--network=host" in first):
        problems.append(f"node-b's torchrun was not `docker run` over ssh: {first[:300]}")
    rows = [
        json.loads(line)
        for line in (run / "raw" / "bandwidth" / ".stage-rows.jsonl").read_text().splitlines()
    ]
    sweep = [r for r in rows if r["source"] == "torch" and r["metric"] == "wrong"]
    if not (len(sweep) >= 6 and {r["world"] for r in sweep} == {2} and all(r["value"] == 0 for r in sweep)):
        problems.append(f"the torch sweep across the two containers: {len(sweep)} checks, {sweep[:3]}")
    pairs = {(r["case"], r["metric"]): r["value"] for r in rows if r["source"] == "p2p"}
    for case in ("node-a→node-b", "node-b→node-a"):
        if pairs.get((case, "wrong")) != 0 or not pairs.get((case, "busbw"), 0) > 0:
            problems.append(f"pair {case}: {pairs}")
    topo = [
        json.loads(line) for line in (run / "raw" / "topology" / ".stage-rows.jsonl").read_text().splitlines()
    ]
    nics = {r["case"]: r["text"] for r in topo if r["metric"] == "nic_rate"}
    if nics != {f"node-a:{IFNAME}": "up", f"node-b:{IFNAME}": "up"}:  # each container saw its own node's NIC
        problems.append(f"NICs per node: {nics}")
    verdicts = json.loads((run / "verdicts.json").read_text())["verdicts"]
    problems += [f"verdict {v['id']}: fail" for v in verdicts if v["status"] == "fail"]
    return problems


def main(folder: Path) -> int:
    why = netns_missing() or docker_missing()
    if why:
        print(f"no two-node cluster with engines here: {why}", file=sys.stderr)
        return 2
    timings: dict[str, float] = {}
    started = time.monotonic()
    default = start_engine(folder)
    try:
        image_with_ssh()
        timings["image on the default engine"] = time.monotonic() - started
        laptop = make_repo(folder / "laptop")
        commit = subprocess.run(
            ["git", "-C", str(laptop), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        with two_node_cluster(folder / "cluster", docker=True) as cluster:
            t = time.monotonic()
            load = f"docker save {WITH_SSH} | DOCKER_HOST={cluster.engines['node-a'].host} docker load"
            subprocess.run(["sh", "-c", load], check=True, capture_output=True, timeout=900)
            timings["docker save | load into node-a"] = time.monotonic() - t
            cluster.docker("node-a", "tag", WITH_SSH, f"cardtime:{commit[:12]}")
            t = time.monotonic()
            done = subprocess.run(
                [
                    str(WORKTREE / ".venv" / "bin" / "python"),
                    "-m",
                    "provisioning",
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
                    "--profile",
                    "gloo-cpu",
                    "--stages",
                    "topology,bandwidth",
                    "--socket-ifname",
                    IFNAME,
                    "--nproc",
                    "1",
                    "--remote-dir",
                    str(folder / "remote"),
                    "--runs-dir",
                    str(folder / "fetched"),
                    "--detach",
                    "setsid",
                ],
                cwd=laptop,
                env=clean_env(PYTHONPATH=str(WORKTREE)),
                capture_output=True,
                text=True,
                timeout=1200,
            )
            timings["make remote"] = time.monotonic() - t
            t = time.monotonic()
        timings["teardown"] = time.monotonic() - t
    finally:
        # the layers stay cached; the tag goes
        subprocess.run(["docker", "rmi", WITH_SSH], capture_output=True)
        stop_engine(default)
    print(done.stderr[-6000:])
    print({k: round(v, 1) for k, v in timings.items()})
    if done.returncode != 0:
        print(f"make remote exited {done.returncode}", file=sys.stderr)
        return 1
    log = next((folder / "remote" / "jobs").glob("*/log")).read_text()
    problems = (
        [] if "── carrying " in log and "[node-b] Loaded image" in log else ["no carry in the job's log"]
    )
    problems += check(Path((folder / "fetched" / "LAST").read_text().strip()))
    for line in problems:
        print(f"MISSING: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(WORKTREE))
    target = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(tempfile.mkdtemp(prefix="cardtime-two-nodes-docker-"))
    )
    target.mkdir(parents=True, exist_ok=True)
    sys.exit(main(target))
