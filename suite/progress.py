"""Progress of a run: a line per stage on the terminal (a bar on sweeps) and progress.json for followers.

progress.json is what `make remote` reads over SSH to show a detached run's progress:
{"stage", "index", "total", "stage_elapsed_s", "run_elapsed_s", "message", "done", "of", "updated"}.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TextIO

from suite.cli_streams import write_control
from suite.results import atomic_write_text, dumps

BAR_WIDTH = 24


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """`[#########---------------] 9/24`"""
    total = max(total, 1)
    filled = min(width, round(width * done / total))
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total}"


class Progress:
    """Writes progress to a stream (in place on a terminal, throttled lines otherwise) and to
    progress.json."""

    def __init__(
        self, run_path: Path, total_stages: int, stream: TextIO | None = None, run_start: float | None = None
    ):
        self.run_path = Path(run_path)
        self.total = total_stages
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.run_start = run_start or time.monotonic()
        self.stage = ""
        self.index = 0
        self.stage_start = time.monotonic()
        self._last_line = 0.0
        self._open_line = False

    def start_stage(self, index: int, stage: str, what: str) -> None:
        self.index, self.stage, self.stage_start = index, stage, time.monotonic()
        self._write_file(what, None, None)
        self._emit(f"{self._head()} {what}", final=True)

    def update(self, message: str, done: int | None = None, of: int | None = None) -> None:
        self._write_file(message, done, of)
        now = time.monotonic()
        if not self.tty and now - self._last_line < 2.0 and not (done is not None and done == of):
            return
        self._last_line = now
        text = f"{self._head()} {message}"
        if done is not None and of:
            text += " " + bar(done, of)
        self._emit(text, final=not self.tty)

    def end_stage(self, summary: str) -> None:
        self._emit(f"{self._head()} {summary}", final=True)

    def say(self, text: str) -> None:
        self._emit(text, final=True)

    def _head(self) -> str:
        elapsed = time.monotonic() - self.stage_start
        return f"[{self.index:>2}/{self.total}] {self.stage:<10} {elapsed:6.1f}s"

    def _emit(self, text: str, final: bool) -> None:
        if self.tty:  # back to the line's start and clear it: our own sequence, past the inert filter
            write_control(self.stream, "\r\x1b[2K")
            self.stream.write(text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _write_file(self, message: str, done: int | None, of: int | None) -> None:
        now = time.monotonic()
        payload = {
            "stage": self.stage,
            "index": self.index,
            "total": self.total,
            "stage_elapsed_s": round(now - self.stage_start, 1),
            "run_elapsed_s": round(now - self.run_start, 1),
            "message": message,
            "done": done,
            "of": of,
            "updated": time.time(),
            "pid": os.getpid(),
        }
        try:
            atomic_write_text(self.run_path / "progress.json", dumps(payload))
        except OSError:
            pass  # progress is a courtesy; never fail a stage over it
