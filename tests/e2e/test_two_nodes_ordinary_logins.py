"""`make remote HOSTS=ubuntu@node-a,ubuntu@node-b` in the hostile lab (tests/e2e/hostile_lab.py) as two rented
VMs have it: NAT'd public addresses, ssh alone open from outside, host names on 127.0.1.1, an ordinary login
without root or sudo (hostile_lab.add_login), and separate disks: the user's home, where the remote folder
lies, is on each node's own disk. One launch of the rehearsal profile's multi-node stages (bandwidth, dp,
zero, fault with its node-loss drill), RUNTIME=host with the venv made by the job as that user, then every
assert on what came back:

  * the run finished and was fetched with its report; no verdict failed, the node-loss drill's among them:
    node-b lost mid-step, node-a restarted alone and resumed from the checkpoint on its own disk;
  * each node's raw output written on its own disk as the user, node-b's copied back to node-a's and fetched;
  * the checkpoints deleted after the drill, listed in checkpoints.txt.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.e2e.hostile_lab import LOGIN_UID
from tests.e2e.remote_loopback import WORKTREE, clean_env, host_venv_cache, make_repo
from tests.e2e.test_two_nodes_hostile import can_make_namespaces  # noqa: F401 (the lab's fixture)
from tests.e2e.two_nodes import IFNAME, NODES, _alive, two_node_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.needs("netns")]
LOGIN = "ubuntu"
STAGES = "bandwidth,dp,zero,fault"
# The user's venvs, kept across runs as the remote tests keep root's (the user cannot run root's: its Python
# may lie under /root, which only root enters).
USER_VENV_CACHE = Path(
    os.environ.get("CARDTIME_E2E_USER_VENV_CACHE", f"/tmp/cardtime-e2e-host-venvs-{LOGIN_UID}")
)
SYSTEM_PYTHON = Path("/usr/bin/python3.11")


def user_venv(laptop: Path) -> None:
    """The user's venv, ready before the run: the lab's nodes reach no package index, so it is root's (made in
    the root namespace as the remote tests make it: host_venv_cache) re-homed on the Python every user runs,
    its packages hard-linked (the same cp311 wheels). The job then reuses it (hostruntime.ENSURE_VENV's ready
    mark)."""
    from provisioning.runtime import hostruntime

    name = f"{hostruntime.pyproject_key(laptop, 'HEAD')}-py3.11"
    mine = USER_VENV_CACHE / name
    if (mine / ".cardtime-ready").exists():
        return
    theirs = host_venv_cache() / name
    if not (theirs / ".cardtime-ready").exists():
        subprocess.run(
            ["sh", "-c", hostruntime.setup_script(str(theirs), str(laptop))],
            check=True,
            capture_output=True,
            timeout=1200,
        )
    shutil.rmtree(mine, ignore_errors=True)
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(mine)], check=True)
    site = "lib/python3.11/site-packages"
    subprocess.run(["cp", "-al", f"{theirs / site}/.", str(mine / site)], check=True)
    for path in (mine, *mine.rglob("*")):
        if not path.is_symlink() and path.stat().st_nlink == 1 or path.is_dir():
            os.lchown(path, LOGIN_UID, LOGIN_UID)
    (mine / ".cardtime-ready").touch()


@pytest.fixture(scope="module")
def lab_root(can_make_namespaces):
    """A folder every user can walk into (pytest's own are root's alone), removed afterwards."""
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"{SYSTEM_PYTHON} is not installed: the lab's user needs a Python ≥ 3.11 outside /root")
    root = Path(tempfile.mkdtemp(prefix="cardtime-lab-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def ordinary_run(lab_root):
    """The lab, one `make remote HOSTS=ubuntu@…` from the laptop (the root namespace), what the test reads
    after."""
    home = lab_root / "home"
    with two_node_cluster(lab_root / "cluster", hostile=True, private=home, login=LOGIN) as cluster:
        USER_VENV_CACHE.mkdir(parents=True, exist_ok=True)
        os.chown(USER_VENV_CACHE, LOGIN_UID, LOGIN_UID)
        laptop = make_repo(lab_root / "laptop")
        user_venv(laptop)
        for node in NODES:  # each node's remote folder, on its disk, keeps its venvs in the one cache
            remote = cluster.disk(node) / "cardtime"
            remote.mkdir()
            (remote / "venvs").symlink_to(USER_VENV_CACHE)
            for path in (remote, remote / "venvs"):
                os.lchown(path, LOGIN_UID, LOGIN_UID)
        who = subprocess.run(
            [
                "ssh",
                "-F",
                str(cluster.ssh_config),
                f"{LOGIN}@node-b",
                "id -u; id -Gn; sudo -n true 2>/dev/null && echo sudo || echo no-sudo; echo ~",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        started = time.monotonic()
        run = subprocess.run(
            [
                str(WORKTREE / ".venv" / "bin" / "python"),
                "-m",
                "provisioning",
                "remote",
                "--host",
                "",
                "--hosts",
                f"{LOGIN}@node-a,{LOGIN}@node-b",
                "--ssh-config",
                str(cluster.ssh_config),
                "--profile",
                "gloo-cpu",
                "--runtime",
                "host",
                "--remote-dir",
                str(home / "cardtime"),
                "--runs-dir",
                str(lab_root / "fetched"),
                "--detach",
                "setsid",
                "--stages",
                STAGES,
                "--socket-ifname",
                IFNAME,
                "--nproc",
                "2",
            ],
            cwd=laptop,
            env=clean_env(PYTHONPATH=str(WORKTREE)),
            capture_output=True,
            text=True,
            timeout=1500,
        )
        wall_s = time.monotonic() - started
        print(f"make remote HOSTS={LOGIN}@node-a,{LOGIN}@node-b --stages {STAGES}: {wall_s:.0f} s")
        said = {
            "run": run,
            "who": who,
            "sessions": cluster.pids(),
            "namespaces": list(cluster.namespaces.values()),
            "disks": {n: cluster.disk(n) for n in NODES},
            "lab": lab_root,
            "addrs": [cluster.address(n) for n in NODES],
        }
    said["links_after"] = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    # after the lab's teardown: the disks' folders stay (they are plain folders beneath the mounts)
    yield said


def fetched_run(ordinary_run) -> Path:
    run = ordinary_run["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    return Path((ordinary_run["lab"] / "fetched" / "LAST").read_text().strip())


def test_the_login_is_ordinary(ordinary_run):
    uid, groups, sudo, home = ordinary_run["who"].stdout.split("\n")[:4]
    assert int(uid) == LOGIN_UID and sudo == "no-sudo", ordinary_run["who"]
    assert home == str(ordinary_run["lab"] / "home")
    if "docker:" in Path("/etc/group").read_text():
        assert "docker" in groups.split()


def test_multi_node_stages_run_to_a_fetched_report(ordinary_run):
    run = fetched_run(ordinary_run)
    assert (run / "report.html").is_file() and "node-b" in (run / "report.html").read_text()
    manifest = json.loads((run / "manifest.json").read_text())
    assert [n.split("@")[-1] for n in manifest["profile"]["nodes"]] == list(NODES)
    assert {s: manifest["stages"][s]["status"] for s in STAGES.split(",")} == dict.fromkeys(
        STAGES.split(","), "complete"
    )
    verdicts = json.loads((run / "verdicts.json").read_text())["verdicts"]
    failed = [v for v in verdicts if v["status"] == "fail"]
    assert not failed, failed
    by_id = {v["id"]: v for v in verdicts}
    assert by_id["fault.node_loss.resume"]["status"] == "pass", by_id["fault.node_loss.resume"]
    assert by_id["fault.node_loss.loss"]["status"] == "pass", by_id["fault.node_loss.loss"]
    # through the NAT and the firewall: the run on node-a found the nodes' private addresses, the fixed port
    assert (
        manifest["profile"]["node_addrs"] == ordinary_run["addrs"]
        and manifest["profile"]["master_port"] == 29400
    )


def test_each_node_wrote_on_its_own_disk_and_node_b_came_back(ordinary_run):
    run = fetched_run(ordinary_run)
    disk_a, disk_b = ordinary_run["disks"]["node-a"], ordinary_run["disks"]["node-b"]
    run_on_b = next((disk_b / "cardtime" / "runs").glob("*"))
    assert not (run_on_b / "manifest.json").exists()  # node-b holds only its own output
    for stage, pattern in (
        ("bandwidth", "*.log"),
        ("dp", "*.log"),
        ("fault/node_loss", "events.rank*.jsonl"),
    ):
        mine = sorted(p.name for p in (run_on_b / "raw" / stage / "node-b").glob(pattern))
        assert mine, (stage, list((run_on_b / "raw").rglob("*"))[:20])
        # copied back to node-a and fetched (beside what node-a itself wrote there: its ssh session's log of
        # node-b)
        fetched = {p.name: p for p in (run / "raw" / stage / "node-b").glob(pattern)}
        assert set(mine) <= set(fetched), (stage, mine, sorted(fetched))
        assert fetched[mine[-1]].read_bytes() == (run_on_b / "raw" / stage / "node-b" / mine[-1]).read_bytes()
        assert (run_on_b / "raw" / stage / "node-b" / mine[0]).stat().st_uid == LOGIN_UID
        assert not (run_on_b / "raw" / stage / "node-a").exists()
    run_on_a = disk_a / "cardtime" / "runs" / run.name
    assert (run_on_a / "manifest.json").stat().st_uid == LOGIN_UID


def test_node_loss_resumed_from_the_survivors_own_disk(ordinary_run):
    run = fetched_run(ordinary_run)
    folder = run / "raw" / "fault" / "node_loss"
    events = [
        json.loads(line)
        for f in folder.glob("*/events.rank*.jsonl")
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    resumed = [e for e in events if e["event"] == "resumed" and e.get("attempt") == 1]
    assert resumed and all(e["step"] > 0 and e["checkpoint"].endswith(".node-a.pt") for e in resumed), resumed
    # node-b's agent killed mid-step: node-a raised, torchrun restarted it without node-b, it resumed and
    # replayed
    rows = [
        json.loads(line)
        for line in (run / "raw" / "fault" / ".stage-rows.jsonl").read_text().splitlines()
        if line.strip()
    ]
    got = {r["metric"]: r for r in rows if r["case"] == "node_loss"}
    assert got["lost_node"]["text"] == "node-b" and got["error"]["text"].startswith("node-a: "), got
    assert 0 < got["world_after"]["value"] < got["world_before"]["value"] and got["resumed_step"]["value"] > 0
    assert 0 <= got["detect_s"]["value"] < got["restart_s"]["value"] < got["resume_s"]["value"]
    assert got["replay_diff"]["value"] <= 1e-5, got["replay_diff"]
    assert not (folder / "ckpt").exists()
    listed = (folder / "checkpoints.txt").read_text().split()
    assert listed and all(name.endswith(".node-a.pt") for name in listed[::2])


def test_nothing_left(ordinary_run):
    assert ordinary_run["sessions"] and not [p for p in ordinary_run["sessions"] if _alive(p)]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not [ns for ns in ordinary_run["namespaces"] if ns in listed]
    # every veth and the bridge gone when the lab's block ended, not later when the kernel gets to the
    # namespaces (the next lab in this worker would find their names taken)
    tag = os.path.commonprefix(ordinary_run["namespaces"])
    assert tag and tag not in ordinary_run["links_after"], ordinary_run["links_after"]
