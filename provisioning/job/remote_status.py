"""`make remote-status HOST=…` and `make plan HOST=…`: what the host is doing, what it could do."""

from __future__ import annotations

import sys

from provisioning.job import jobs
from provisioning.session import decidable, preflight
from provisioning.session.login import connect, resolve_base
from provisioning.session.options import RemoteOptions


def status_main(opts: RemoteOptions, stream=None) -> int:
    """`make remote-status HOST=…`: the host's latest job, its stage and the last lines of its log."""
    out = stream or sys.stdout
    remote = connect(opts)
    try:
        base = resolve_base(remote, opts.remote_dir)
        if not base:
            print(
                f"{opts.host.label}: no {opts.remote_dir or 'cardtime'} folder: nothing was run here",
                file=out,
            )
            return 1
        st = jobs.status(remote, base, log_offset=1 << 62)
        waiting = [j for j in jobs.every_job(remote, base) if j.waits_for_fetch]
        if st.job is not None:
            st_tail = jobs.status(remote, base, log_offset=max(0, st.log_size - 2000))
            st.log = st_tail.log
    finally:
        remote.close()
    print(f"{opts.host.label}: {st.describe()}", file=out)
    if st.job is not None:
        print(f"  job folder {st.job_dir} (log: {st.job_dir}/log)", file=out)
        for line in st.log.splitlines()[-10:]:
            print(f"  │ {line}", file=out)
    for j in waiting:
        print(
            f"  never fetched: {j.describe()}\n    fetch it with `make remote HOST={opts.host.label} "
            f"FETCH={j.job['job_id']}`",
            file=out,
        )
    return 0 if st.state in ("running", "starting", "finished") else 1


def gpu_model(nvidia_smi_l_line: str) -> str:
    """'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)' → 'NVIDIA H100 80GB HBM3'."""
    text = nvidia_smi_l_line.split(":", 1)[1] if ":" in nvidia_smi_l_line else nvidia_smi_l_line
    return text.split(" (UUID")[0].strip()


def plan_main(opts: RemoteOptions, profile_name: str, rate: float | None, stream=None) -> int:
    """`make plan HOST=…`: the plan for the GPU count and model the host reports, with the processes
    `make remote` will start there (suite/world.py: one per GPU, NPROC= fewer)."""
    from provisioning.session.hosts import unnamed_user_note
    from suite.plan.hours import PlanAssumptions, estimate, render
    from suite.world import host_profile

    out = stream or sys.stdout
    if note := unnamed_user_note(opts.host, opts.ssh_config):
        print(f"note: {note}", file=sys.stderr)
    remote = connect(opts)
    try:
        r = remote.run(["nvidia-smi", "-L"], check=False, timeout=60)
        probe = remote.run(preflight.probe_command(opts.remote_dir), check=False, timeout=120)
    finally:
        remote.close()
    gpus = [l.strip() for l in r.stdout.splitlines() if l.strip().startswith("GPU ")]
    if r.exit_code != 0 or not gpus:
        print(
            f"{opts.host.label}: no GPU listed by nvidia-smi -L ({last_line(r.stdout + r.stderr)}): "
            "plan without HOST= (make plan GPUS=8) or fix the driver",
            file=out,
        )
        return 2
    model = gpu_model(gpus[0])
    print(f"{opts.host.label}: {len(gpus)} × {model}", file=out)
    try:
        plan = estimate(
            host_profile(profile_name, len(gpus), opts.nproc),
            PlanAssumptions(gpu_name=model),
            rate_per_hour=rate,
        )
    except ValueError as e:
        print(f"{e}; or plan for an H100 box with `make plan GPUS={len(gpus)}`", file=out)
        return 2
    print(render(plan), file=out)
    facts = preflight.parse_probe(probe.stdout)
    runtime = preflight.decide(facts, runtime=None, needs_gpu=True).runtime or "host"
    print("\n".join(decidable.lines(facts, runtime)), file=out)
    return 0


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no output"
