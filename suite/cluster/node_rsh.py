"""mpirun's rsh agent in a containerised multi-node run: Open MPI's daemon on another node, in the same image.

    mpirun --mca plm_rsh_agent '/opt/venv/bin/python -m suite.cluster.node_rsh ssh -o BatchMode=yes -F cfg --'
    …

Open MPI starts its daemon (orted) on each other node by running its rsh agent with that node's name and the
daemon's command line (shell text for the node's shell). In a run under RUNTIME=docker the other nodes have
Docker and the image but no Open MPI of their own, so this agent runs the text inside the same image there:
`ssh <node> docker run … IMAGE sh -c '<text>'`, with the run's container settings (CARDTIME_NODE_CONTAINER,
suite/cluster/node_container.py), so nccl-tests' ranks on that node get the GPUs, host network and IPC of the
others.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from suite.cluster.node_container import container_name, container_node_command, container_prefix


def agent_argv(
    ssh_words: Sequence[str], mpirun_args: Sequence[str], prefix: Sequence[str], name: str, cwd: str
) -> list[str]:
    """ssh to the node mpirun named (after any options it put first), running its daemon's text in the
    image."""
    args = list(mpirun_args)
    options = []
    while args and args[0].startswith("-"):
        options.append(args.pop(0))
    if len(args) < 2:
        raise ValueError(f"expected a node and a command after the options, got {list(mpirun_args)!r}")
    host, text = args[0], " ".join(args[1:])
    return [*ssh_words, *options, host, container_node_command(prefix, name, cwd, {}, ["sh", "-c", text])]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args or args.index("--") == 0:
        print(
            "usage: python -m suite.cluster.node_rsh SSH [SSH OPTIONS…] -- [OPTIONS…] NODE COMMAND…",
            file=sys.stderr,
        )
        return 2
    cut = args.index("--")
    prefix = container_prefix(os.environ)
    if prefix is None:
        print(
            "suite.cluster.node_rsh runs only in a containerised multi-node run (CARDTIME_NODE_CONTAINER "
            "unset)",
            file=sys.stderr,
        )
        return 2
    try:
        ssh = agent_argv(
            args[:cut],
            args[cut + 1 :],
            prefix,
            container_name("cardtime-orted", *args[cut + 1 :][:1], str(os.getpid())),
            os.getcwd(),
        )
    except ValueError as e:
        print(f"suite.cluster.node_rsh: {e}", file=sys.stderr)
        return 2
    os.execvp(ssh[0], ssh)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
