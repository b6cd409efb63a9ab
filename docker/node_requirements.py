"""Print the requirements an image installs: pyproject.toml's build requirements and dependencies,
less those only the laptop uses (SSH, S3, the Docker SDK drive rented hosts; `suite` imports none).

    python3 docker/node_requirements.py [pyproject.toml] [--without torch]

One requirement a line, as pip reads them. The images never install a torch this prints without
--without torch where the base brings its own build (the CPU wheel, the CUDA build).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

LAPTOP_ONLY = frozenset({"boto3", "fabric", "docker"})


def requirement_name(requirement: str) -> str:
    """`torch==2.13.0` → `torch`; names compared the way pip does (case, `-`/`_`/`.` folded)."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not name:
        raise ValueError(f"cannot read a package name from requirement {requirement!r}")
    return re.sub(r"[-_.]+", "-", name.group(1)).lower()


def node_requirements(pyproject: dict, without: frozenset[str] = frozenset()) -> list[str]:
    skip = LAPTOP_ONLY | {requirement_name(n) for n in without}
    wanted = [*pyproject.get("build-system", {}).get("requires", []), *pyproject["project"]["dependencies"]]
    return [r for r in wanted if requirement_name(r) not in skip]


def main(argv: list[str]) -> int:
    args = list(argv)
    without: set[str] = set()
    while "--without" in args:
        i = args.index("--without")
        without.add(args[i + 1])
        del args[i : i + 2]
    path = Path(args[0]) if args else Path("pyproject.toml")
    for line in node_requirements(tomllib.loads(path.read_text()), frozenset(without)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
