"""The nodes of a multi-node run and the command lines started on them (suite/cluster/multinode.py,
suite/cluster/mpirun.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from suite.cluster import hostlist
from suite.cluster.mpirun import hostfile_text, mpirun_across_nodes, rsh_agent
from suite.cluster.multinode import (
    Node,
    NodesError,
    forwarded_env,
    parse_nodes,
    read_hostfile,
    remote_shell_command,
    torchrun_node_command,
)


def test_nodes_parse_user_host_port():
    nodes = parse_nodes("root@gpu-a:2222, gpu-b ,ubuntu@10.0.0.3")
    assert nodes == (Node("root", "gpu-a", 2222), Node("", "gpu-b", None), Node("ubuntu", "10.0.0.3", None))
    assert [n.name for n in nodes] == ["gpu-a", "gpu-b", "10.0.0.3"]
    assert nodes[0].ssh_argv("cfg", tty=True) == [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-F",
        "cfg",
        "-p",
        "2222",
        "-tt",
        "root@gpu-a",
    ]


@pytest.mark.parametrize(
    "spec, says",
    [
        ("a,,b", "node 2 of the list is empty"),
        ("root@a,root@a:22", "node a is listed twice (entries 1 and 2)"),
        ("root@a:22x", "port '22x' is not a number"),
        ("root@a:70000", "port '70000' is not a number"),
        ("root@gpu_a!", "'gpu_a!' is not a host name"),
        ("ro ot@a", "user 'ro ot' is not a user name"),
    ],
)
def test_bad_nodes_are_refused_naming_the_entry(spec, says):
    with pytest.raises(NodesError) as e:
        parse_nodes(spec)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_hostfile_comments_slots_and_typos():
    text = "# the cluster\nroot@gpu-a slots=8\n\nroot@gpu-b:2222   # second\n"
    assert read_hostfile(text) == ("root@gpu-a", "root@gpu-b:2222")
    with pytest.raises(NodesError, match=r"hosts line 2: 'slot=8' after 'root@gpu-b'"):
        read_hostfile("root@gpu-a\nroot@gpu-b slot=8\n", "hosts")
    with pytest.raises(NodesError, match=r"hosts line 1: node 'root@gpu-a:': port '' is not a number"):
        read_hostfile("root@gpu-a:\n", "hosts")
    with pytest.raises(NodesError, match="names no node"):
        read_hostfile("# nothing\n\n")
    with pytest.raises(NodesError, match="listed twice"):
        read_hostfile("gpu-a\ngpu-a slots=4\n")


def test_slurm_nodelist_expansion():
    assert hostlist.expand("gpu-[01-03,07],login1") == ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "login1"]
    assert hostlist.expand("node-a,node-b") == ["node-a", "node-b"]
    assert hostlist.expand("n[8-10]") == ["n8", "n9", "n10"]


def test_torchrun_node_command_rendezvous_at_the_first_node():
    argv = torchrun_node_command(
        "py",
        "suite.stages.bandwidth.node_pairs_worker",
        ["--iters", "5"],
        nproc=8,
        nnodes=2,
        endpoint="gpu-a:29400",
        rdzv_id="r1",
        join_timeout_s=90,
    )
    assert argv[:3] == ["py", "-m", "torch.distributed.run"]
    assert {
        "--nnodes=2",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=gpu-a:29400",
        "--rdzv-id=r1",
        "--rdzv-conf=join_timeout=90",
        "--max-restarts=0",
    } <= set(argv)
    assert argv[-4:] == ["-m", "suite.stages.bandwidth.node_pairs_worker", "--iters", "5"]


def test_remote_shell_command_runs_in_the_checkout_with_exactly_the_environment(tmp_path):
    """Run for real by sh, as sshd would: quoting survives a value with spaces, quotes and $."""
    env = forwarded_env(
        {
            "NCCL_IB_HCA": "mlx5_0 'x' $HOME",
            "CARDTIME_RAW_DIR": "/r",
            "AWS_SECRET_ACCESS_KEY": "no",
            "HOME": "/root",
        }
    )
    assert set(env) == {"NCCL_IB_HCA", "CARDTIME_RAW_DIR"}
    probe = [
        sys.executable,
        "-c",
        "import os; print(os.getcwd()); print(os.environ['NCCL_IB_HCA']); "
        "print(os.environ.get('AWS_SECRET_ACCESS_KEY'))",
    ]
    done = subprocess.run(
        ["sh", "-c", remote_shell_command(str(tmp_path), env, probe)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(tmp_path), "mlx5_0 'x' $HOME", "None"]


def test_mpirun_words_one_process_per_gpu_on_each_node():
    nodes = parse_nodes("root@gpu-a,root@gpu-b")
    assert hostfile_text(nodes, 8) == "gpu-a slots=8\ngpu-b slots=8\n"
    words = mpirun_across_nodes(
        "mpirun", nodes, 8, "hf", env={"NCCL_ALGO": "Ring", "HOME": "/root"}, ssh_config="cfg", ifname="ens5"
    )
    text = " ".join(words)
    assert words[:3] == ["mpirun", "-np", "16"] and "--hostfile hf --map-by ppr:8:node --bind-to none" in text
    assert "-x NCCL_ALGO=Ring" in text and "HOME" not in text
    assert "--mca btl_tcp_if_include ens5 --mca oob_tcp_if_include ens5" in text
    assert words[words.index("plm_rsh_agent") + 1] == "ssh -o BatchMode=yes -F cfg -l root"
    with pytest.raises(NodesError, match="one user and one port"):
        rsh_agent(parse_nodes("root@a,root@b:2222,root@c"))
    assert "--prefix" not in words  # a bare name: no install root to give


def test_mpirun_outside_usr_gives_its_install_root_as_prefix(tmp_path):
    """Open MPI under /opt (AWS's /opt/amazon/openmpi, MLNX OFED's /usr/mpi/gcc/openmpi-4.1.7a1): the other
    nodes' orted is found only with --prefix, their non-interactive ssh having no PATH for it."""
    from suite.cluster.mpirun import install_prefix

    root = tmp_path / "opt" / "amazon" / "openmpi"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "mpirun").write_text("#!/bin/sh\n")
    link = tmp_path / "mpirun"  # found on PATH through a link, as alternatives do
    link.symlink_to(root / "bin" / "mpirun")
    nodes = parse_nodes("root@gpu-a,root@gpu-b")
    words = mpirun_across_nodes(str(link), nodes, 8, "hf")
    assert words[words.index("--prefix") + 1] == str(root)
    assert install_prefix("/usr/bin/mpirun") is None and install_prefix("mpirun") is None
    assert install_prefix("/usr/local/bin/mpirun") is None


def test_nccl_tests_across_nodes_go_through_mpirun_with_a_hostfile(tmp_path, monkeypatch):
    from suite.config import NCCL_GPU
    from suite.stages import _nccl_tests

    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "mpirun").write_text("#!/bin/sh\n")
    (tools / "mpirun").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    two = NCCL_GPU.with_overrides(nodes=("root@gpu-a", "root@gpu-b"), ssh_config="cfg", socket_ifname="ens5")
    words, why = _nccl_tests.launcher(two, {"NCCL_ALGO": "Ring"}, tmp_path / "raw")
    assert why == "" and words[:3] == [str(tools / "mpirun"), "-np", "16"]
    assert (tmp_path / "raw" / "hostfile").read_text() == "gpu-a slots=8\ngpu-b slots=8\n"
    assert {"-x NCCL_ALGO=Ring", "-x NCCL_SOCKET_IFNAME=ens5", "--map-by ppr:8:node"} <= {
        f"{a} {b}" for a, b in zip(words, words[1:])
    }
    assert _nccl_tests.perf_args(two)[_nccl_tests.perf_args(two).index("-g") + 1] == "1"
    assert _nccl_tests.form_label(two).startswith("mpirun -np 16 across 2 nodes")


def test_nccl_tests_across_nodes_dial_the_node_addresses_and_hold_open_mpi_to_them(tmp_path, monkeypatch):
    """The hostfile names the nodes by their node-to-node addresses (as the rendezvous does), not by the names
    the laptop reached; without SOCKET_IFNAME Open MPI's tcp and out-of-band traffic is held to those
    addresses' networks, so a second NIC (a management network, docker0) is never tried."""
    from suite.cluster.mpirun import tcp_include
    from suite.config import NCCL_GPU
    from suite.stages import _nccl_tests

    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "mpirun").write_text("#!/bin/sh\n")
    (tools / "mpirun").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    two = NCCL_GPU.with_overrides(
        nodes=("root@gpu-a.example.com", "root@gpu-b.example.com"), node_addrs=("10.0.0.11", "10.0.0.12")
    )
    words, why = _nccl_tests.launcher(two, {}, tmp_path / "raw")
    assert (
        why == "" and (tmp_path / "raw" / "hostfile").read_text() == "10.0.0.11 slots=8\n10.0.0.12 slots=8\n"
    )
    pairs = {f"{a} {b}" for a, b in zip(words, words[1:])}
    assert {
        "btl self,tcp",
        "btl_tcp_if_include 10.0.0.11/32,10.0.0.12/32",
        "oob_tcp_if_include 10.0.0.11/32,10.0.0.12/32",
    } <= pairs
    words, _ = _nccl_tests.launcher(two.with_overrides(socket_ifname="ens5"), {}, tmp_path / "raw")
    # a named interface wins
    assert "btl_tcp_if_include ens5" in {f"{a} {b}" for a, b in zip(words, words[1:])}
    # a name has no network
    assert tcp_include("", ("gpu-a", "10.0.0.12")) == "" and tcp_include("", ()) == ""
    assert hostfile_text(parse_nodes("a,b"), 2, ("10.0.0.1",)) == "a slots=2\nb slots=2\n"  # not one per node


def test_node_pair_verdicts_name_the_missing_wrong_and_slow_pairs():
    from suite.config import NCCL_GPU
    from suite.results import Row
    from suite.stages.bandwidth import node_pairs as _node_pairs

    three = NCCL_GPU.with_overrides(nodes=("a", "b", "c"))
    expectations = _node_pairs.expect(three)
    assert len(expectations) == 6 and {e.case for e in expectations} >= {"a→b", "c→a"}

    def pair(case, busbw, wrong=0.0):
        return [
            Row(stage="bandwidth", case=case, metric="busbw", value=busbw, unit="GB/s", source="p2p"),
            Row(stage="bandwidth", case=case, metric="wrong", value=wrong, unit="count", source="p2p"),
        ]

    rows = [r for c in ("a→b", "a→c", "b→a", "b→c", "c→a") for r in pair(c, 40.0)] + pair(
        "c→b", 10.0, wrong=3
    )
    gpu = {"profile": {"judge_performance": True}}
    v = {x.id: x for x in _node_pairs.judge(rows, expectations, gpu)}
    assert v["bandwidth.p2p_pairs"].status == "pass"
    assert v["bandwidth.p2p_wrong"].status == "fail" and "c→b: 3" in v["bandwidth.p2p_wrong"].observed
    assert v["bandwidth.p2p_slow_pair"].status == "warn" and v["bandwidth.p2p_slow_pair"].observed.startswith(
        "c→b"
    )
    v = {x.id: x for x in _node_pairs.judge(rows[2:], expectations, {})}
    assert v["bandwidth.p2p_pairs"].status == "fail" and "a→b" in v["bandwidth.p2p_pairs"].observed
    assert v["bandwidth.p2p_slow_pair"].status == "skip"
    assert _node_pairs.judge(rows, _node_pairs.expect(NCCL_GPU), gpu) == []  # one node: no pairs to judge


def test_sbatch_script_allocates_names_the_rendezvous_host_and_runs_the_suite_once(tmp_path):
    from suite.cluster.slurm import sbatch_script

    text = sbatch_script(
        checkout="/shared/cardtime",
        python="/shared/cardtime/.venv/bin/python",
        nodes=2,
        gpus_per_node=8,
        partition="gpu",
        account="proj1",
        stages="topology,bandwidth",
        out="/shared/runs",
        container_image="nvcr.io/x:1",
    )
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert {
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj1",
        "#SBATCH --exclusive",
    } <= set(lines)
    assert not [l for l in lines if l.startswith("#SBATCH --time")]  # not given: the partition's limit
    assert (
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)  # sed reads all: no SIGPIPE '
        "under pipefail" in lines
    )
    assert "--container-image=nvcr.io#x:1" in text  # enroot's form: the registry set off with #
    # The run's directory and exit status beside the job's output, named by its id (suite/cluster/slurm.py's
    # job_files).
    assert lines[-3:] == [
        '[ "$status" -ne 0 ] || /shared/cardtime/.venv/bin/python -m suite run --profile nccl-gpu '
        "--nproc 8 --out /shared/runs --stages topology,bandwidth --record-last "
        '/shared/runs"/slurm-${SLURM_JOB_ID}.last" || status=$?',
        'echo "$status" > /shared/runs"/slurm-${SLURM_JOB_ID}.exit"',
        'exit "$status"',
    ]
    # Before it, on a GPU profile, the GPU check on every node at once, in the image (pyxis: the image's
    # python).
    (check,) = [line for line in lines if line.startswith("srun ")]
    assert (
        "${CARDTIME_SRUN_ARGS:-} sh -c " in check
        and " python /shared/cardtime/provisioning/cuda_check_host.py --gpus 8 --driver '' --min-driver "
        in check
        and check.endswith("|| status=2")
    )
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0  # bash parses it
    cpu = sbatch_script(checkout="/c", python="p", nodes=2, gpus_per_node=1, partition="debug", gpus=False)
    # a cluster without GPU gres refuses the option
    assert "--gpus-per-node" not in cpu and "--nproc 1" in cpu
    assert "cuda_check_host" not in cpu  # and a CPU profile checks no GPU
    with pytest.raises(ValueError, match="at least 1"):
        sbatch_script(checkout="/c", python="p", nodes=0, gpus_per_node=8, partition="gpu")


def test_the_batch_scripts_gpu_check_ends_the_job_before_the_run_naming_the_node(tmp_path):
    """The script run for real by bash up to the suite: a stand-in srun runs the check once per node
    (SLURMD_NODENAME set), with this machine's CPU torch, which the check refuses: exit 2 in the exit file, no
    suite run started."""
    from pathlib import Path

    from suite.cluster.slurm import sbatch_script

    repo = Path(__file__).resolve().parents[2]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(
        '#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; done\n'
        'for n in node-a node-b; do SLURMD_NODENAME=$n "$@" || rc=$?; done\nexit ${rc:-0}\n'
    )
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho node-a\n")
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    marker = tmp_path / "suite-ran"
    text = sbatch_script(
        checkout=str(repo),
        python=sys.executable,
        nodes=2,
        gpus_per_node=8,
        partition="gpu",
        out=str(tmp_path / "runs"),
    )
    text = text.replace(f"{sys.executable} -m suite run", f"touch {marker}; true")  # the suite: a trace only
    (tmp_path / "runs").mkdir()
    (tmp_path / "job.sbatch").write_text(text)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "node-[a-b]",
    }
    done = subprocess.run(
        ["bash", str(tmp_path / "job.sbatch")], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and not marker.exists(), done.stdout + done.stderr
    assert (tmp_path / "runs" / "slurm-7.exit").read_text() == "2\n"
    refusals = [line for line in done.stdout.splitlines() if line.startswith("cardtime GPU check REFUSED: ")]
    assert (
        len(refusals) == 2 and "in node node-a's python (" in refusals[0] and "is a CPU build" in refusals[0]
    )
    assert "in node node-b's python (" in refusals[1]
    assert "the GPU check REFUSED on a node (its line above): no stage ran" in done.stdout


def test_srun_launch_runs_each_node_in_its_own_raw_folder(tmp_path):
    """The per-node wrapper srun runs, executed for real by sh as one node would (SLURMD_NODENAME set)."""
    from suite.cluster.slurm import srun_launch_command

    argv = srun_launch_command(
        2, str(tmp_path), "torch.torchrun.log", ["printenv", "CARDTIME_RAW_DIR"], ["--container-image=img"]
    )
    assert argv[:7] == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        f"--output={tmp_path}/%N/torch.torchrun.log",
    ]
    assert argv[7] == "--container-image=img"
    task = argv[argv.index("sh") :]
    done = subprocess.run(
        task, capture_output=True, text=True, env={**os.environ, "SLURMD_NODENAME": "gpu-b"}
    )
    assert done.stdout.strip() == f"{tmp_path}/gpu-b" and (tmp_path / "gpu-b").is_dir()


def test_a_multi_node_profile_survives_the_manifest_for_resume():
    from suite.config import GLOO_CPU, profile_from_dict

    two = GLOO_CPU.with_overrides(
        nproc=1,
        degrees=(1,),
        nodes=("node-a", "root@node-b:2222"),
        ssh_config="/c",
        socket_ifname="mn0",
        node_launcher="srun",
    )
    back = profile_from_dict(__import__("json").loads(__import__("json").dumps(two.to_dict())))
    assert back == two and back.nodes == ("node-a", "root@node-b:2222") and back.world == 2


# ---------------------------------------------------------------- before any stage
# (suite/cluster/nodecheck.py)


def test_a_taken_rendezvous_port_is_refused_naming_the_node():
    import socket

    from suite.cluster.nodecheck import check_nodes, rendezvous_port_problem

    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen(1)
        port = held.getsockname()[1]
        problem = rendezvous_port_problem("gpu-a", port)
        assert problem.startswith(f"node gpu-a: the rendezvous port {port} is taken by pid ")
        assert "pass another --master-port" in problem
        with pytest.raises(NodesError, match=f"rendezvous port {port} is taken"):
            check_nodes(parse_nodes("gpu-a,gpu-b"), gpus=False, master_port=port)
    assert rendezvous_port_problem("gpu-a", port) is None and rendezvous_port_problem("gpu-a", None) is None


def test_gpu_counts_from_real_smi_lists():
    from pathlib import Path

    from suite.cluster.nodecheck import gpu_count_problems, gpu_lines

    smi = Path(__file__).resolve().parents[1] / "data" / "smi"
    two, one = (
        gpu_lines((smi / name).read_text()) for name in ("quadro-rtx4000-2gpu-L.txt", "rtx4070-laptop-L.txt")
    )
    assert (two, one) == (2, 1)
    assert gpu_count_problems({"gpu-a": two, "gpu-b": two}, "gpu-a") == []
    assert gpu_count_problems({"gpu-a": two, "gpu-b": two, "gpu-c": one}, "gpu-a") == [
        "node gpu-c: 1 GPUs where gpu-a has 2: rent nodes of one shape, or leave it out of --nodes"
    ]


def test_suite_run_refuses_a_taken_port_in_one_line(capsys):
    """--master-port held on this (the first) node: exit 2 before any run directory, one line."""
    import socket

    from suite.__main__ import main as suite_main

    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen(1)
        port = held.getsockname()[1]
        code = suite_main(
            ["run", "--nodes", "gpu-a,gpu-b", "--master-port", str(port), "--out", "/nonexistent/x"]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"rendezvous port {port} is taken" in err[0]


def test_an_elastic_launch_for_the_node_loss_drill():
    from suite.cluster.multinode import torchrun_node_command

    argv = torchrun_node_command(
        "py",
        "m",
        [],
        nproc=8,
        nnodes=2,
        endpoint="gpu-a:29400",
        rdzv_id="x",
        max_restarts=1,
        min_nodes=1,
        last_call_s=10,
    )
    assert "--nnodes=1:2" in argv and "--rdzv-conf=join_timeout=120,last_call_timeout=10" in argv
    plain = torchrun_node_command("py", "m", [], nproc=8, nnodes=2, endpoint="gpu-a:29400", rdzv_id="x")
    assert "--nnodes=2" in plain and "--rdzv-conf=join_timeout=120" in plain
