"""`make slurm SLURM_HOST=…` from the laptop against a real Slurm: slurmctld in this (the login) namespace, a
slurmd in each node's namespace (tests/e2e/slurm_cluster.py), the login node reached through the loopback sshd
the other remote tests use (tests/e2e/remote_loopback.py), its slurm.conf named by SLURM_CONF= (a real
cluster's is at /etc/slurm/slurm.conf, where no option is needed).

One story, one two-node job (~90 s on 2 cores, most of it the job's own topology, bandwidth, dp, zero and
fault stages): the refusals first, each one line before anything is shipped or submitted (a partition Slurm
does not know, more nodes than the partition has; an unreachable login node: tests/unit/test_slurm_submit.py),
then two short jobs the batch host refuses in one line before any stage (a node address nothing answers at;
node-a's firewall closed to the rendezvous port); then `make slurm` with NODE_ADDRS= naming second addresses
the nodes' names do not resolve to — the laptop's HEAD shipped to the shared folder, the venv there (the
cached one), the sbatch script written and submitted on the login node — SIGKILLed as soon as the job is
submitted; `make slurm FETCH=<job id>` then finds the job by its id, follows it (its state, its output's
lines), fetches its run directory (both nodes' raw output: the suite on the batch host took the allocation's
nodes and started each launch as one srun across them) into the laptop's runs/ with the job's output beside
it, and renders the report; last, the login node's own `make slurm FETCH=` (python -m suite slurm --attach)
ends in the report there. The job's fault stage is the node-loss drill: node-b's torchrun agent SIGKILLed
mid-step under one elastic srun (--kill-on-bad-exit=0), node-a restarting alone, its verdicts in the fetched
report; at one process per node the single-node drills (no survivor beside the faulted rank) skip, saying so.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.remote_loopback import (
    WORKTREE,
    clean_env,
    host_venv_cache,
    make_repo,
    sshd_available,
    start_sshd,
)
from tests.e2e.two_nodes import IFNAME, netns_missing

pytestmark = [pytest.mark.e2e, pytest.mark.needs("netns", "slurm", "sshd"), pytest.mark.timeout(900)]
VENV = WORKTREE / ".venv"


def make_slurm_argv(laptop: Path, sshd, base: Path, conf: Path, **extra: str) -> list[str]:
    """`make slurm SLURM_HOST=…` as a user types it on the laptop (this checkout's venv, never rebuilt)."""
    settings = {
        "SLURM_HOST": sshd.host,
        "KEY": str(sshd.client_key),
        "KNOWN_HOSTS": str(base / "known_hosts"),
        "ACCEPT_NEW_HOST": "1",
        "REMOTE_DIR": str(base / "shared" / "cardtime"),
        "SLURM_CONF": str(conf),
        "PARTITION": "debug",
        "NODES": "2",
        "GPUS_PER_NODE": "1",
        "PROFILE": "gloo-cpu",
        "STAGES": "topology,bandwidth",
        "SOCKET_IFNAME": IFNAME,
        **extra,
    }
    return [
        "make",
        "--no-print-directory",
        "-C",
        str(laptop),
        "slurm",
        f"VENV={VENV}",
        "-o",
        f"{VENV}/.installed",
        *(f"{k}={v}" for k, v in settings.items()),
    ]


def make_slurm(*args, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        make_slurm_argv(*args, **extra),
        env=clean_env(PYTHONPATH=str(WORKTREE)),
        capture_output=True,
        text=True,
        timeout=600,
    )


def submit_then_drop_the_laptop(argv: list[str], log: Path, timeout_s: float = 180) -> str:
    """make slurm started and SIGKILLed (its whole process group) as soon as it says the job is submitted: the
    laptop gone mid-run. The job id it printed."""
    with open(log, "w") as out:
        laptop = subprocess.Popen(
            argv,
            env=clean_env(PYTHONPATH=str(WORKTREE)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout_s
    try:
        while "submitted job " not in log.read_text():
            assert laptop.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(laptop.pid, signal.SIGKILL)
        laptop.wait()
    return job_id(log.read_text())


def test_make_slurm_from_the_laptop_submits_follows_fetches_and_reports(tmp_path):
    from tests.e2e.slurm_cluster import slurm_cluster, slurm_missing

    for missing in (netns_missing(), slurm_missing(), None if sshd_available() else "no openssh-server"):
        if missing:
            pytest.skip(f"no Slurm cluster behind a login node here: {missing}")
    laptop = make_repo(tmp_path / "laptop")
    shared = tmp_path / "shared" / "cardtime"
    shared.mkdir(parents=True)
    # the login node keeps its venvs across runs; so do the tests
    (shared / "venvs").symlink_to(host_venv_cache())
    sshd = start_sshd(tmp_path / "sshd")
    try:
        with slurm_cluster(tmp_path / "slurm") as (cluster, env):
            conf = Path(env["SLURM_CONF"])
            unknown = make_slurm(laptop, sshd, tmp_path, conf, PARTITION="nosuch")
            too_many = make_slurm(laptop, sshd, tmp_path, conf, NODES="3")
            for done, says in (
                (unknown, "PARTITION=nosuch is unknown to Slurm"),
                (too_many, "NODES=3 but PARTITION=debug has 2 node(s) (node-a, node-b)"),
            ):
                refusals = [line for line in done.stderr.splitlines() if "REFUSED" in line]
                assert done.returncode == 2 and len(refusals) == 1 and says in refusals[0], done.stderr[
                    -3000:
                ]
                assert "── code" not in done.stderr  # nothing shipped
            assert not (shared / "code").exists() and not list(shared.glob("runs/*.sbatch"))
            # the node addresses the run is told: not what the names resolve to
            second = second_addresses(cluster)
            wrong, closed = network_refusals(cluster, env, second, tmp_path / "refusals")
            started = time.monotonic()
            first = tmp_path / "first-make-slurm.log"
            nccl_env = tmp_path / "nccl.env"  # NCCL_ENV=: harmless to gloo; the job's run records it
            nccl_env.write_text("NCCL_IB_HCA=mlx5_0,mlx5_3\n")
            job = submit_then_drop_the_laptop(
                make_slurm_argv(
                    laptop,
                    sshd,
                    tmp_path,
                    conf,
                    STAGES=JOB_STAGES,
                    NODE_ADDRS=f"{second}.1,{second}.2",
                    NCCL_ENV=str(nccl_env),
                ),
                first,
            )
            submitted = time.monotonic() - started
            twice = make_slurm(laptop, sshd, tmp_path, conf)  # the same command again while the job is queued
            done = make_slurm(laptop, sshd, tmp_path, conf, PARTITION="", FETCH=job)
            took = time.monotonic() - started
            assert done.returncode == 0, done.stderr[-4000:]
            on_login = login_node_attach(shared, job, env)
    finally:
        sshd.stop()

    assert "── sbatch on debug: 2 node(s) × 1" in first.read_text() and "following job" in first.read_text()
    refusals = [line for line in twice.stderr.splitlines() if "REFUSED" in line]
    assert twice.returncode == 2 and len(refusals) == 1 and f"your cardtime job {job} (" in refusals[0], (
        twice.stderr
    )
    assert f"FETCH={job} follows it" in refusals[0] and len(list(shared.glob("runs/*.sbatch"))) == 1
    log = done.stderr  # FETCH=<job id>: the dropped laptop's job found by its id, followed to its end
    assert (
        "submitted job" not in log
        and f"job {job}: RUNNING on node-" in log
        and f"job {job}: COMPLETED" in log
    ), log
    assert [line for line in log.splitlines() if "  │ summary: " in line]  # the job's output as progress
    run = Path((laptop / "runs" / "LAST").read_text().strip())
    assert run.parent == laptop / "runs" and (run / "report.html").stat().st_size > 10_000
    assert f"report: {run / 'report.html'}" in log and f"run directory: {run}" in log
    output = (run / f"slurm-{job}.out").read_text()  # the job's output, fetched beside its run
    assert "2 nodes × 1 processes" in output, output[-3000:]
    raw = run / "raw" / "bandwidth"
    # the one command; each node's output under %N
    srun = (raw / "torch.srun.log").read_text().splitlines()[0]
    # The endpoint is node-a's second address, which its name does not resolve to: torch's guess by host name
    # would leave the store unhosted; each node's shell filled in is_host and --local-addr (its log's first
    # line).
    assert "srun --nodes=2" in srun and f"--rdzv-endpoint={second}.1:29400" in srun and "--nnodes=2" in srun
    for i, node in enumerate(("node-a", "node-b")):
        own = (raw / node / "torch.torchrun.log").read_text().splitlines()[0]
        assert f"is_host={int(i == 0)}" in own and f"--local-addr={second}.{i + 1} " in own, own
        assert len(list((raw / node).glob("torch.rank*.log"))) == 1
        assert len(list((raw / node).glob("pairs.rank*.log"))) == 1
    verdicts = {v["id"]: v["status"] for v in json.loads((run / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["bandwidth.p2p_pairs"] == "pass" and not [k for k, s in verdicts.items() if s == "fail"]
    # topology's NIC probe through srun: each node's veth (SOCKET_IFNAME), found in its own namespace; slurmd
    # runs with the machine's /sys (MULTINODE.md), so the state comes from netlink and the rate is unknown.
    topo_rows = [
        json.loads(line) for line in (run / "raw" / "topology" / ".stage-rows.jsonl").read_text().splitlines()
    ]
    assert {r["case"]: (r["value"], r["text"]) for r in topo_rows if r["metric"] == "nic_rate"} == {
        f"node-{n}:{IFNAME}": (None, "up (no /sys of this namespace: rate unknown)") for n in "ab"
    }
    assert verdicts["topology.nics"] == "pass" and (run / "raw" / "topology" / "nics.log.srun.log").exists()
    record = json.loads((run / "remote.json").read_text())
    assert (
        record["job"]["slurm_job"] == job and record["partition"] == "debug" and record["run_exit_code"] == 0
    )
    head = subprocess.run(
        ["git", "-C", str(laptop), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    # Everything ran from the shared folder: the shipped checkout at the laptop's commit, the run written
    # beside it.
    assert json.loads((run / "manifest.json").read_text())["git"]["commit"] == head
    assert record["remote_run_dir"].startswith(str(shared / "runs") + "/")
    assert record["work_dir"] == str(shared / "code" / head)
    # make slurm on the login node (here: its --attach, as FETCH= there runs it) ends in the report there too.
    login_run = Path(record["remote_run_dir"])
    assert on_login.returncode == 0 and f"report: {login_run / 'report.html'}" in on_login.stderr, (
        on_login.stderr
    )
    assert (login_run / "report.html").stat().st_size > 10_000
    assert (shared / "runs" / "LAST").read_text().strip() == str(login_run)
    # dp and zero across the two nodes, every stage of the job complete and each node's output fetched
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["env_file"]["vars"] == {"NCCL_IB_HCA": "mlx5_0,mlx5_3"}  # NCCL_ENV= through sbatch
    assert {s: manifest["stages"][s]["status"] for s in JOB_STAGES.split(",")} == dict.fromkeys(
        JOB_STAGES.split(","), "complete"
    )
    for stage in ("dp", "zero"):
        for node in ("node-a", "node-b"):
            assert list((run / "raw" / stage / node).glob("*.log")), (stage, node)
    assert verdicts["dp.golden.world2"] == "pass", verdicts
    assert_network_refused(wrong, closed, second)
    print(
        f"make slurm SLURM_HOST=…: submitted after {submitted:.1f} s, fetched and reported after {took:.1f} s"
    )
    assert_node_loss_survived(run, verdicts)


JOB_STAGES = "topology,bandwidth,dp,zero,fault"
"""The job's stages: the rehearsal profile's multi-node ones, fault for its node-loss drill (one process per
node: the single-node drills skip at once)."""


def assert_node_loss_survived(run: Path, verdicts: dict[str, str]) -> None:
    """The job's fault stage: node-b's torchrun agent SIGKILLed mid-step did not end node-a's task under the
    elastic srun (--kill-on-bad-exit=0); node-a restarted alone and resumed. Its verdicts are the fetched
    report's."""
    raw = run / "raw" / "fault"
    srun = next((raw / "node_loss").glob("*srun.log")).read_text().splitlines()[0]
    assert "--kill-on-bad-exit=0" in srun and "--nnodes=1:2" in srun, srun
    got = {
        r["metric"]: r
        for r in map(json.loads, (raw / ".stage-rows.jsonl").read_text().splitlines())
        if r["case"] == "node_loss"
    }
    assert got["lost_node"]["text"] == "node-b" and got["world_before"]["value"] == 2, got
    assert got["world_after"]["value"] == 1 and got["resumed_step"]["value"] == 4, got
    assert {k: s for k, s in verdicts.items() if k.startswith("fault.node_loss.")} == {
        "fault.node_loss.detect": "pass",
        "fault.node_loss.resume": "pass",
        "fault.node_loss.loss": "pass",
    }, verdicts
    single = {
        k: s for k, s in verdicts.items() if k.startswith("fault.") and not k.startswith("fault.node_loss.")
    }
    assert single == {
        f"fault.{check}.{s}": "skip"
        for s in ("crash", "hang", "exception")
        for check in ("detect", "resume", "loss", "forensics")
    }, single
    assert "node_loss.detect" in (run / "report.html").read_text()  # the fetched report shows the drill


def login_node_attach(shared: Path, job: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`python -m suite slurm --attach JOB` in the shipped checkout with the login node's venv, as `make slurm
    FETCH=` on the login node runs it: the job followed there (already over) and its run reported where it
    lies."""
    code = next((shared / "code").iterdir())
    script = next((shared / "runs").glob("cardtime-*.sbatch")).read_text()  # the venv the job ran with
    venv_python = next(line for line in script.splitlines() if " -m suite run " in line).split(
        " -m suite run "
    )[0]
    venv_python = venv_python.split()[-1]  # the run line may begin with the GPU check's guard
    assert venv_python.startswith(str(shared / "venvs") + "/")
    return subprocess.run(
        [venv_python, "-m", "suite", "slurm", "--attach", job, "--out", str(shared / "runs")],
        cwd=code,
        env={**clean_env(PYTHONPATH=str(code)), "SLURM_CONF": env["SLURM_CONF"]},
        capture_output=True,
        text=True,
        timeout=300,
    )


def second_addresses(cluster) -> str:
    """A second address on each node's interface (<second>.1 on node-a, .2 on node-b), in no /etc/hosts: the
    secondary NIC or NAT'd address a rented node's host name does not resolve to. Gone with the namespaces."""
    second = f"10.{180 + os.getpid() % 20}.{os.getpid() % 250}"
    for i, ns in enumerate(cluster.namespaces.values(), 1):
        subprocess.run(["ip", "-n", ns, "addr", "add", f"{second}.{i}/24", "dev", IFNAME], check=True)
    return second


def suite_slurm_on_login(env: dict[str, str], out: Path, node_addrs: str) -> subprocess.CompletedProcess:
    """make slurm on the login node (`python -m suite slurm --submit`): the job written, submitted,
    followed."""
    argv = [
        str(VENV / "bin" / "python"),
        "-m",
        "suite",
        "slurm",
        "--partition",
        "debug",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--profile",
        "gloo-cpu",
        "--stages",
        "topology",
        "--socket-ifname",
        IFNAME,
        "--node-addrs",
        node_addrs,
        "--out",
        str(out),
        "--submit",
    ]
    return subprocess.run(
        argv,
        cwd=WORKTREE,
        env={**env, "PYTHONPATH": str(WORKTREE)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def network_refusals(cluster, env: dict[str, str], second: str, out: Path):
    """Two jobs refused before any stage: a node address nothing answers at, then the right one with node-a's
    firewall (nftables, in its namespace) dropping the rendezvous port."""
    from tests.e2e.hostile_lab import close_port, reopen_port

    wrong = suite_slurm_on_login(env, out / "wrong", f"{second}.9,{second}.2")
    ns = cluster.namespaces["node-a"]
    rule = close_port(ns, 29400)
    try:
        closed = suite_slurm_on_login(env, out / "closed", f"{second}.1,{second}.2")
    finally:
        reopen_port(ns, rule)
    return wrong, closed


def assert_network_refused(
    wrong: subprocess.CompletedProcess, closed: subprocess.CompletedProcess, second: str
):
    for done, addr, why in ((wrong, f"{second}.9", ""), (closed, f"{second}.1", "timed out")):
        errors = [line for line in done.stderr.splitlines() if "  │ error: " in line]
        assert done.returncode == 2 and len(errors) == 1, done.stderr[-3000:]
        assert f"node node-b cannot connect to node node-a at {addr}:29400, the rendezvous port" in errors[0]
        assert why in errors[0] and "open TCP 29400" in errors[0] and "NODE_ADDRS=" in errors[0], errors[0]
        # no stage
        assert "without a run directory" in done.stderr and "  │ [ 1/1] topology" not in done.stderr


def job_id(log: str) -> str:
    words = [
        line.split("submitted job ", 1)[1].split(";")[0]
        for line in log.splitlines()
        if "submitted job " in line
    ]
    assert len(words) == 1, log[-3000:]
    return words[0]
