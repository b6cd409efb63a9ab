"""The house's shape across suite/, provisioning/ and reports/, read from the source with ast: no import cycle
(imports inside functions count), no module over 400 lines, and every package's __init__ says in its first three
lines what lives there and what may import it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("suite", "provisioning", "reports")
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for top in PACKAGES for p in sorted((REPO / top).rglob("*.py"))}


def imported(name: str) -> set[str]:
    """The house's modules `name` imports anywhere in its file (relative imports resolved; `from a import b` names
    a.b when b is a module), its own packages left out: Python imports those before the module itself."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                base = ".".join(anchor[: len(anchor) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    own = {name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)}
    return {m for m in found if m in MODULES and m != name and m not in own}


GRAPH = {name: imported(name) for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import cycle once, as the path that closes it: [a, b, a] for a ↔ b."""
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return found


def test_the_walk_sees_every_package_and_the_imports_inside_functions():
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert len(MODULES) > 100
    # suite/runner.py imports warm_imports inside preload_torch: a function-level import is an edge
    assert "suite.launch.zygote" in GRAPH["suite.runner"]
    # a relative `from . import x` inside a package resolves to the sibling module
    assert "suite.stages._probe" in GRAPH["suite.stages.bandwidth"]


def test_the_cycle_finder_finds_a_cycle_and_names_it():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_suite_provisioning_reports():
    found = cycles(GRAPH)
    assert found == [], "import cycles: " + "; ".join(" → ".join(c) for c in found)


def test_no_module_over_400_lines():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines (split them by job): {long}"


def test_every_package_init_says_what_lives_there_and_who_may_import_it():
    packages = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")
    assert {"suite", "suite.stages", "suite.launch", "suite.cluster", "reports", "provisioning"} <= set(packages)
    lacking = []
    for name in packages:
        doc = ast.get_docstring(ast.parse(MODULES[name].read_text(encoding="utf-8")), clean=False) or ""
        head = doc.strip("\n").split("\n")[:3]
        if len(head) < 3 or any(not line.strip() for line in head) or "import" not in " ".join(head).lower():
            lacking.append(name)
    assert lacking == [], ("these packages' __init__ docstrings do not say in their first three lines what lives "
                           f"there and what may import it: {lacking}")
