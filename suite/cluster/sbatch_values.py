"""The values written into an sbatch script's `#SBATCH` lines, checked before any is written.

sbatch reads `#SBATCH --name=value` itself, up to the end of the line: shell quoting means nothing there, so a
newline in PARTITION or ACCOUNT would start a line of its own, which bash then runs inside the job. The one
defence is to accept only the characters Slurm's own names and time formats use, and to say which value is
not.
"""

from __future__ import annotations

import re

# Partition and account names (a comma list of partitions is allowed), the job name, a network interface.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._,+-]*")
# sbatch --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]], or no limit.
_TIME_RE = re.compile(r"\d+(?::\d+){0,2}|\d+-\d+(?::\d+){0,2}|UNLIMITED|INFINITE", re.IGNORECASE)
# The runs folder, in `#SBATCH --output=FOLDER/slurm-%j.out`: a path without spaces, quotes, `%` (Slurm's own
# filename patterns) or anything a shell or sbatch's line reader would act on.
_PATH_RE = re.compile(r"[A-Za-z0-9._/@+:,=~-]+")
# A container image reference (pyxis): registry/name:tag or name@sha256:…, no spaces or shell characters.
_IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@#+-]*")


def sbatch_value_problem(
    *,
    partition: str = "",
    account: str = "",
    time_limit: str = "",
    container_image: str = "",
    socket_ifname: str = "",
    node_addrs: str = "",
    runs_folder: str = "",
) -> str | None:
    """The first value that cannot go into the script as written, and what the value may hold; None when all
    can."""
    checks = (
        ("PARTITION", partition, _NAME_RE, "letters, digits and . _ , + -"),
        ("ACCOUNT", account, _NAME_RE, "letters, digits and . _ , + -"),
        ("TIME", time_limit, _TIME_RE, "minutes, HH:MM:SS or D-HH:MM:SS, as sbatch --time reads it"),
        ("IMAGE", container_image, _IMAGE_RE, "an image reference such as nvcr.io/nvidia/pytorch:25.01-py3"),
        ("SOCKET_IFNAME", socket_ifname, _NAME_RE, "an interface name such as ib0 or ens5"),
        ("NODE_ADDRS", node_addrs, _NAME_RE, "addresses or host names joined by commas: 10.0.0.1,10.0.0.2"),
        (
            "--out",
            runs_folder,
            _PATH_RE,
            "a folder path of letters, digits and . _ / @ + : , = ~ - (no space, "
            "quote, % or control character: sbatch reads #SBATCH --output to the end of its line)",
        ),
    )
    for name, value, pattern, holds in checks:
        if value and not pattern.fullmatch(value):
            return f"{name}={value!r} cannot go into the batch script: it must be {holds}"
    return None
