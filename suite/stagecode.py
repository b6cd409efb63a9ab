"""A stage's version, recorded per stage in manifest.json (`stage_code`): the hash of its folder — asv's idea,
a benchmark's version is its own source — or the explicit `version` its Stage declares.

Two runs whose stage_code differ for a stage were measured by different code, so `python -m reports compare`
marks that stage "not comparable" instead of calling the difference a regression. What the folder uses from
the shared libraries (suite.workloads, suite.costmodel, …) is not hashed: a change there that alters what a
stage measures says so by setting the stage's `version`, as an asv benchmark does.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

SUITE_ROOT = Path(__file__).resolve().parent
MODULE_LITERAL = re.compile(r"^suite(?:\.\w+)+$")
RANK_SIDE = ("suite.workloads", "suite.launch")
"""What a stage names when it starts ranks: a worker harness or a launcher."""


def module_name(path: Path) -> str:
    rel = path.relative_to(SUITE_ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(path: Path, tree: ast.AST | None = None) -> set[str]:
    """Every dotted name a file imports, relative imports resolved: `from .x import f` gives x and x.f
    (f may be a module or a name in x), at any depth of the file (imports inside functions count too)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    if tree is None:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def referenced_modules(path: Path) -> set[str]:
    """Modules named by a file: its imports and string literals like 'suite.workloads.x' (a worker by
    name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = imported_names(path, tree)
    names.update(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_LITERAL.match(node.value)
    )
    return names


def stage_files(stage: str) -> list[Path]:
    """The stage's folder, suite/stages/<stage>/: every module in it."""
    folder = SUITE_ROOT / "stages" / stage
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def stage_code(stage: str, version: str = "") -> str:
    """The declared version, else sha256 (first 16 hex digits) over the folder's files, by path and
    content."""
    if version:
        return f"version {version}"
    digest = hashlib.sha256()
    for path in stage_files(stage):
        digest.update(path.relative_to(SUITE_ROOT.parent).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def launches_ranks(stage: str) -> bool:
    """Whether the stage's folder names a worker harness or a launcher (RANK_SIDE): the runner then starts the
    warm launcher for it."""
    return any(name.startswith(RANK_SIDE) for path in stage_files(stage) for name in referenced_modules(path))
