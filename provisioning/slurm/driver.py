"""`make slurm SLURM_HOST=user@login[:port] PARTITION=…`: a Slurm cluster driven from the laptop through its
login node.

    python -m provisioning slurm --host alice@login.cluster --partition gpu --nodes 2 --remote-dir
    /shared/alice/cardtime

 1 preflight  connect; the login node's Python and the remote folder (preflight.py's probe), sbatch there, the
              partition known to sinfo with at least NODES nodes: anything missing refused in one line, before
              anything is shipped or submitted
 2 code       exactly the local HEAD in REMOTE_DIR/code/<commit> (codesync.py)
 3 runtime    the venv in REMOTE_DIR/venvs/… (hostruntime.py), made on the login node before the job is
              submitted
              (compute nodes often reach no package index); reused while pyproject.toml is unchanged
 4 run        `python -m suite slurm --submit --no-follow` there: the sbatch script written beside the runs
              and
              submitted; the job followed by its id (its state changes, its output file's new lines). The job
              is Slurm's: a dropped laptop loses nothing, and `make slurm SLURM_HOST=… FETCH=<job id>` comes
              back to it
 5 fetch      its run directory to runs/<run-id>/ (fetch.py: resumable, sizes and sha256 checked), the job's
              output beside
 6 report     rendered locally, 7 archive: as make remote does (finish.py)

REMOTE_DIR must be on the storage the compute nodes share with the login node (the home folder on most
clusters, else a project or scratch file system): the nodes run the checkout and the venv in place and write
the run there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from provisioning.job import codesync, fetch
from provisioning.job.finish import report_and_archive
from provisioning.job.follow import call_reconnecting
from provisioning.runtime import hostruntime
from provisioning.session import preflight
from provisioning.session.connection import ConnectionLost, Remote, RemoteError
from provisioning.session.login import connect, connect_for_transfers, host_key_record, resolve_base
from provisioning.session.options import RemoteOptions, needs_gpu, validate_stages
from provisioning.session.shell import join, quote
from provisioning.session.steps import Steps
from suite import run_env
from suite.cluster.sbatch_values import sbatch_value_problem
from suite.cluster.slurm import OWN_JOBS, job_files, partition_nodes_argv, queued_problem, submission_problem
from suite.cluster.slurm_job import JOB_ID_RE, JobPoll, follow, parse_poll, status_command

VENV_INSTALL_TIMEOUT_S = 3600.0  # a CUDA torch over a cluster's network: tens of minutes at worst


@dataclass
class SlurmOptions(RemoteOptions):
    """make remote's options (the connection, PROFILE, STAGES, ARCHIVE, …) and the allocation's."""

    partition: str = ""
    nodes: int = 2
    gpus_per_node: int = 8
    account: str = ""
    time_limit: str = ""
    container_image: str = ""
    """pyxis: every srun in this image."""
    slurm_conf: str = ""
    """The login node's slurm.conf where it is not the default (/etc/slurm/slurm.conf): SLURM_CONF for every
    Slurm command there and, through sbatch's --export=ALL, in the job."""
    socket_ifname: str = ""
    node_addrs: str = ""
    """NODE_ADDRS=: the nodes' addresses toward each other, in the allocation's order (default: slurmctld's
    NodeAddr)."""
    follow_interval_s: float = 3.0
    """Seconds between polls of the job (scontrol and its output file, over SSH)."""


def slurm_main(opts: SlurmOptions, stream=None) -> int:
    steps = Steps(stream)
    opts.runs_dir = Path(opts.runs_dir).resolve()
    if opts.fetch_job:
        return fetch_main(opts, steps)
    if not opts.partition:
        raise ValueError(
            "no partition: make slurm SLURM_HOST=… PARTITION=… (`sinfo -s` on the login node lists them)"
        )
    if opts.nodes < 1 or opts.gpus_per_node < 1:
        raise ValueError(f"NODES={opts.nodes} GPUS_PER_NODE={opts.gpus_per_node}: both must be at least 1")
    problem = sbatch_value_problem(
        partition=opts.partition,
        account=opts.account,
        time_limit=opts.time_limit,
        container_image=opts.container_image,
        socket_ifname=opts.socket_ifname,
        node_addrs=opts.node_addrs,
    )
    if problem:  # refused here, before any SSH: the script is written on the login node from these values
        raise ValueError(problem)
    opts.stages = validate_stages(opts.stages)
    gpu = needs_gpu(opts.profile)  # an unknown profile fails here, before any SSH
    local = codesync.local_checkout(opts.repo, allow_dirty=opts.allow_dirty)

    steps.begin("preflight", f"checking the login node {opts.host.label}")
    remote = connect_for_transfers(opts)
    try:
        facts, problems = login_preflight(remote, opts, steps)
        if problems:
            for p in problems:
                steps.say(f"REFUSED: {p}")
            return 2
        base = facts.base
        record: dict[str, Any] = {
            "host": opts.host.label,
            "host_key": host_key_record(remote),
            "commit": local.commit,
            "branch": local.branch,
            "dirty": local.dirty,
            "profile": opts.profile,
            "stages": opts.stages,
            "runtime": "slurm",
            "partition": opts.partition,
            "nodes": opts.nodes,
            "gpus_per_node": opts.gpus_per_node,
            "host_facts": asdict(facts),
        }
        steps.begin("code", f"code at {local.commit[:12]} ({local.branch})")
        code_dir, how = (codesync.ship if facts.git else codesync.ship_files)(
            remote, local, base, say=steps.say
        )
        steps.say(f"{code_dir}: {'already there' if how == 'reused' else 'shipped by ' + how}")
        steps.begin("runtime", "the venv on the login node's shared storage")
        venv = ensure_venv(remote, opts, facts, local, code_dir, gpu, steps)
        steps.begin("run", f"sbatch on {opts.partition}: {opts.nodes} node(s) × {opts.gpus_per_node}")
        job = submit(remote, opts, base, code_dir, venv, local.commit)
        steps.say(
            f"submitted job {job}; it is Slurm's now: a dropped laptop loses nothing "
            f"(make slurm SLURM_HOST={opts.host.label} FETCH={job} comes back to it)"
        )
        record.update(
            job={"job_id": f"slurm-{job}", "slurm_job": job, "code_shipped_by": how}, work_dir=code_dir
        )
        remote, final, local_dir = follow_and_fetch(remote, opts, base, job, steps, record)
    finally:
        remote.close()
    return report_and_archive(opts, local_dir, record, final, steps)


def login_preflight(
    remote: Remote, opts: SlurmOptions, steps: Steps
) -> tuple[preflight.HostFacts, list[str]]:
    r = remote.run(login_probe_command(opts), timeout=60, what="the login node's probe failed")
    facts, problems, summary = login_decision(r.stdout, opts)
    for line in summary:
        steps.say(line)
    return facts, problems


def login_probe_command(opts: SlurmOptions) -> str:
    """One round trip: preflight's probe (the remote folder, Python, git) and Slurm's (sbatch, the partition's
    nodes)."""
    return (
        preflight.probe_command(opts.remote_dir)
        + slurm_env(opts.slurm_conf)
        + "section sbatch; command -v sbatch; ran\n"
        + f"section partition; {join(partition_nodes_argv(opts.partition))} 2>&1; ran\n"
        + f"section queue; {OWN_JOBS} 2>&1; ran\n"
    )


def login_decision(probe_output: str, opts: SlurmOptions) -> tuple[preflight.HostFacts, list[str], list[str]]:
    """The login node's facts, why the job must not be submitted (one line each; [] if it may), and what to
    say."""
    facts = preflight.parse_probe(probe_output)
    sections = preflight.split_sections(probe_output)
    found = sections.get("sbatch")
    sbatch = found.text if found is not None and found.rc == 0 else ""
    listed = sections.get("partition") or preflight.Section("", 1)
    error = (listed.text.splitlines() or [f"exit {listed.rc}"])[-1] if listed.rc else ""
    nodes = listed.text if not listed.rc else ""
    summary = [
        f"login     {facts.hostname}; sbatch {sbatch or 'absent'}; PARTITION={opts.partition}: "
        f"{len(set(nodes.split()))} node(s)",
        f"folder    {facts.base or opts.remote_dir} (the compute nodes must see it: shared storage)",
    ]
    problem = submission_problem(
        sbatch=sbatch, partition=opts.partition, nodes=opts.nodes, sinfo_nodes=nodes, sinfo_error=error
    )
    queue = sections.get("queue")
    if problem is None and not opts.new_run and queue is not None and queue.rc == 0:
        problem = queued_problem(queue.text, f"SLURM_HOST={opts.host.label} ")
    if problem:
        return facts, [problem], summary
    # The login node runs no stage: its Python and folder are checked as RUNTIME=host's, its GPUs not at all.
    return facts, preflight.decide(facts, runtime="host", needs_gpu=False).problems, summary


def slurm_env(slurm_conf: str) -> str:
    return f"export SLURM_CONF={quote(slurm_conf)}\n" if slurm_conf else ""


def ensure_venv(
    remote: Remote,
    opts: SlurmOptions,
    facts: preflight.HostFacts,
    local: codesync.LocalCheckout,
    code_dir: str,
    gpu: bool,
    steps: Steps,
) -> str:
    """The venv ready on the login node (made the first time: minutes), its path returned. torch's CUDA line:
    CUDA_LINE=, else the one a compute node's driver runs (asked through srun:
    provisioning/slurm/cuda_probe.py)."""
    from suite.hardware.cuda_lines import line_named

    line = (
        (
            chosen_line(remote, opts, line_named(opts.cuda_line))
            if opts.cuda_line
            else compute_node_line(remote, opts, steps)
        )
        if gpu
        else None
    )
    venv = hostruntime.venv_dir(
        facts.base, hostruntime.pyproject_key(local.root, local.commit), facts.python, line
    )
    script = hostruntime.setup_script(venv, code_dir, python=facts.python_exe or "python3", line=line)
    from provisioning.slurm.venv import install_detached  # a detached job under the host's lock, followed

    install_detached(remote, facts.base, venv, script, code_dir, local.commit, steps.say)
    return venv


def compute_node_line(remote: Remote, opts: SlurmOptions, steps: Steps):
    """The CUDA line a compute node of the partition runs, asked with one srun task; refused with the fix."""
    from provisioning.slurm.cuda_probe import PROBE_WAIT_S, line_from_probe, probe_command

    r = remote.run(
        probe_command(opts.partition, opts.account, opts.slurm_conf), check=False, timeout=PROBE_WAIT_S + 120
    )
    line, said = line_from_probe(opts.partition, r.exit_code, r.stdout, r.stderr)
    if line is None:
        raise RemoteError(opts.host.label, said, hint="CUDA_LINE= names the line when the probe cannot tell")
    steps.say(
        f"a compute node of {opts.partition} runs driver {said}: torch's {line.name} line (CUDA {line.cuda})"
    )
    return line


def chosen_line(remote: Remote, opts: SlurmOptions, line):
    """CUDA_LINE='s line, refused when a compute node's driver (the same one-task probe) is too old for it."""
    from provisioning.slurm.cuda_probe import PROBE_WAIT_S, chosen_line_problem, probe_command

    r = remote.run(
        probe_command(opts.partition, opts.account, opts.slurm_conf), check=False, timeout=PROBE_WAIT_S + 120
    )
    problem = chosen_line_problem(opts.partition, line, r.exit_code, r.stdout)
    if problem:
        raise RemoteError(opts.host.label, problem, hint="leave CUDA_LINE= out: the probe chooses the line")
    return line


def submit(remote: Remote, opts: SlurmOptions, base: str, code_dir: str, venv: str, commit: str) -> str:
    """`python -m suite slurm --submit --no-follow` in the checkout on the login node; the job id it
    printed."""
    if opts.nccl_env:
        remote.write_text(env_file_path(base, opts.nccl_env), run_env.text_of(opts.nccl_env))
    r = remote.run(
        submit_command(opts, base, code_dir, venv, commit),
        timeout=120,
        what="the job could not be submitted",
        hint="fix the above, then rerun the same make slurm",
    )
    job = (r.stdout.strip().splitlines() or [""])[-1]
    if not JOB_ID_RE.fullmatch(job):
        raise RemoteError(opts.host.label, "sbatch printed no job id", output=r.stdout + r.stderr)
    return job


def env_file_path(base: str, settings: dict[str, str]) -> str:
    """Where NCCL_ENV='s settings wait on the login node: named by their digest (the same file, the same
    name)."""
    return f"{base}/nccl-{run_env.digest(settings)}.env"


def submit_command(opts: SlurmOptions, base: str, code_dir: str, venv: str, commit: str) -> str:
    argv = [
        f"{venv}/bin/python",
        "-m",
        "suite",
        "slurm",
        "--partition",
        opts.partition,
        "--nodes",
        opts.nodes,
        "--gpus-per-node",
        opts.gpus_per_node,
        "--account",
        opts.account,
        "--time",
        opts.time_limit,
        "--profile",
        opts.profile,
        "--stages",
        opts.stages,
        "--container-image",
        opts.container_image,
        "--socket-ifname",
        opts.socket_ifname,
        "--node-addrs",
        opts.node_addrs,
        "--out",
        f"{base}/runs",
        "--submit",
        "--no-follow",
    ]
    if opts.nccl_env:  # put there by submit(); suite slurm copies it beside the batch script
        argv += ["--env-file", env_file_path(base, opts.nccl_env)]
    # The job inherits this environment (sbatch's --export=ALL): the checkout first on the path, the commit
    # for the manifest where the checkout has no .git.
    env = [f"PYTHONPATH={code_dir}", f"CARDTIME_COMMIT={commit}", "PYTHONUNBUFFERED=1"]
    return slurm_env(opts.slurm_conf) + f"cd {quote(code_dir)} && " + join(["env", *env, *argv])


def follow_and_fetch(
    remote: Remote,
    opts: SlurmOptions,
    base: str,
    job: str,
    steps: Steps,
    record: dict[str, Any],
    tail_only: bool = False,
) -> tuple[Remote, JobPoll, Path]:
    """Follow the job to its end (reconnecting as make remote does), fetch its run and its output beside
    it."""
    steps.begin("run", f"following job {job} (Ctrl-C or a dropped connection leaves it to Slurm)")
    ref = [remote]
    try:
        final = follow(
            lambda offset: poll_over_ssh(ref, opts, base, job, offset, steps),
            job,
            steps.say,
            opts.follow_interval_s,
            tail_only=tail_only,
        )
    except KeyboardInterrupt:
        steps.say(
            f"interrupted: job {job} goes on under Slurm; make slurm SLURM_HOST={opts.host.label} "
            f"FETCH={job} "
            "comes back to it (a rerun without FETCH= submits another job)"
        )
        raise SystemExit(130) from None
    remote = ref[0]
    outputs = job_files(f"{base}/runs", job)["out"]
    if not final.run_dir:
        raise RemoteError(
            opts.host.label,
            f"job {job} ended ({final.describe()}) without a run directory",
            exit_code=final.exit_code,
            output=final.output,
            hint=f"read {outputs} on the login node",
        )
    steps.begin("fetch", f"{final.run_dir} → {opts.runs_dir}/")
    fetched = fetch.fetch_run(remote, final.run_dir, opts.runs_dir, say=steps.say, exports=opts.fetch_exports)
    if final.output_size >= 0:
        remote.sftp().get(outputs, str(fetched.local_dir / f"slurm-{job}.out"))
    record.update(
        remote_run_dir=final.run_dir,
        run_exit_code=final.exit_code,
        slurm_state=final.state,
        fetched=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        files=len(fetched.files),
        left_on_host=[f.path for f in fetched.left_on_host],
    )
    return remote, final, fetched.local_dir


def poll_over_ssh(
    ref: list[Remote], opts: SlurmOptions, base: str, job: str, offset: int, steps: Steps
) -> JobPoll:
    """One status poll on the login node; a dropped connection retried on a fresh one (~1.5 min of waits)."""
    return call_reconnecting(
        ref,
        lambda: connect(opts),
        lambda remote: parse_poll(
            remote.run(
                status_command(job, f"{base}/runs", offset, opts.slurm_conf),
                timeout=60,
                what=f"cannot read job {job}'s state",
            ).stdout
        ),
        steps.say,
        lambda e: ConnectionLost(
            opts.host.label,
            f"connection lost while following job {job}; Slurm runs it on",
            hint=f"make slurm SLURM_HOST={opts.host.label} FETCH={job} comes back to it",
        ),
    )


def fetch_main(opts: SlurmOptions, steps: Steps) -> int:
    """FETCH=<job id>: follow that job if it still runs, then fetch, report and archive its run."""
    job = opts.fetch_job
    steps.begin("preflight", f"checking {opts.host.label} for job {job}")
    remote = connect_for_transfers(opts)
    try:
        base = resolve_base(remote, opts.remote_dir)
        first = (
            parse_poll(remote.run(status_command(job, f"{base}/runs", 1 << 62, opts.slurm_conf)).stdout)
            if base
            else JobPoll(state="")
        )
        if not first.state and first.exit_code is None and first.output_size < 0:
            steps.say(
                f"REFUSED: Slurm knows no job {job} and {base or opts.remote_dir or 'cardtime'}/runs holds "
                f"no "
                f"output of it on {opts.host.label}: check FETCH= and REMOTE_DIR= (`squeue -u $USER` there)"
            )
            return 2
        record: dict[str, Any] = {
            "host": opts.host.label,
            "host_key": host_key_record(remote),
            "runtime": "slurm",
            "job": {"job_id": f"slurm-{job}", "slurm_job": job},
            "reattached": True,
            "fetched_by_job_id": True,
            "partition": first.job.get("Partition"),
            "nodes": first.job.get("NumNodes"),
            "work_dir": first.job.get("WorkDir"),
        }
        remote, final, local_dir = follow_and_fetch(remote, opts, base, job, steps, record, tail_only=True)
    finally:
        remote.close()
    return report_and_archive(opts, local_dir, record, final, steps)
