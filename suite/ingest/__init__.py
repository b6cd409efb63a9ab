"""`python -m suite ingest FILE_OR_DIR…`: judge raw outputs captured on any box with the stages' own code.
It imports the parsers, the stages' raw-output→rows functions, suite.cluster's and the runner.
Imported only by suite.commands.ingest.

inputs.py sniffs each file's kind from its content (the parser modules' `sniff`, in the order of
inputs.KINDS) and parses it; feed.py turns the captures into the rows each stage would have made
(the stages' own raw-output→rows functions) and runs the runner over them; the report is rendered
as for a live run. Nothing is written outside the new run directory; raw/ keeps the inputs untouched.
"""
