"""stdout and stderr of every command-line entry point (`python -m suite`, `reports`, `provisioning`): what is
written passes through suite/inert.py, and an output that cannot take it — a closed pipe (`| head -c1`), a
full disk (`> /dev/full`) — ends the command with one `error:` line and exit 2 instead of a traceback.

    def main(argv=None) -> int:
        return cli_streams.guarded(lambda: _main(argv))
"""

from __future__ import annotations

import io
import os
import sys
from typing import Callable, TextIO

from suite.inert import inert

OUTPUT_ERROR_EXIT = 2  # README "Exit codes": the output cannot be written, as for any unusable file


class OutputLost(OSError):
    """A write to stdout or stderr failed: the reader went away or the disk is full."""


class InertStream(io.TextIOBase):
    """A text stream whose writes pass through `inert`; everything else (isatty, fileno, buffer, encoding) is
    the wrapped stream's. `control(seq)` writes the caller's own terminal sequence unchanged."""

    def __init__(self, wrapped: TextIO, name: str):
        self.wrapped = wrapped
        self.stream_name = name

    def write(self, text: str) -> int:
        self._guard(self.wrapped.write, inert(text))
        return len(text)

    def control(self, sequence: str) -> None:
        self._guard(self.wrapped.write, sequence)

    def flush(self) -> None:
        self._guard(self.wrapped.flush)

    def _guard(self, call: Callable, *args) -> None:
        try:
            call(*args)
        except BrokenPipeError as e:
            raise OutputLost(e.errno, f"{self.stream_name} was closed before everything was written") from e
        except OSError as e:
            raise OutputLost(e.errno, f"cannot write {self.stream_name}: {e.strerror or e}") from e

    def isatty(self) -> bool:
        return self.wrapped.isatty()

    def fileno(self) -> int:
        return self.wrapped.fileno()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str):  # encoding, errors, buffer, reconfigure …: the wrapped stream's
        return getattr(self.wrapped, name)


def install() -> None:
    """Wrap sys.stdout and sys.stderr (once) so that nothing the command prints can carry a control
    character."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, InertStream):
            setattr(sys, name, InertStream(stream, name))


def write_control(stream: TextIO, sequence: str) -> None:
    """The caller's own terminal sequence (the progress line's `\\r\\x1b[2K`), past an InertStream if there is
    one."""
    if isinstance(stream, InertStream):
        stream.control(sequence)
    else:
        stream.write(sequence)


def guarded(main: Callable[[], int]) -> int:
    """Run a command's main with inert streams; its output flushed before it returns, so that a write failing
    at exit is still this command's one line. A lost output: `error: …` on stderr (when stderr still takes
    it), exit 2."""
    install()
    try:
        try:
            code = main()
        finally:  # argparse's --help ends in SystemExit: its output is flushed here all the same
            sys.stdout.flush()
        return code
    except OutputLost as e:
        _drop(sys.stdout)  # Python's own flush at exit must not fail a second time with a traceback
        try:
            sys.stderr.write(f"error: {e.strerror}\n")
            sys.stderr.flush()
        except OSError:
            _drop(sys.stderr)
        return OUTPUT_ERROR_EXIT


def _drop(stream: TextIO) -> None:
    """Point the stream's file descriptor at /dev/null: what is still buffered goes nowhere, quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
