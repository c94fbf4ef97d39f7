"""The reference interpreter: numpy, N simulated ranks, the oracle every
transformation is checked against.

- `interpret(module, world, inputs=None, seed=0, entry=None) -> RunResult`
- `equivalent(a, b, world, seed=0, rtol=None, atol=None, entry=None) -> Comparison`
  (raises `NotComparable`, a CocoError, when the signatures differ)
- `draw_inputs(module, world, seed=0, entry=None)`: the inputs a run draws
- `philox4x32_10`, `dropout_uniform`: the dropout generator
  (docs/interpreter.md, "Dropout")
- `register_functions`, `DistValue`, `stage_context`: for modules that add the
  rules of their own ops (fusion and chunked regions).

See docs/interpreter.md for the semantics decisions.
"""

from coconet_ir.interpreter.compare import (
    Comparison,
    Difference,
    NotComparable,
    equivalent,
)
from coconet_ir.interpreter.context import StageContext, stage_context
from coconet_ir.interpreter.inputs import draw_inputs
from coconet_ir.interpreter.ops import CocoFunctions
from coconet_ir.interpreter.philox import dropout_uniform, philox4x32_10
from coconet_ir.interpreter.runner import (
    Output,
    RunResult,
    interpret,
    register_functions,
)
from coconet_ir.interpreter.values import DistValue

__all__ = [
    "CocoFunctions",
    "Comparison",
    "Difference",
    "DistValue",
    "NotComparable",
    "Output",
    "RunResult",
    "StageContext",
    "draw_inputs",
    "dropout_uniform",
    "equivalent",
    "interpret",
    "philox4x32_10",
    "register_functions",
    "stage_context",
]
