"""Slurm with pyxis (IMAGE= under make slurm): the words every srun of the job gets, and what runs in the
image.

Checked against pyxis's documented srun flags (its wiki's Usage and FAQ pages) and Slurm's srun manual:
  --container-image=IMAGE   the image (an enroot URI or a squashfs path)
  --container-name=NAME     the container kept for the rest of the job: later sruns with the same name reuse
                            it
                            instead of importing the image again (unnamed ones are removed after each task)
  --container-mounts=SRC:DST[,…]  the checkout and the runs folder (where the run directory is written), each
                                  at its
                            own path, so the node's command finds the code and writes its output where the
                            batch host reads it
  --container-workdir=PATH  the checkout
  srun --mpi=pmix           MPI programs (nccl-tests) started by srun itself, wired up through PMIx: no mpirun
                            and
                            no ssh between compute nodes (Slurm's MPI users guide; pyxis's FAQ: under PMIx
                            each srun runs one MPI program, so each nccl-tests binary is its own srun)
Inside the image the workers run the image's own Python (`python`), never the batch host's venv path.

pyxis names an image as enroot does, `[USER@][REGISTRY#]IMAGE[:TAG]`: the registry is set off with `#`, and
`nvcr.io/nvidia/pytorch:25.01-py3` would be looked up on Docker Hub as the image `nvcr.io/nvidia/pytorch`.
IMAGE= is written as Docker writes it (the README's form) and `pyxis_image` turns it into enroot's.
"""

from __future__ import annotations

import subprocess
from typing import Sequence

IMAGE_PYTHON = "python"  # on the image's PATH; the batch host's venv does not exist there


def pyxis_image(image: str) -> str:
    """IMAGE= in enroot's form: `nvcr.io/nvidia/pytorch:25.01-py3` → `nvcr.io#nvidia/pytorch:25.01-py3`. A
    first part with a dot or a port, or `localhost`, is a registry (Docker's own rule); Docker Hub names
    (`nvidia/cuda:12.6.3-devel-ubuntu24.04`), names already holding `#` and squashfs paths stay as given."""
    if "#" in image or image.startswith(("/", "./", "../")) or image.endswith((".sqsh", ".squashfs")):
        return image
    user, at, rest = image.partition("@") if "@" in image.split("/", 1)[0] else ("", "", image)
    first, slash, name = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        rest = f"{first}#{name}"
    return f"{user}{at}{rest}"


def container_srun_args(image: str, checkout: str, out: str) -> str:
    """The value of CARDTIME_SRUN_ARGS in the batch script: words split on spaces (the script expands it
    unquoted into srun's line, the suite splits it), $SLURM_JOB_ID expanded when the job exports it. A word
    that would not survive that (a space, a quote, a $) is refused."""
    mounts = ",".join(dict.fromkeys(f"{p}:{p}" for p in (checkout, out)))
    for what, value in (("IMAGE=", image), ("the checkout", checkout), ("the runs folder", out)):
        if any(c in value for c in " \t\n'\"$`\\"):
            raise ValueError(f"{what} {value!r} holds a space, quote or $: pyxis' srun words cannot carry it")
    return " ".join(
        [
            f"--container-image={pyxis_image(image)}",
            "--container-name=cardtime-$SLURM_JOB_ID",
            f"--container-mounts={mounts}",
            f"--container-workdir={checkout}",
        ]
    )


LOOKUP_S = 600.0
"""How long the lookup in the image may take: the first srun of a job may import the image (minutes)."""
# Each program (or its MPI build) in $CARDTIME_NCCL_TESTS_DIR[/build] or on PATH, as find_binary looks on a
# host, but inside the image; one `PROGRAM PATH` line per program found.
LOOKUP = (
    'for p in "$@"; do for n in "$p" "${p}_mpi"; do '
    'for d in ${CARDTIME_NCCL_TESTS_DIR:+"$CARDTIME_NCCL_TESTS_DIR" "$CARDTIME_NCCL_TESTS_DIR/build"}; do '
    '[ -x "$d/$n" ] && { echo "$p $d/$n"; continue 3; }; done; '
    'f=$(command -v "$n") && { echo "$p $f"; continue 2; }; done; done; exit 0'
)


def lookup_argv(programs: Sequence[str], srun_args: Sequence[str]) -> list[str]:
    """One task on one node of the allocation, in the image: where each program is there."""
    return ["srun", "--nodes=1", "--ntasks=1", *srun_args, "sh", "-c", LOOKUP, "sh", *programs]


def image_binaries(programs: Sequence[str], srun_args: Sequence[str]) -> tuple[dict[str, str], str]:
    """({program: its path in the image}, why none could be asked): under pyxis nccl-tests runs in the image,
    so it is looked for there, never on the batch host (whose binaries the image may not have)."""
    try:
        done = subprocess.run(
            lookup_argv(programs, srun_args), capture_output=True, text=True, timeout=LOOKUP_S
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return {}, f"the lookup in the image failed: {e}"
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return {}, f"the lookup in the image failed: {tail}"
    found = {}
    for line in done.stdout.splitlines():
        program, _, path = line.partition(" ")
        if program in programs and path.startswith("/"):
            found.setdefault(program, path)
    return found, ""


def in_container(srun_args: Sequence[str]) -> bool:
    return any(a.startswith("--container-image") for a in srun_args)


def node_python(srun_args: Sequence[str], here: str) -> str:
    """The Python a node's command starts with: the image's under pyxis, else this one's (`here`)."""
    return IMAGE_PYTHON if in_container(srun_args) else here


def srun_mpi_words(nnodes: int, per_node: int, srun_args: Sequence[str] = ()) -> list[str]:
    """An MPI program (nccl-tests) across the allocation: per_node ranks on each node, started by srun
    (PMIx)."""
    return [
        "srun",
        f"--nodes={nnodes}",
        f"--ntasks={nnodes * per_node}",
        f"--ntasks-per-node={per_node}",
        "--mpi=pmix",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        *srun_args,
    ]
