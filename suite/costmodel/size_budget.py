"""A sweep that stops growing before its stage's timeout: each next size predicted from the one before it.

    box = SizeBudget(total_s=600, series=["all_reduce", "all_gather"])
    why = box.before("all_reduce", 1 << 30)      # None: run it; else the reason it is dropped
    box.after("all_reduce", 1 << 30, wall_s=2.1, elapsed_s=40.3)

A size's time is α + β·bytes: the next size is predicted on the line through the last two sizes measured,
never below the last one's time (a first call's set-up makes the line fall). A line needs two points: the
first two sizes of a series always run (the smallest sizes cost milliseconds; a prediction from one point, its
time × the ratio of bytes, would take a first call's set-up for bandwidth and drop the whole series). The time
left is shared among the series not yet started (the collectives of the torch sweep, one series each), so the
first collective cannot spend the last one's time; what a series leaves unused passes to the next. Once a size
is dropped, the larger ones of its series are too: the sweep stops growing.

Every rank must take the same decision (or the collectives mismatch): callers feed the slowest rank's
wall time and elapsed time, agreed in one all-reduce. No torch here: nccl-tests' runner uses it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def size_text(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


@dataclass
class SizeBudget:
    total_s: float | None
    """Seconds the whole sweep may take from its start; None: no limit (every size runs)."""
    series: list[str]
    """The series in the order they run (each shares the time left when it starts)."""
    elapsed_s: float = 0.0
    """Seconds since the sweep started, as of the last size measured."""
    _last: dict[str, tuple[int, float]] = field(default_factory=dict)
    _before_last: dict[str, tuple[int, float]] = field(default_factory=dict)
    _end: dict[str, float] = field(default_factory=dict)
    _stopped: dict[str, str] = field(default_factory=dict)

    def _series_end(self, name: str) -> float:
        if name not in self._end:
            waiting = [s for s in self.series if s not in self._end]
            share = max(0.0, self.total_s - self.elapsed_s) / max(1, len(waiting))
            self._end[name] = self.elapsed_s + share
        return self._end[name]

    def before(self, name: str, size: int) -> str | None:
        """None when `size` of series `name` fits the time left; else why it is dropped (the sweep then stops
        growing: every larger size of the series is dropped with the same reason)."""
        if self.total_s is None:
            return None
        end = self._series_end(name)
        if name in self._stopped:
            return self._stopped[name]
        if name not in self._before_last:  # fewer than two sizes measured: no line yet
            return None
        last_size, wall = self._last[name]
        predicted = self.predict(name, size)
        if self.elapsed_s + predicted <= end:
            return None
        self._stopped[name] = (
            f"not run for time: {size_text(size)} would take ≈{predicted:.1f} s ({size_text(last_size)} took "
            f"{wall:.2f} s), past the {max(0.0, end - self.elapsed_s):.1f} s left to {name} of the stage's "
            f"time "
            f"({self.total_s:.0f} s for the sweep); the sweep stopped growing at {size_text(last_size)}"
        )
        return self._stopped[name]

    def predict(self, name: str, size: int) -> float:
        """Seconds `size` of series `name` is expected to take, on the line through its last two sizes."""
        last_size, wall = self._last[name]
        first_size, first_wall = self._before_last[name]
        slope = (wall - first_wall) / (last_size - first_size) if last_size != first_size else 0.0
        return max(wall, wall + slope * (size - last_size))

    def after(self, name: str, size: int, wall_s: float, elapsed_s: float) -> None:
        """`size` of `name` took `wall_s` (every placement of it); `elapsed_s` since the sweep started."""
        if name in self._last and self._last[name][0] != size:
            self._before_last[name] = self._last[name]
        self._last[name] = (size, max(wall_s, 1e-9))
        self.elapsed_s = elapsed_s
