"""Reductions and norms on the CPU emulation (docs/gpu/device.md, "Reductions"):
a block per output (strided partials, then a shared-memory tree) when each
output reduces at least a block's worth of elements, a thread per output
otherwise; both give the interpreter's results, for block sizes that are
and are not powers of two, for halves (f32 accumulation) and for max/min
over negative values (the identity is -inf/+inf, not 0). Integer matmuls,
which cuBLAS has no GEMM for, are a kernel of their own."""
# ruff: noqa: E501  (IR lines)

from __future__ import annotations

import numpy as np
import pytest

import coconet_ir as cc
from coconet_ir.emulate import compare_runs, emulate

REDUCTIONS = """
module attributes {coco.world_size = 2 : i64} {
  func.func @reductions(%a: !coco.tensor<64x300xf32, replicated>,
                        %h: !coco.tensor<6x700xf16, sliced<0>>,
                        %g: !coco.tensor<300x5xbf16, replicated>)
      -> (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>,
          !coco.tensor<300xf32, replicated>, !coco.tensor<6xf16, sliced<0>>,
          !coco.tensor<5xbf16, replicated>, !coco.tensor<f16, local>) {
    %norm = coco.norm %a : (!coco.tensor<64x300xf32, replicated>) -> !coco.tensor<f32, replicated>
    %rows = coco.reduce %a kind = max dims = [1] : (!coco.tensor<64x300xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %cols = coco.reduce %a kind = sum dims = [0] : (!coco.tensor<64x300xf32, replicated>) -> !coco.tensor<300xf32, replicated>
    %hsum = coco.reduce %h kind = sum dims = [1] : (!coco.tensor<6x700xf16, sliced<0>>) -> !coco.tensor<6xf16, sliced<0>>
    %gmin = coco.reduce %g kind = min dims = [0] : (!coco.tensor<300x5xbf16, replicated>) -> !coco.tensor<5xbf16, replicated>
    %hall = coco.reduce %h kind = max dims = [0, 1] : (!coco.tensor<6x700xf16, sliced<0>>) -> !coco.tensor<f16, local>
    func.return %norm, %rows, %cols, %hsum, %gmin, %hall : !coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>, !coco.tensor<300xf32, replicated>, !coco.tensor<6xf16, sliced<0>>, !coco.tensor<5xbf16, replicated>, !coco.tensor<f16, local>
  }
}
"""


def negative_inputs(module, world: int) -> dict[str, np.ndarray]:
    """The interpreter's inputs for `module`, all made negative: a max whose
    identity were 0 would return 0."""
    return {
        key: -np.abs(value) - 0.5
        for key, value in cc.interpret(module, world, seed=3).inputs.items()
    }


@pytest.mark.parametrize("threads", [32, 48, 256])
def test_reductions_match_the_interpreter(threads: int) -> None:
    module = cc.parse(REDUCTIONS)
    inputs = negative_inputs(module, 2)
    reference = cc.interpret(module, 2, inputs=inputs)
    emulated = emulate(module, 2, passes="", inputs=inputs, threads=threads)
    verdict = compare_runs(reference, emulated, module)
    assert verdict, verdict.first_difference
    row_max = emulated.outputs["reductions.result1"].value
    assert (row_max < 0).all()  # not a max with 0


def test_block_reductions_launch_one_kernel_each() -> None:
    module = cc.parse(REDUCTIONS)
    emulated = emulate(module, 2, passes="", threads=64)
    assert emulated.stats is not None
    assert emulated.stats.total_launches == 6


INT_MATMUL = """
module attributes {coco.world_size = 4 : i64} {
  func.func @imatmul(%x: !coco.tensor<3x8x1024xi32, sliced<2>>,
                     %w: !coco.tensor<1024x12xi32, sliced<0>>) -> !coco.tensor<3x8x12xi32, replicated> {
    %p = coco.matmul %x, %w : (!coco.tensor<3x8x1024xi32, sliced<2>>, !coco.tensor<1024x12xi32, sliced<0>>) -> !coco.tensor<3x8x12xi32, local>
    %s = coco.all_reduce %p reduction = sum : !coco.tensor<3x8x12xi32, local> -> !coco.tensor<3x8x12xi32, replicated>
    func.return %s : !coco.tensor<3x8x12xi32, replicated>
  }
}
"""


def test_integer_matmul_is_exact() -> None:
    """K = 1024 split over 4 ranks, then an all-reduce: integers are exact,
    so the emulation equals the interpreter bit for bit."""
    module = cc.parse(INT_MATMUL)
    reference = cc.interpret(module, 4, seed=1)
    emulated = emulate(module, 4, passes="", seed=1, threads=64)
    for key, expected in reference.outputs.items():
        np.testing.assert_array_equal(emulated.outputs[key].value, expected.value, key)
