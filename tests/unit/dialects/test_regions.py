"""coco.fusion, coco.overlap and coco.yield: verifier rules, the interpreter's
chunk-by-chunk execution, and dropout keeping its global index in a chunk."""

# ruff: noqa: E501  (IR lines)

from __future__ import annotations

import pytest

import coconet_ir as cc
from coconet_ir.analysis.chunks import chunk_dims
from coconet_ir.dialects import coco

PLAIN = """
func.func @f(%a: !coco.tensor<8x16xf32, sliced<1>>, %b: !coco.tensor<16x8xf32, sliced<0>>) -> !coco.tensor<8x8xf32, replicated> {
  %m = coco.matmul %a, %b : (!coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<16x8xf32, sliced<0>>) -> !coco.tensor<8x8xf32, local>
  %r = coco.all_reduce %m reduction = sum : !coco.tensor<8x8xf32, local> -> !coco.tensor<8x8xf32, replicated>
  %d = coco.dropout %r p = 5.000000e-01 seed = 3 : (!coco.tensor<8x8xf32, replicated>) -> !coco.tensor<8x8xf32, replicated>
  func.return %d : !coco.tensor<8x8xf32, replicated>
}
"""

CHUNKED = """
func.func @f(%a: !coco.tensor<8x16xf32, sliced<1>>, %b: !coco.tensor<16x8xf32, sliced<0>>) -> !coco.tensor<8x8xf32, replicated> {
  %o = coco.overlap chunks = 4 (%a, %b) dims = [0, -1] -> [0] : (!coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<16x8xf32, sliced<0>>) -> !coco.tensor<8x8xf32, replicated> {
  ^bb0(%x: !coco.tensor<2x16xf32, sliced<1>>, %y: !coco.tensor<16x8xf32, sliced<0>>):
    %m = coco.matmul %x, %y : (!coco.tensor<2x16xf32, sliced<1>>, !coco.tensor<16x8xf32, sliced<0>>) -> !coco.tensor<2x8xf32, local>
    %r = coco.all_reduce %m reduction = sum : !coco.tensor<2x8xf32, local> -> !coco.tensor<2x8xf32, replicated>
    %d = coco.dropout %r p = 5.000000e-01 seed = 3 : (!coco.tensor<2x8xf32, replicated>) -> !coco.tensor<2x8xf32, replicated>
    coco.yield %d : !coco.tensor<2x8xf32, replicated>
  }
  func.return %o : !coco.tensor<8x8xf32, replicated>
}
"""


@pytest.mark.parametrize("world", [2, 4, 8])
def test_overlap_with_dropout_equals_the_plain_program(world: int) -> None:
    assert cc.equivalent(cc.parse(PLAIN), cc.parse(CHUNKED), world, seed=world)


def test_chunk_dims_follow_the_values() -> None:
    (region,) = [
        op for op in cc.parse(CHUNKED).walk() if isinstance(op, coco.OverlapOp)
    ]
    found = chunk_dims(region.block, region.input_dims.get_values())
    assert found.problem is None
    assert [found.dims[op.results[0]] for op in list(region.block.ops)[:3]] == [0, 0, 0]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("dims = [0, -1] -> [0]", "dims = [1, -1] -> [0]"),
        ("chunks = 4", "chunks = 3"),
        ("coco.yield %d : !coco.tensor<2x8xf32, replicated>", "coco.yield"),
    ],
)
def test_overlap_verifier_rejects_bad_chunking(old: str, new: str) -> None:
    with pytest.raises(cc.CocoError, match=r"coco\.overlap|coco\.yield"):
        cc.parse(CHUNKED.replace(old, new))


def test_yield_outside_a_region_is_rejected() -> None:
    text = """
func.func @f(%a: !coco.tensor<8xf32, replicated>) {
  coco.yield %a : !coco.tensor<8xf32, replicated>
}
"""
    with pytest.raises(cc.CocoError, match=r"coco\.yield"):
        cc.parse(text)


def test_fusion_argument_types_must_match_inputs() -> None:
    text = """
func.func @f(%g: !coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, replicated> {
  %r = coco.fusion (%g) : (!coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, replicated> {
  ^bb0(%x: !coco.tensor<8xf32, replicated>):
    coco.yield %x : !coco.tensor<8xf32, replicated>
  }
  func.return %r : !coco.tensor<8xf32, replicated>
}
"""
    with pytest.raises(cc.CocoError, match="block argument types must be"):
        cc.parse(text)
