"""RUNTIME=docker: the host's kernel log read by the job on the host, before the suite's container starts.

The container cannot read the host's log (`dmesg` there shows nothing of it, or is refused), so the health
stage's XID check would stay open on every Docker box. The job's set-up reads it as the stage would read it
on the host (dmesg, else `sudo -n dmesg` where the login may, else `journalctl -k -b`) into the job's folder,
which the container mounts at the same path, and records how beside it; the container is told the file
(suite/stages/health/host_log.py reads and judges it, naming the window: boot to the container's start).
"""

from __future__ import annotations

from provisioning.session.shell import quote
from suite.stages.health.host_log import HANDED_ENV, SOURCE_SUFFIX

FILE = "host-kernel-log.txt"


def capture_lines(job_dir: str) -> str:
    """The set-up's POSIX lines that write <job_dir>/host-kernel-log.txt and its `.source` (`<how> <UTC
    time>`: dmesg, sudo-dmesg, journalctl-k, gvisor — a sandbox's own log — or none)."""
    log = quote(f"{job_dir}/{FILE}")
    source = quote(f"{job_dir}/{FILE}{SOURCE_SUFFIX}")
    return (
        'echo "── the host\'s kernel log, read here for the health stage in the container"\n'
        f"if dmesg > {log} 2>/dev/null && [ -s {log} ]; then k=dmesg\n"
        f"elif sudo -n dmesg > {log} 2>/dev/null && [ -s {log} ]; then k=sudo-dmesg\n"
        f"elif journalctl -k -b --no-pager -q > {log} 2>/dev/null && [ -s {log} ]; then k=journalctl-k\n"
        f"else k=none; : > {log}; fi\n"
        f'if [ "$k" = dmesg ] && head -n 5 {log} | grep -qi gvisor; then k=gvisor; fi\n'
        f'printf \'%s %s\\n\' "$k" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > {source}\n'
        'echo "kernel log: $k"\n'
    )


def environment(job_dir: str) -> dict[str, str]:
    """What tells the stage in the container where the log is (the job's folder is mounted at its path)."""
    return {HANDED_ENV: f"{job_dir}/{FILE}"}
