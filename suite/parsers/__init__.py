"""Pure text → data parsers for the tools' outputs. No subprocess, no files beyond reading the one given. Each
module parses one tool's output (nvidia-smi, nccl-tests, ibstat, traces, …); they import no stage or verdict.
Imported by the stages, suite.hardware, suite.cluster, suite.ingest and suite.commands.
"""


class ParseError(ValueError):
    """Input that is not what the parser reads; the message says why and, where it can, which line."""
