"""One module per `python -m suite` command: each has add_parser(subparsers) setting func=main(args) -> exit code.

Exit codes everywhere: 0 success, 1 a `fail` verdict (or the checked condition), 2 a usage error or bad input.
"""

import sys


def usage_error(message: str) -> int:
    """One line on stderr, exit status 2, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    return 2
