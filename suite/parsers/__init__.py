"""Pure text → data parsers for the tools' outputs. No subprocess, no files beyond reading the one given."""


class ParseError(ValueError):
    """Input that is not what the parser reads; the message says why and, where it can, which line."""
