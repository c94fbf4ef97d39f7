"""Map kernels through the `triton` target (docs/triton.md, "Map kernels"):
random elementwise programs (`strategies.elementwise_programs`: arithmetic,
conversions between f32/f16/bf16/f64, select, dropout's Philox, i32)
printed as Triton kernels over blocks and run under Triton's interpreter
match the reference interpreter; a one-line bug in the op table is caught;
a kernel of several grid-stride loops (a concat's pieces) runs them side by
side; a kernel of another shape is refused by name."""

# ruff: noqa: E501  (the programs are MLIR text, one op a line)
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from hypothesis import HealthCheck, Phase, assume, given, settings
from strategies import Program, elementwise_programs, scaled_examples
from xdsl.dialects import arith

import coconet_ir as cc
from coconet_ir.backend.triton import elementwise
from coconet_ir.backend.triton.printer import emit_triton
from coconet_ir.dialects import coco
from coconet_ir.emulate import compare_runs, lower, run_triton
from coconet_ir.interpreter import interpret


def agrees(module: cc.ModuleOp, world: int, rtol: float, atol: float) -> bool:
    got = run_triton(module, world, passes="")
    reference = interpret(module, world, inputs=got.inputs)
    return all(
        np.allclose(
            got.outputs[key].value.astype(np.float64),
            output.value.astype(np.float64),
            rtol=rtol,
            atol=atol,
            equal_nan=True,
        )
        for key, output in reference.outputs.items()
    )


@settings(
    max_examples=scaled_examples(10),
    deadline=None,
    # a run is a process per rank and a fresh Triton module: shrinking a
    # failure for minutes would pass CI's budget; the failing program is shown
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(program=elementwise_programs(max_steps=5))
def test_random_elementwise_programs_match_the_interpreter(program: Program) -> None:
    assume(not any(isinstance(op, coco.CollectiveOp) for op in program.module.walk()))
    assert agrees(program.module, 2, program.rtol, program.atol), program


CHAIN = """
func.func @chain(%x: !coco.tensor<64x32xbf16, replicated>, %b: !coco.tensor<32xbf16, replicated>,
                 %r: !coco.tensor<64x32xf32, replicated>) -> !coco.tensor<64x32xf32, replicated> {
  %y = coco.add %x, %b : (!coco.tensor<64x32xbf16, replicated>, !coco.tensor<32xbf16, replicated>) -> !coco.tensor<64x32xbf16, replicated>
  %g = coco.gelu %y : (!coco.tensor<64x32xbf16, replicated>) -> !coco.tensor<64x32xbf16, replicated>
  %d = coco.dropout %g p = 1.000000e-01 seed = 3000000000 : (!coco.tensor<64x32xbf16, replicated>) -> !coco.tensor<64x32xbf16, replicated>
  %f = coco.convert %d : (!coco.tensor<64x32xbf16, replicated>) -> !coco.tensor<64x32xf32, replicated>
  %s = coco.sub %r, %f : (!coco.tensor<64x32xf32, replicated>, !coco.tensor<64x32xf32, replicated>) -> !coco.tensor<64x32xf32, replicated>
  func.return %s : !coco.tensor<64x32xf32, replicated>
}
"""
"""Bias, GELU, dropout (a seed past 2^31), a conversion, a residual."""


def matches(module: cc.ModuleOp, world: int) -> bool:
    """As `coconet-run --check` compares (the module's own tolerances)."""
    got = run_triton(module, world, passes="")
    reference = interpret(module, world, inputs=got.inputs)
    return compare_runs(reference, got, module).ok


def test_bias_gelu_dropout_residual_matches_the_interpreter() -> None:
    assert matches(cc.parse(CHAIN), 2)


def test_a_one_line_bug_in_the_op_table_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(elementwise.INFIX, arith.SubfOp, "+")
    assert not matches(cc.parse(CHAIN), 2)


PACK = """
func.func @pack(%a: !coco.tensor<4x8xf32, local>, %b: !coco.tensor<16xf32, local>,
                %c: !coco.tensor<4xf32, local>) -> !coco.tensor<52xf32, local> {
  %n = coco.neg %a : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<4x8xf32, local>
  %flat = coco.concat %n, %b, %c {name = "bucket0"} : (!coco.tensor<4x8xf32, local>, !coco.tensor<16xf32, local>, !coco.tensor<4xf32, local>) -> !coco.tensor<52xf32, local>
  func.return %flat : !coco.tensor<52xf32, local>
}
"""


def test_a_kernel_of_several_loops_runs_them_side_by_side() -> None:
    module = cc.parse(PACK)
    text = emit_triton(lower(module, 2, passes="").device)
    assert "inside2 = i2 < 4" in text  # the third piece's loop
    assert "pack_bucket0_0[(triton.cdiv(max(32, 16, 4), 1024),)](" in text
    assert agrees(module, 2, 0.0, 0.0)
