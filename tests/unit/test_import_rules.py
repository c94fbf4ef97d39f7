"""The layering of docs/architecture.md: what each package of coconet_ir may
import from coconet_ir (imports inside functions count too), and no import
circle between its modules."""

from __future__ import annotations

import ast
from functools import cache
from itertools import pairwise
from pathlib import Path

import networkx as nx
import pytest
from helpers import ROOT

PACKAGE = ROOT / "coconet_ir"

LOWER = ("diagnostics", "dialects", "analysis", "ir")
ALLOWED: dict[str, tuple[str, ...]] = {
    "diagnostics": (),
    "dialects": ("diagnostics", "dialects"),
    "analysis": ("diagnostics", "dialects", "analysis"),
    "ir": ("diagnostics", "dialects", "analysis"),
    "costmodel": ("diagnostics", "dialects", "analysis", "costmodel"),
    "passes": (*LOWER, "costmodel", "passes"),
    "interpreter": (*LOWER, "interpreter"),
    "lowering": (*LOWER, "costmodel", "passes", "lowering"),
    "backend": (*LOWER, "backend"),
    "triton": ("diagnostics", "triton"),
}
"""Package → the packages it may import; the API and tools layers (universe,
pipeline, dsl, schedule, tools, the package itself) may import anything."""


def part(module: str) -> str:
    """The top-level part of coconet_ir a dotted module name lies in."""
    return module.removeprefix("coconet_ir.").split(".", 1)[0]


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    return ".".join(relative.parts).removesuffix(".__init__")


def is_module(name: str) -> bool:
    """Whether the dotted name is a module or package of coconet_ir."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported(path: Path) -> set[str]:
    """The coconet_ir modules `path` imports, anywhere in the file: `from P
    import m` imports the module `P.m` when there is one, else `P`."""
    found: set[str] = set()
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if is_module(child) else base)
    return {m for m in found if m.startswith("coconet_ir.")}


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if part(module_name(p)) in ALLOWED)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_imports_follow_the_layers(path: Path):
    layer = part(module_name(path))
    broken = sorted(m for m in imported(path) if part(m) not in ALLOWED[layer])
    assert not broken, f"{module_name(path)} ({layer}) imports {broken}"


def test_the_rules_see_imports():
    """The checker finds lazy and relative imports (it cannot pass vacuously)."""
    assert "coconet_ir.dialects.coco.canonicalization" in imported(
        PACKAGE / "dialects" / "coco" / "ops.py"
    )
    assert "coconet_ir.analysis.channels" in imported(PACKAGE / "ir.py")
    assert {"dialects", "passes", "interpreter", "analysis"} <= {
        part(module_name(p)) for p in SOURCES
    }


# ----------------------------------------------------------------------------
# No import circle
# ----------------------------------------------------------------------------

ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset(
    {
        # the coco dialect's canonicalization patterns, imported lazily by
        # the ops' `get_canonicalization_patterns` (xDSL's and MLIR's habit)
        frozenset(
            {
                "coconet_ir.dialects.coco.ops",
                "coconet_ir.dialects.coco.canonicalization",
            }
        ),
    }
)
"""The only import circles coconet_ir may have (each the set of its modules)."""

ALL_SOURCES = sorted(PACKAGE.rglob("*.py"))


@cache
def import_graph() -> nx.DiGraph[str]:
    """Module → the coconet_ir modules it imports (lazy imports included);
    shared by the tests, which must not change it."""
    graph: nx.DiGraph[str] = nx.DiGraph()
    for path in ALL_SOURCES:
        name = module_name(path)
        graph.add_node(name)
        graph.add_edges_from((name, m) for m in imported(path) if m != name)
    return graph


def circles(graph: nx.DiGraph[str]) -> list[frozenset[str]]:
    """The import circles of `graph`: its strongly connected components of
    more than one module."""
    return [frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def describe(graph: nx.DiGraph[str], circle: frozenset[str]) -> str:
    """A shortest cycle through the first module of `circle` (by name),
    `a -> b -> a`, and all its modules: the same text on every run."""
    inner = graph.subgraph(circle)
    start = min(circle)
    back = min(
        (nx.shortest_path(inner, after, start) for after in sorted(inner[start])),
        key=len,
    )
    path = " -> ".join([start, *back])
    return f"{path}  (all of {sorted(circle)})"


def test_no_import_cycles():
    graph = import_graph()
    found = [c for c in circles(graph) if c not in ALLOWED_CYCLES]
    assert not found, "import circles in coconet_ir:\n" + "\n".join(
        describe(graph, c) for c in found
    )


def test_the_cycle_check_sees_cycles():
    """The allowed circle is found (lazy imports count), so the check cannot
    pass vacuously; a circle is named by its modules."""
    graph = import_graph().copy()
    assert ALLOWED_CYCLES <= set(circles(graph))
    graph.add_edge("coconet_ir.diagnostics", "coconet_ir.ir")
    broken = [c for c in circles(graph) if "coconet_ir.diagnostics" in c]
    assert broken
    path = describe(graph, broken[0]).split("  (all of")[0].split(" -> ")
    assert path[0] == path[-1] == min(broken[0])
    assert all(graph.has_edge(a, b) for a, b in pairwise(path))
