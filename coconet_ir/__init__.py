"""coconet-ir: CoCoNet's distributed programs as an MLIR-style IR on xDSL.

`import coconet_ir as cc` gives the whole Python API:

- `cc.parse(text)`, `cc.parse_file(path)`, `cc.to_text(module, generic=False)`,
  `cc.verify(module)` (from `coconet_ir.ir`);
- `cc.interpret(module, world=N, inputs=None, seed=0)` and
  `cc.equivalent(a, b, world=N)` (from `coconet_ir.interpreter`);
- `cc.Pipeline("coco-split-all-reduce,coco-reorder")` (from `coconet_ir.pipeline`)
  and `cc.Schedule(module)` (from `coconet_ir.schedule`);
- `cc.autotune(module, machine="h100x8", world=None)`, the cost model's pick
  among candidate schedules (from `coconet_ir.passes.autotune`);
- `cc.grad(program, entry=None)`: a module of the function's derived
  backward (from `coconet_ir.passes.grad`, the `coco-grad` pass);
- `cc.remarks_to(handler)`: the optimization remarks of the passes run in a
  `with` block (from `coconet_ir.diagnostics`);
- the builder DSL: `cc.tensor`, `cc.function`, `cc.all_reduce`, `cc.matmul`, ...
  (from `coconet_ir.dsl`).

Names are resolved lazily, so importing the package (as the command-line tools
do) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBMODULES = {
    "analysis",
    "diagnostics",
    "dialects",
    "dsl",
    "interpreter",
    "ir",
    "passes",
    "pipeline",
    "schedule",
    "tools",
    "universe",
}

_HOMES = {
    **dict.fromkeys(
        ("parse", "parse_file", "to_text", "verify", "CocoError", "make_context"),
        "ir",
    ),
    **dict.fromkeys(
        ("interpret", "equivalent", "draw_inputs", "RunResult", "Output", "Comparison"),
        "interpreter",
    ),
    "Pipeline": "pipeline",
    "autotune": "passes.autotune",
    "grad": "passes.grad",
    "Schedule": "schedule",
    "Handle": "schedule",
    **dict.fromkeys(
        ("CocoWarning", "remarks_to", "Remark", "RemarkFilter", "RemarkKind"),
        "diagnostics",
    ),
}
"""Public names and the submodule each lives in; the rest come from the DSL."""


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"coconet_ir.{name}")
    if name in _HOMES:
        return getattr(importlib.import_module(f"coconet_ir.{_HOMES[name]}"), name)
    dsl = importlib.import_module("coconet_ir.dsl")
    if name in dsl.__all__:
        return getattr(dsl, name)
    raise AttributeError(f"module 'coconet_ir' has no attribute '{name}'")
