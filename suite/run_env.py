"""The communication libraries' settings a run is given in a file (`make remote NCCL_ENV=nccl.env`, `python -m
suite run --env-file nccl.env`): NCCL, libfabric (EFA), UCX and CUDA variables that a rented cluster needs and
cardtime cannot guess (NCCL_IB_HCA=mlx5_0,mlx5_3, FI_PROVIDER=efa, NCCL_SOCKET_IFNAME=^docker,lo,
LD_LIBRARY_PATH for a net plugin).

    # nccl.env: one NAME=value a line; `export ` and quotes around the value allowed; # comments
    NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3
    FI_PROVIDER=efa

`suite run` puts them in its own environment before any stage, so every rank inherits them; across nodes they
reach every node's torchrun (suite/cluster/multinode.py forwarded_env) and mpirun's `-x`
(suite/cluster/mpirun.py); the manifest records them (`env_file`), and `--resume` sets them again. Read and
checked in full before anything starts: a name outside the libraries' prefixes (`PATH=` or `LD_PRELOAD=` is
not what this file is for), a control byte or an overlong value is refused naming its line.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from suite.inert import inert

PREFIXES = ("NCCL_", "FI_", "UCX_", "CUDA_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")
NAMES = ("LD_LIBRARY_PATH",)
"""LD_LIBRARY_PATH: where a net plugin (aws-ofi-nccl's libnccl-net.so) and libfabric are found."""
NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
MAX_BYTES = 64 * 1024
MAX_VALUE_CHARS = 4096
MANIFEST_KEY = "env_file"


class EnvFileError(ValueError):
    pass


def parse(text: str, where: str) -> dict[str, str]:
    """`NAME=value` lines → {NAME: value}; the first problem raises EnvFileError naming `where:line`."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        here = f"{where}:{number}"
        bare = line.strip()
        if not bare or bare.startswith("#"):
            continue
        bare = bare.removeprefix("export ").lstrip()
        name, eq, value = bare.partition("=")
        name = name.strip()
        if not eq or not NAME.fullmatch(name):
            raise EnvFileError(f"{here}: {inert(line[:80])!r} is not NAME=value")
        if not (name.startswith(PREFIXES) or name in NAMES):
            raise EnvFileError(
                f"{here}: {name} is not a communication library's setting ({', '.join(PREFIXES + NAMES)}…)"
            )
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise EnvFileError(f"{here}: {name}'s value holds a control character")
        if len(value) > MAX_VALUE_CHARS:
            raise EnvFileError(f"{here}: {name}'s value is longer than {MAX_VALUE_CHARS} characters")
        if name in out:
            raise EnvFileError(f"{here}: {name} is set twice")
        out[name] = value
    return out


def read(path: Path) -> dict[str, str]:
    """The file's settings, or EnvFileError naming the file (missing, not a file, too large, not UTF-8) or
    the line."""
    if not path.is_file():
        raise EnvFileError(f"{path}: no such file: write one NAME=value a line (NCCL_IB_HCA=mlx5_0)")
    if path.stat().st_size > MAX_BYTES:
        raise EnvFileError(f"{path}: larger than {MAX_BYTES // 1024} KiB: a settings file is a few lines")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise EnvFileError(f"{path}: not UTF-8 text") from None
    return parse(text, str(path))


def recorded(manifest: dict) -> dict[str, str]:
    """The settings a run's manifest recorded, checked again as a file would be (a manifest is a file anyone
    can edit: `LD_PRELOAD` there is refused, not set)."""
    entry = manifest.get(MANIFEST_KEY) or {}
    settings = entry.get("vars") if isinstance(entry, dict) else None
    if not settings:
        return {}
    if not isinstance(settings, dict) or not all(
        isinstance(v, str) and "\n" not in v and "\r" not in v for v in settings.values()
    ):
        raise EnvFileError(f"the manifest's {MANIFEST_KEY}.vars is not NAME → one line of text")
    return parse(text_of({str(k): v for k, v in settings.items()}), f"the manifest's {MANIFEST_KEY}")


def digest(settings: dict[str, str]) -> str:
    """12 hex digits naming the settings (a job's identity: other settings are another run)."""
    return hashlib.sha256(text_of(settings).encode()).hexdigest()[:12]


def text_of(settings: dict[str, str]) -> str:
    """The settings as a file `read` gives back unchanged (what make remote puts in the job's folder)."""
    return "".join(f"{name}={_kept(value)}\n" for name, value in settings.items())


def _kept(value: str) -> str:
    """A value `parse` would strip quotes from is wrapped in one more pair."""
    return f"'{value}'" if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value
