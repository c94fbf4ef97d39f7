"""`gpu.launch_func` built by `LaunchFuncOp.of` (the lowering's fast path)
is the op the generic constructor builds, prints, parses back and verifies."""

from __future__ import annotations

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, SymbolRefAttr

import coconet_ir as cc
from coconet_ir.dialects.gpu import LaunchFuncOp


@pytest.mark.parametrize("args", [0, 1, 5])
def test_of_equals_the_generic_constructor(args: int):
    sizes = [arith.ConstantOp(IntegerAttr(n, IndexType())).result for n in (1, 2)]
    grid, block = [sizes[0]] * 3, [sizes[1], sizes[0], sizes[0]]
    operands = [sizes[k % 2] for k in range(args)]
    kernel = SymbolRefAttr("kernels", ["k"])
    fast = LaunchFuncOp.of(kernel, grid, block, operands)
    generic = LaunchFuncOp(kernel, grid, block, kernelOperands=operands)
    fast.verify()
    assert fast.properties == generic.properties
    assert list(fast.operands) == list(generic.operands)
    assert list(fast.kernelOperands) == operands
    assert fast.gridSizeX is sizes[0] and fast.blockSizeX is sizes[1]
    assert fast.clusterSizeX is None and fast.dynamicSharedMemorySize is None
    assert fast.asyncToken is None


def test_a_lowered_launch_round_trips():
    """The launches of a lowered program print and parse back unchanged."""
    module = cc.parse(
        "func.func @f(%a: !coco.tensor<8xf32, replicated>)"
        " -> !coco.tensor<8xf32, replicated> {\n"
        "  %b = coco.exp %a : (!coco.tensor<8xf32, replicated>)"
        " -> !coco.tensor<8xf32, replicated>\n"
        "  func.return %b : !coco.tensor<8xf32, replicated>\n}"
    )
    lowered = cc.Pipeline("convert-coco-to-gpu{world=2}").apply(module)
    text = cc.to_text(lowered)
    assert "gpu.launch_func" in text
    assert cc.to_text(cc.parse(text)) == text
