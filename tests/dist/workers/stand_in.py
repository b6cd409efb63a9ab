"""Test module run through suite/launch/warm_python.py: `--do kill|exit3|raise|wait` ends it one way; it first
prints its pid, parent, argv, cwd, one environment variable and whether stdin is the one given."""

import argparse
import json
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--do", choices=("kill", "exit3", "raise", "wait"), required=True)
args = parser.parse_args()
print(
    json.dumps(
        {
            "pid": os.getpid(),
            "argv": sys.argv[1:],
            "cwd": os.getcwd(),
            "torch": "torch" in sys.modules,
            "marker": os.environ.get("CARDTIME_STAND_IN"),
            "stdin": sys.stdin.readline().strip(),
        }
    ),
    flush=True,
)
if args.do == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
elif args.do == "exit3":
    sys.exit(3)
elif args.do == "raise":
    raise ValueError("raised in the module")
else:
    signal.signal(signal.SIGTERM, lambda *_: (print("got SIGTERM", flush=True), os._exit(7)))
    time.sleep(60)
