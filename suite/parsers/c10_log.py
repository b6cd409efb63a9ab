"""Log lines of torch's C++ core (c10) and of torchrun → severity, local time, rank, message.

    c10, torch ≥ 2.2   [rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught
                       ...
    c10, older         [E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught ...            (no time)
    torchrun (Python)  W1129 17:26:48.378000 26728 .../multiprocessing/api.py:1028] Sending process 26741 ...

The time is the node's local time, month and day without a year; the month is not zero-padded
(`E321` is March 21, `E1206` December 6). `epoch()` places a record in the year that puts it
nearest a known instant. The fault drill reads a surviving rank's NCCL watchdog error from its
log this way: with TORCH_NCCL_ASYNC_ERROR_HANDLING 1 or 3 the watchdog thread tears the process
down and Python never sees an exception to record.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

_C10 = re.compile(
    r"(?:\[rank(?P<rank>\d+)\]:)?\[(?P<sev>[IWEF])(?:(?P<mon>\d{1,2})(?P<day>\d{2}) "
    r"(?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})\.(?P<frac>\d+))? (?P<src>[^\]\s]+:\d+)\] ?(?P<msg>.*)"
)
_TORCHRUN = re.compile(
    r"^(?P<sev>[IWEF])(?P<mon>\d{1,2})(?P<day>\d{2}) (?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})\.(?P<frac>\d+) "
    r"(?P<pid>\d+) (?P<src>[^\]\s]+:\d+)\] ?(?P<msg>.*)"
)

# What a surviving rank's log says when the NCCL watchdog (or a blocking wait) gives up on a collective.
NCCL_FAILURE_MARKERS = (
    "Watchdog caught collective operation timeout",
    "Exception (either an error or timeout) detected by watchdog",
    "watchdog thread terminated with exception",
    "timed out in blocking wait",
    "NCCL error",
    "ncclRemoteError",
    "ncclSystemError",
    "ncclInternalError",
)


@dataclass(frozen=True)
class LogRecord:
    severity: str
    """I, W, E or F."""
    source: str
    """file:line that logged it."""
    message: str
    rank: int | None = None
    month: int | None = None
    day: int | None = None
    seconds_of_day: float | None = None
    """Local time of day, seconds since midnight (nanoseconds kept as written); None for the old timeless
    format."""

    @property
    def has_time(self) -> bool:
        return self.seconds_of_day is not None

    def epoch(self, near: float) -> float | None:
        """Wall-clock seconds of this record, taking the year that puts it nearest `near` (a time.time())."""
        if not self.has_time:
            return None
        year = time.localtime(near).tm_year
        candidates = []
        for y in (year - 1, year, year + 1):
            try:
                midnight = time.mktime((y, self.month, self.day, 0, 0, 0, 0, 0, -1))
            except (OverflowError, ValueError):
                continue
            candidates.append(midnight + self.seconds_of_day)
        return min(candidates, key=lambda t: abs(t - near)) if candidates else None


def parse_line(line: str) -> LogRecord | None:
    """One log line → a record; None for lines of neither format (tracebacks, NCCL INFO, prints)."""
    line = line.rstrip("\n")
    m = _TORCHRUN.match(line) or _C10.search(line)
    if m is None:
        return None
    g = m.groupdict()
    seconds = None
    if g.get("h") is not None:
        seconds = int(g["h"]) * 3600 + int(g["m"]) * 60 + int(g["s"]) + float("0." + g["frac"])
        month, day = int(g["mon"]), int(g["day"])
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
    else:
        month = day = None
    return LogRecord(
        severity=g["sev"],
        source=g["src"],
        message=g["msg"].strip(),
        rank=int(g["rank"]) if g.get("rank") else None,
        month=month,
        day=day,
        seconds_of_day=seconds,
    )


def is_nccl_failure(text: str) -> bool:
    """Whether a line reports a collective that failed or timed out (the watchdog's words)."""
    return any(marker in text for marker in NCCL_FAILURE_MARKERS)


def first_nccl_failure(text: str) -> tuple[LogRecord | None, str] | None:
    """The first line of `text` reporting a failed collective: (its record where parseable, the line); None if
    none."""
    for line in text.splitlines():
        if is_nccl_failure(line):
            return parse_line(line), line.strip()
    return None
