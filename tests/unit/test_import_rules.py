"""The layering of docs/architecture.md: what each package of coconet_ir may
import from coconet_ir (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

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
    "lowering": (*LOWER, "passes", "lowering"),
    "backend": (*LOWER, "backend"),
}
"""Package → the packages it may import; the API and tools layers (universe,
pipeline, dsl, schedule, tools, the package itself) may import anything."""


def part(module: str) -> str:
    """The top-level part of coconet_ir a dotted module name lies in."""
    return module.removeprefix("coconet_ir.").split(".", 1)[0]


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    return ".".join(relative.parts).removesuffix(".__init__")


def imported(path: Path) -> set[str]:
    """The coconet_ir modules `path` imports, anywhere in the file."""
    found: set[str] = set()
    package = module_name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            if base == "coconet_ir":  # `from coconet_ir import ir`
                found.update(f"coconet_ir.{alias.name}" for alias in node.names)
            else:
                found.add(base)
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
