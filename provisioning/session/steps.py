"""The step lines every driver prints: which of make remote's seven steps runs and how long the command has
taken."""

from __future__ import annotations

import sys
import time

STEPS = ("preflight", "code", "runtime", "run", "fetch", "report", "archive")


class Steps:
    """Prints which step runs and how long the whole command has taken: `[4/7 run +01:32] …`."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.current = "preflight"

    def begin(self, name: str, what: str) -> None:
        self.current = name
        self.say(f"── {what}")

    def say(self, text: str) -> None:
        n = STEPS.index(self.current) + 1
        elapsed = int(time.monotonic() - self.start)
        head = f"[{n}/{len(STEPS)} {self.current:<9} +{elapsed // 60:02d}:{elapsed % 60:02d}]"
        for line in str(text).splitlines() or [""]:
            self.stream.write(f"{head} {line}\n")
        self.stream.flush()
