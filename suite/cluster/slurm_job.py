"""Following a submitted Slurm job by its id: its state, its output file's new lines, and, at its end, the run
directory and exit status the batch script left beside that output (suite/cluster/slurm.py's job_files).

One POSIX script answers each poll, run by `sh` on the login node itself (`make slurm` there) or over SSH from
the laptop (`make slurm SLURM_HOST=…`, provisioning/slurm/driver.py): the same words and the same parse either
way.

    poll = lambda offset: parse_poll(subprocess.run(["sh", "-c", status_command("123", "runs", offset)],
                                                    capture_output=True, text=True).stdout)
    final = follow(poll, "123", say=print)

The state comes from `scontrol show job`, which every cluster answers (sacct needs accounting, which many
lack); the controller forgets a finished job after MinJobAge (300 s by default), so the exit file, not the
state, is what says a job ended when a re-attach comes later.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field
from typing import Callable

ACTIVE = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "PREEMPTED",
}
"""States a job may leave again (PREEMPTED requeues on most clusters); any other state is its end."""
OUTPUT_CHUNK = 65536  # bytes of new output per poll: a chatty job is read over a few polls, never all at once
GONE_POLLS = (
    3  # polls in a row in which the controller knows no such job and no exit file is there: it is gone
)
JOB_ID_RE = re.compile(r"\d+(?:_\d+)?")

# $1 job id, $2 the runs folder, $3 the output bytes already shown. The files: suite/cluster/slurm.py's
# job_files.
STATUS_SCRIPT = (
    r"""
job=$1 runs=$2 offset=$3
printf 'scontrol=%s\n' "$(scontrol -o show job "$job" 2>/dev/null | head -n 1)"
printf 'exit=%s\n' "$(cat -- "$runs/slurm-$job.exit" 2>/dev/null)"
printf 'run_dir=%s\n' "$(cat -- "$runs/slurm-$job.last" 2>/dev/null)"
if [ -f "$runs/slurm-$job.out" ]; then printf 'size=%s\n' "$(wc -c < "$runs/slurm-$job.out")"; else echo size=-1; fi
echo @@output
tail -c "+$((offset + 1))" -- "$runs/slurm-$job.out" 2>/dev/null | head -c """  # noqa: E501
    + str(OUTPUT_CHUNK)
    + "\n"
)


def status_command(job: str, runs: str, offset: int, slurm_conf: str = "") -> str:
    """STATUS_SCRIPT with its arguments as one POSIX command line; `slurm_conf`: the login node's slurm.conf
    where it is not the default (/etc/slurm/slurm.conf)."""
    env = f"export SLURM_CONF={shlex.quote(slurm_conf)}\n" if slurm_conf else ""
    return env + "set -- " + shlex.join([job, runs, str(int(offset))]) + "\n" + STATUS_SCRIPT


@dataclass
class JobPoll:
    state: str
    """Slurm's JobState ('' when the controller knows no such job)."""
    reason: str = ""
    nodes: str = ""
    exit_code: int | None = None
    """The suite's exit status, from the exit file the batch script writes last (None until then)."""
    run_dir: str = ""
    output_size: int = -1
    """The output file's size in bytes (-1: not there yet)."""
    output: str = ""
    """Its bytes from the polled offset on, at most OUTPUT_CHUNK."""
    job: dict[str, str] = field(default_factory=dict)
    """scontrol's fields (Partition, NumNodes, WorkDir, …; {} once the controller forgot the job)."""

    @property
    def ended(self) -> bool:
        """Slurm says the job is over, or has forgotten it and the exit file says how it ended. An exit file
        beside a job still RUNNING is its last second: the state that follows (COMPLETED, FAILED) is waited
        for."""
        return self.state not in ACTIVE if self.state else self.exit_code is not None

    def describe(self) -> str:
        if self.state == "PENDING":
            return f"PENDING ({self.reason})" if self.reason and self.reason != "None" else "PENDING"
        where = f" on {self.nodes}" if self.nodes and self.nodes != "(null)" else ""
        return f"{self.state or 'no longer known to the controller'}{where}"


def parse_poll(text: str) -> JobPoll:
    head, _, output = text.partition("@@output\n")
    fields = dict(line.partition("=")[::2] for line in head.splitlines() if "=" in line)
    job = dict(re.findall(r"(\w+)=(\S*)", fields.get("scontrol", "")))
    code = fields.get("exit", "").strip()
    size = fields.get("size", "-1").strip()
    return JobPoll(
        state=job.get("JobState", ""),
        reason=job.get("Reason", ""),
        nodes=job.get("NodeList", ""),
        exit_code=int(code) if code.lstrip("-").isdigit() else None,
        run_dir=fields.get("run_dir", "").strip(),
        output_size=int(size) if size.lstrip("-").isdigit() else -1,
        output=output,
        job=job,
    )


def follow(
    poll: Callable[[int], JobPoll],
    job: str,
    say,
    interval_s: float = 3.0,
    tail_only: bool = False,
    sleep=time.sleep,
) -> JobPoll:
    """Poll until the job has ended: each state change said once (before the output it brings, after the job's
    last lines), each complete new output line said as progress. tail_only (a re-attach): of the output so far
    only its last few lines. Returns the last poll (its output: the last chunk read)."""
    offset = 0
    if tail_only:
        offset = max(0, poll(1 << 62).output_size - 4000)
    last_state, gone = None, 0
    while True:
        p = poll(offset)
        shown = (
            p.output
            if p.ended or len(p.output.encode()) >= OUTPUT_CHUNK
            else p.output[: p.output.rfind("\n") + 1]
        )
        offset += len(shown.encode())
        lines = [f"  │ {line}" for line in shown.splitlines()]
        state = [] if p.describe() == last_state else [f"job {job}: {p.describe()}"]
        for text in lines + state if p.ended else state + lines:
            say(text)
        last_state = p.describe()
        gone = gone + 1 if not p.state and p.exit_code is None else 0
        more = bool(shown) and p.output_size > offset  # a backlog: read on at once (never on an empty answer)
        if (p.ended or gone >= GONE_POLLS) and not more:
            return p
        if not more:
            sleep(interval_s)
