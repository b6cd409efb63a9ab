"""The fault drill's launches: each scenario (crash, hang, exception) under one setting of the NCCL watchdog's
error handling — torch's default and, on NCCL, TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (ncclCommAbort first).
"""

from __future__ import annotations

from dataclasses import dataclass

ASYNC_ENV = "TORCH_NCCL_ASYNC_ERROR_HANDLING"


@dataclass(frozen=True)
class DrillCase:
    """One launch of the drill: a scenario under one setting of the NCCL watchdog's error handling."""

    name: str
    """The rows' case and the folder raw/fault/<name>/."""
    scenario: str
    """crash, hang or exception."""
    async_error_handling: str | None
    """TORCH_NCCL_ASYNC_ERROR_HANDLING for the launch; None: unset, torch's default (3)."""

    @property
    def label(self) -> str:
        if self.async_error_handling is None:
            return (
                f"{ASYNC_ENV} unset: torch's default 3 (the watchdog ends the process without aborting NCCL)"
            )
        return f"{ASYNC_ENV}={self.async_error_handling}" + (
            " (the watchdog aborts NCCL, then ends the process)" if self.async_error_handling == "1" else ""
        )

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The launch's environment: the variable removed (torch's default) or set, whatever `base` holds."""
        out = {k: v for k, v in base.items() if k != ASYNC_ENV}
        if self.async_error_handling is not None:
            out[ASYNC_ENV] = self.async_error_handling
        return out


def drill_cases(scenarios, backend: str) -> list[DrillCase]:
    """Every scenario under torch's default; on NCCL each again under TORCH_NCCL_ASYNC_ERROR_HANDLING=1."""
    out = [DrillCase(s, s, None) for s in scenarios]
    if backend == "nccl":  # ProcessGroupNCCL's variable: gloo ignores it, one case per scenario there
        out += [DrillCase(f"{s}.async1", s, "1") for s in scenarios]
    return out
