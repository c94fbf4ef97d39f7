"""The dropout generator lowered to arith ops gives the interpreter's mask:
the Philox4x32-10 chain is evaluated here on Python integers, op by op."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, IntegerType, i64
from xdsl.ir import Block, SSAValue
from xdsl.rewriter import InsertPoint

from coconet_ir.interpreter.philox import dropout_uniform
from coconet_ir.lowering.kernels import dropout_scale
from coconet_ir.lowering.philox import dropout_keep, keep_threshold


def evaluate(block: Block, result: SSAValue, inputs: dict[SSAValue, int]) -> int:
    """The unsigned value of `result` after running the block's arith ops."""
    values = dict(inputs)

    def width(v: SSAValue) -> int:
        assert isinstance(v.type, IntegerType)
        return v.type.width.data

    def get(v: SSAValue) -> int:
        return values[v] % (1 << width(v))

    for op in block.ops:
        out = op.results
        mask = (1 << width(out[0])) - 1
        if isinstance(op, arith.ConstantOp):
            assert isinstance(op.value, IntegerAttr)
            values[out[0]] = op.value.value.data & mask
        elif isinstance(op, arith.TruncIOp):
            values[out[0]] = get(op.input) & mask
        elif isinstance(op, arith.ShRUIOp):
            values[out[0]] = get(op.lhs) >> get(op.rhs)
        elif isinstance(op, arith.XOrIOp):
            values[out[0]] = get(op.lhs) ^ get(op.rhs)
        elif isinstance(op, arith.MulUIExtendedOp):
            product = get(op.lhs) * get(op.rhs)
            values[out[0]] = product & mask
            values[out[1]] = product >> width(out[0])
        elif isinstance(op, arith.AddiOp):
            values[out[0]] = (get(op.lhs) + get(op.rhs)) & mask
        elif isinstance(op, arith.CmpiOp):
            assert op.predicate.value.data == 9  # uge
            values[out[0]] = int(get(op.lhs) >= get(op.rhs))
        else:
            raise AssertionError(f"unexpected {op.name}")
    return values[result]


@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_mask_matches_the_interpreter(seed: int, p: float):
    block = Block(arg_types=[i64])
    keep = dropout_keep(Builder(InsertPoint.at_end(block)), seed, p, block.args[0])
    indices = [0, 1, 2, 255, 1023, 2**32 + 5]
    expected = dropout_uniform(seed, np.array(indices)) >= p
    got = [bool(evaluate(block, keep, {block.args[0]: i})) for i in indices]
    assert got == list(expected)


@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3, 2**63 - 1])
def test_mask_with_the_seed_as_a_value_matches_the_interpreter(seed: int):
    """A map kernel takes the seed as an i64 argument: the key schedule is
    computed (`arith.addi`, wrapping) rather than folded, with the same mask."""
    block = Block(arg_types=[i64, i64])
    index, seed_value = block.args
    keep = dropout_keep(Builder(InsertPoint.at_end(block)), seed_value, 0.3, index)
    indices = [0, 1, 2, 255, 1023, 2**32 + 5]
    expected = dropout_uniform(seed, np.array(indices)) >= 0.3
    got = [bool(evaluate(block, keep, {index: i, seed_value: seed})) for i in indices]
    assert got == list(expected)
    assert any(isinstance(op, arith.AddiOp) for op in block.ops)


def test_threshold_is_exact():
    assert keep_threshold(0.25) == 1 << 22
    assert keep_threshold(0.0) == 0
    k = keep_threshold(0.1)
    assert (k - 1) * 2.0**-24 < 0.1 <= k * 2.0**-24


def test_scale_is_rounded_like_the_interpreter():
    from xdsl.dialects.builtin import f16, f32

    assert dropout_scale(0.1, f16) == float(np.float16(0.9))
    assert dropout_scale(0.1, f32) == float(np.float32(0.9))
