"""The house's shape across suite/, provisioning/ and reports/, read from the source with ast: no import cycle
(imports inside functions count), no module over 300 logical lines, every package's __init__ says in its first
three lines what lives there and what may import it, and a stage is one folder: no code only one stage uses
lives outside it."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("cardtime", "suite", "provisioning", "reports")
# Logical lines (statements, however the formatter wraps them): a module's size, not its layout.
MAX_LOGICAL_LINES = 300


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for top in PACKAGES for p in sorted((REPO / top).rglob("*.py"))}


def imported(name: str) -> set[str]:
    """The house's modules `name` imports anywhere in its file (relative imports resolved; `from a import b`
    names a.b when b is a module), its own packages left out: Python imports those before the module
    itself."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                base = ".".join(
                    anchor[: len(anchor) - (node.level - 1)] + ([node.module] if node.module else [])
                )
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
                found.append(path[path.index(nxt) :] + [nxt])
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


def logical_lines(source: str) -> int:
    return sum(
        1 for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.NEWLINE
    )


def test_logical_lines_count_statements_not_their_wrapping():
    assert logical_lines("x = f(\n    1,\n    2,\n)\n# a comment\ny = 2\n") == 2


def test_no_module_over_300_logical_lines():
    long = {
        name: n
        for name, path in MODULES.items()
        if (n := logical_lines(path.read_text(encoding="utf-8"))) > MAX_LOGICAL_LINES
    }
    assert long == {}, f"modules over {MAX_LOGICAL_LINES} logical lines (split them by job): {long}"


def test_every_package_init_says_what_lives_there_and_who_may_import_it():
    packages = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")
    assert {"suite", "suite.stages", "suite.launch", "suite.cluster", "reports", "provisioning"} <= set(
        packages
    )
    lacking = []
    for name in packages:
        doc = ast.get_docstring(ast.parse(MODULES[name].read_text(encoding="utf-8")), clean=False) or ""
        head = doc.strip("\n").split("\n")[:3]
        if len(head) < 3 or any(not line.strip() for line in head) or "import" not in " ".join(head).lower():
            lacking.append(name)
    assert lacking == [], (
        "these packages' __init__ docstrings do not say in their first three lines what lives "
        f"there and what may import it: {lacking}"
    )


# ---------------------------------------------------------------- a stage is one folder

LIBRARIES = ("suite.costmodel", "suite.parsers", "suite.hardware")
"""Shared libraries by kind — the model, the parsers proven on real captures, the GPU tables — a module there
is a library even where one stage alone uses it today."""


def references(name: str) -> set[str]:
    """What `name` imports, and the modules it names as text (`ctx.torchrun("suite.stages.tp.worker", …)`)."""
    named = {
        node.value
        for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES
    }
    return GRAPH[name] | (named - {name})


def stage_of(name: str) -> str | None:
    """The stage whose folder holds `name` (suite.stages.<stage> and what is under it), else None."""
    parts = name.split(".")
    if (
        parts[:2] == ["suite", "stages"]
        and len(parts) > 2
        and MODULES.get(".".join(parts[:3]), Path()).name == "__init__.py"
    ):
        return parts[2]
    return None


def owners(refs=references) -> dict[str, str]:
    """Each module outside every stage's folder and the libraries that only one stage uses, with that stage:
    directly, or through modules that only that stage uses (to a fixpoint). Tests do not count as users."""
    users = {m: set() for m in MODULES}
    for name in MODULES:
        for used in refs(name):
            users[used].add(name)
    owner = {m: stage_of(m) for m in MODULES}
    changed = True
    while changed:
        changed = False
        for m, by in users.items():
            if owner[m] or not by or m.startswith(LIBRARIES):
                continue
            stages = {owner[u] for u in by}
            if len(stages) == 1 and None not in stages:
                owner[m], changed = stages.pop(), True
    return {m: s for m, s in owner.items() if s and stage_of(m) is None}


def test_no_stage_code_lives_outside_its_folder():
    misplaced = owners()
    assert misplaced == {}, (
        "modules only one stage uses live outside its folder (move each to "
        f"suite/stages/<stage>/): {misplaced}"
    )


def test_the_folder_rule_finds_a_module_one_stage_alone_uses():
    name = "suite.workloads.collective_sweep"  # shared: bandwidth, crossover, the cluster sweeps, the probe
    assert name not in owners()
    crossover_alone = lambda m: references(m) - ({name} if stage_of(m) != "crossover" else set())  # noqa: E731
    assert owners(crossover_alone)[name] == "crossover"


def test_every_stage_is_a_folder_with_its_declaration_and_its_figure():
    folders = sorted(p.parent.name for p in (REPO / "suite" / "stages").glob("*/__init__.py"))
    plain = sorted(p.stem for p in (REPO / "suite" / "stages").glob("*.py") if not p.stem.startswith("_"))
    assert plain == [], f"stage modules outside a folder of their own: {plain}"
    assert len(folders) >= 19
    assert [f for f in folders if not (REPO / "suite" / "stages" / f / "figure.py").is_file()] == []
    assert not [
        p
        for p in (REPO / "reports" / "figures").glob("*.py")
        if not p.stem.startswith("_") and p.stem != "__init__"
    ], "a stage's figure module left in reports/figures/"


def test_launch_and_cluster_import_one_way():
    """suite.launch starts ranks on this node; suite.cluster (the ssh, container, srun, mpirun and Slurm
    agents, and multilaunch beside them) builds on it. Nothing in launch/ may import cluster/: the dependency
    runs one way."""
    back = sorted(
        f"{name} → {used}"
        for name in MODULES
        if name.startswith("suite.launch")
        for used in GRAPH[name]
        if used.startswith("suite.cluster")
    )
    assert back == [], f"launch/ imports cluster/: {back}"
    assert any(
        used.startswith("suite.launch")
        for name in MODULES
        if name.startswith("suite.cluster")
        for used in GRAPH[name]
    ), "the rule watches nothing: cluster/ no longer uses launch/"


def test_cluster_holds_the_agents_and_never_a_stages_code():
    """suite.cluster reaches nodes (lists, ssh, containers, srun, mpirun, Slurm, addresses, probes); what a
    stage runs across them lives with the stages, so cluster/ imports no stage and no stage library."""
    into_stages = sorted(
        f"{name} → {used}"
        for name in MODULES
        if name.startswith("suite.cluster")
        for used in GRAPH[name]
        if used.startswith("suite.stages")
    )
    assert into_stages == [], f"cluster/ imports stage code: {into_stages}"
    assert any(used.startswith("suite.cluster") for used in GRAPH["suite.stages.bandwidth.intra_node"])
