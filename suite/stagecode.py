"""A fingerprint of the code that measures a stage, recorded per stage in manifest.json (`stage_code`).

Two runs whose stage_code differ for a stage were measured by different code, so `python -m reports
compare` marks that stage "not comparable" instead of calling the difference a regression. The
fingerprint covers the stage module and every suite module it reaches — by import or by name
(ctx.torchrun("suite.workloads.x")), followed transitively: workloads, costmodel, parsers, stage helpers.
The plumbing (PLUMBING: runner, results, config, launch, …) is left out: the schema has its own
version and the profile is recorded whole, so a change there does not make every old run incomparable.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

SUITE_ROOT = Path(__file__).resolve().parent
PLUMBING = frozenset({
    "suite", "suite.__main__", "suite.runner", "suite.results", "suite.config", "suite.launch.torchrun", "suite.context",
    "suite.progress", "suite.launch.procs", "suite.verdicts", "suite.values", "suite.stagecode", "suite.stages",
    "suite.commands", "suite.workloads.worker", "suite.launch.forklaunch", "suite.launch.zygote",
})
MODULE_LITERAL = re.compile(r"^suite(?:\.\w+)+$")


def module_path(name: str) -> Path | None:
    """suite.workloads.sweep → suite/workloads/sweep.py (or the package's __init__.py); None if absent."""
    parts = name.split(".")
    if parts[0] != "suite":
        return None
    base = SUITE_ROOT.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


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


_REFERENCES: dict[tuple[Path, Path], tuple[str, frozenset[str]]] = {}
"""(suite root, file) → (the text it was parsed from, its references): a run fingerprints every stage, and the
stages share most of their files; a file whose text changed is parsed again."""


def referenced_modules(path: Path) -> set[str]:
    """Modules named by a file: its imports (relative ones resolved) and string literals like 'suite.workloads.x'."""
    text = path.read_text(encoding="utf-8")
    cached = _REFERENCES.get((SUITE_ROOT, path))
    if cached is not None and cached[0] == text:
        return set(cached[1])
    tree = ast.parse(text, filename=str(path))
    names = imported_names(path, tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_LITERAL.match(node.value):
            names.add(node.value)
    found = {n for n in names if n.startswith("suite.") and n not in PLUMBING and not n.startswith("suite.commands.")}
    _REFERENCES[(SUITE_ROOT, path)] = (text, frozenset(found))
    return found


def stage_files(stage: str) -> list[Path]:
    start = module_path(f"suite.stages.{stage}")
    if start is None:
        return []
    seen, todo = {start}, [start]
    while todo:
        for name in referenced_modules(todo.pop()):
            path = module_path(name)
            if path is not None and path not in seen:
                seen.add(path)
                todo.append(path)
    return sorted(seen)


def stage_code(stage: str) -> str:
    """sha256 (first 16 hex digits) over the stage's measuring files, by relative path and content."""
    digest = hashlib.sha256()
    for path in stage_files(stage):
        digest.update(path.relative_to(SUITE_ROOT.parent).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
