"""The shape of the tree, read from its source with ast: no import cycle, no stage importing another
stage, a cost model that takes numbers only, parsers that import no verdict rules."""

from __future__ import annotations

import ast

from suite.stagecode import SUITE_ROOT as SUITE
from suite.stagecode import imported_names, module_name

MODULES = {module_name(p): p for p in sorted(SUITE.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """Every suite module `name` imports (suite/stagecode.py's reading of its source), its own packages left
    out: `from . import _nccl_tests` imports suite.stages._nccl_tests, and suite.stages only as Python always
    does."""
    own_packages = {name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)}
    return {m for m in imported_names(MODULES[name]) if m in MODULES and m != name and m not in own_packages}


GRAPH = {name: imports(name) for name in MODULES}


def cycles() -> list[list[str]]:
    """Each import cycle once, as the path that closes it (depth-first over the graph)."""
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    return found


def is_stage(name: str) -> bool:
    """suite.stages.<name>: a stage; helper modules of the stages start with an underscore."""
    head, _, leaf = name.rpartition(".")
    return head == "suite.stages" and not leaf.startswith("_")


def test_the_walk_sees_the_tree():
    assert len(MODULES) > 50
    assert "suite.stages._nccl_tests" in GRAPH["suite.stages.bandwidth"]  # `from . import _nccl_tests`
    assert "suite.facts" in GRAPH["suite.stages.crossover"]  # `from ..facts import alpha_beta`
    assert sum(is_stage(m) for m in MODULES) >= 10


def test_no_import_cycle():
    assert cycles() == []


def test_no_stage_imports_another_stage():
    crossing = sorted((a, b) for a in MODULES if is_stage(a) for b in GRAPH[a] if is_stage(b))
    assert crossing == []


def test_the_cost_model_takes_numbers_only():
    costmodel = [m for m in MODULES if m.startswith("suite.costmodel.")]
    assert len(costmodel) >= 4
    allowed = {"suite.costmodel", "suite.dtypes", "suite.config"}  # config: GptConfig's shape for sizing
    reaching = sorted(
        (m, dep)
        for m in costmodel
        for dep in GRAPH[m]
        if not dep.startswith("suite.costmodel.") and dep not in allowed
    )
    assert reaching == []
    profiles = [
        m
        for m in costmodel
        if "Profile" in {n.id for n in ast.walk(ast.parse(MODULES[m].read_text())) if isinstance(n, ast.Name)}
    ]
    assert profiles == []  # no Profile in the cost model: numbers in, numbers out
    takes_facts = [
        f"{m}.{f.name}"
        for m in costmodel
        for f in ast.walk(ast.parse(MODULES[m].read_text()))
        if isinstance(f, ast.FunctionDef) and any(a.arg in ("facts", "profile") for a in f.args.args)
    ]
    assert takes_facts == []  # nor a facts dict: suite/facts.py reads them and passes the numbers on


def test_parsers_return_parses_only():
    parsers = [m for m in MODULES if m.startswith("suite.parsers")]
    assert len(parsers) >= 5
    assert sorted((m, d) for m in parsers for d in GRAPH[m] if d.startswith("suite.stages")) == []
