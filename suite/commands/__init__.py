"""One module per `python -m suite` command: each has add_parser(subparsers) setting func=main(args) -> exit code.
The top of the suite: a command may import any suite package and reports (rendering a run's report).
Imported only by suite/__main__.py.

Exit codes everywhere (README "Exit codes"): 0 success, 1 a "no" (a `fail` verdict, a rejected run, a
partial capture), 2 a usage error or unusable input — then one line on stderr, never a traceback.
"""

import sys


def usage_error(message: str) -> int:
    """One line on stderr, exit status 2, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    return 2
