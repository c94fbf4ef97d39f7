"""`gpu.launch_func` built by `LaunchFuncOp.of` (the lowering's fast path)
is the op the generic constructor builds, prints, parses back and verifies."""

from __future__ import annotations

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, SymbolRefAttr

import coconet_ir as cc
from coconet_ir.dialects.gpu import LaunchFuncOp, launch_parts


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
    parts = launch_parts(generic)
    assert parts.grid == tuple(grid) and parts.block == tuple(block)
    assert parts.shared is None and parts.args == tuple(operands)


def test_launch_parts_reads_every_segment():
    """With clusters and a dynamic shared memory size too."""
    sizes = [arith.ConstantOp(IntegerAttr(n, IndexType())).result for n in range(8)]
    op = LaunchFuncOp(
        SymbolRefAttr("kernels", ["k"]),
        sizes[0:3],
        sizes[3:6],
        clusterSize=sizes[5:8],
        kernelOperands=sizes[1:3],
        dynamicSharedMemorySize=sizes[7],
    )
    parts = launch_parts(op)
    assert parts.grid == tuple(sizes[0:3]) and parts.block == tuple(sizes[3:6])
    assert parts.shared is sizes[7] and parts.args == tuple(sizes[1:3])


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


def test_a_launch_built_by_of_still_verifies_its_sizes():
    """The shortcut of `verify_` still refuses a size that is not an
    integer, and a property added after; other launches get IRDL's checks."""
    from xdsl.dialects.builtin import FloatAttr, UnitAttr, f32
    from xdsl.utils.exceptions import VerifyException

    one = arith.ConstantOp(IntegerAttr(1, IndexType())).result
    half = arith.ConstantOp(FloatAttr(0.5, f32)).result
    kernel = SymbolRefAttr("kernels", ["k"])
    with pytest.raises(VerifyException):
        LaunchFuncOp.of(kernel, [half, one, one], [one] * 3, []).verify()
    extra = LaunchFuncOp.of(kernel, [one] * 3, [one] * 3, [one])
    extra.properties["stray"] = UnitAttr()
    with pytest.raises(VerifyException):
        extra.verify()
    with pytest.raises(VerifyException):
        LaunchFuncOp(kernel, [half, one, one], [one] * 3).verify()
