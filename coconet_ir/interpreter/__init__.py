"""The reference interpreter: numpy, N simulated ranks, the oracle every
transformation is checked against.

- `interpret(module, world, inputs=None, seed=0, entry=None) -> RunResult`
- `equivalent(a, b, world, seed=0, rtol=None, atol=None, entry=None) -> Comparison`
  (raises `NotComparable`, a CocoError, when the signatures differ); both run
  promoted (`interpret(..., promoted=True)`: f32 held and computed as f64)
- `compare_outputs(reference, actual, element_type, reduction_length=K,
  magnitude=None)`, `reduction_tolerance`, `matmul_magnitude`: compare
  real-arithmetic results summed in another order (the GPU, its emulation)
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
    compare_outputs,
    equivalent,
    matmul_magnitude,
    reduction_tolerance,
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
    "compare_outputs",
    "draw_inputs",
    "dropout_uniform",
    "equivalent",
    "interpret",
    "matmul_magnitude",
    "philox4x32_10",
    "reduction_tolerance",
    "register_functions",
    "stage_context",
]
