"""coco-slice-norm: the norm of a replicated value the program also slices is
computed on the slice (partial sums of squares, a scalar all_reduce); the
programs stay equivalent on 2, 4 and 8 ranks, at sizes a model has, and
refusals leave the module untouched."""

# ruff: noqa: E501  (IR lines)

import pytest
from helpers import EXAMPLES_DIR, ops_of

import coconet_ir as cc
from coconet_ir.dialects import coco

WORLDS = [2, 4, 8]
LAMB = "coco-split-all-reduce,coco-reorder,coco-slice-state"

LATE_SLICE = """
func.func @late(%w: !coco.tensor<4096x8xf16, replicated>, %u: !coco.tensor<4096x8xf16, sliced<0>>) -> (!coco.tensor<f16, replicated>, !coco.tensor<4096x8xf16, sliced<0>>) {
  %n = coco.norm %w {name = "w_norm"} : (!coco.tensor<4096x8xf16, replicated>) -> !coco.tensor<f16, replicated>
  %s = coco.all_slice %w dim = 0 : (!coco.tensor<4096x8xf16, replicated>) -> !coco.tensor<4096x8xf16, sliced<0>>
  %t = coco.add %s, %u : (!coco.tensor<4096x8xf16, sliced<0>>, !coco.tensor<4096x8xf16, sliced<0>>) -> !coco.tensor<4096x8xf16, sliced<0>>
  func.return %n, %t : !coco.tensor<f16, replicated>, !coco.tensor<4096x8xf16, sliced<0>>
}
"""

UNSLICED = """
func.func @whole(%w: !coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated> {
  %n = coco.norm %w {name = "w_norm"} : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated>
  func.return %n : !coco.tensor<f32, replicated>
}
"""


def lamb():
    return cc.Pipeline(LAMB)(cc.parse_file(str(EXAMPLES_DIR / "lamb.mlir")))


@pytest.mark.parametrize("world", WORLDS)
def test_lamb_norms_are_computed_on_slices(world: int):
    before = lamb()
    after = cc.Pipeline("coco-slice-norm")(before)
    assert not ops_of(after, coco.NormOp)
    reduces = ops_of(after, coco.ReduceOp)
    assert len(reduces) == 2  # |w| and |r|, each of a slice
    for reduce in reduces:
        assert reduce.operand.type.layout.is_sliced
        assert reduce.result.type.layout.is_local
    labels = {op.attributes["name"].data for op in ops_of(after, coco.AllReduceOp)}
    assert labels == {"w_norm_ar", "r_norm_ar"}
    result = cc.equivalent(cc.parse_file(str(EXAMPLES_DIR / "lamb.mlir")), after, world)
    assert result.ok, result.first_difference


@pytest.mark.parametrize("world", WORLDS)
def test_a_later_slice_moves_before_the_norm_and_halves_sum_in_f32(world: int):
    """32768 half-precision elements: the squares and sums run in f32 (in f16
    the sum would overflow past 65504), the root is rounded once."""
    before = cc.parse(LATE_SLICE)
    after = cc.Pipeline("coco-slice-norm")(before)
    cc.verify(after)
    body = [op.name for op in after.walk() if op.name.startswith("coco.")]
    assert body.index("coco.all_slice") < body.index("coco.reduce")
    converts = ops_of(after, coco.ConvertOp)
    assert [str(c.result.type.element_type) for c in converts] == ["f32", "f16"]
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference


SLICED_NORM = """
func.func @norm(%w: !coco.tensor<8192xf32, replicated>) -> !coco.tensor<f32, replicated> {
  %s = coco.all_slice %w dim = 0 : (!coco.tensor<8192xf32, replicated>) -> !coco.tensor<8192xf32, sliced<0>>
  %sq = coco.mul %s, %s : (!coco.tensor<8192xf32, sliced<0>>, !coco.tensor<8192xf32, sliced<0>>) -> !coco.tensor<8192xf32, sliced<0>>
  %p = coco.reduce %sq kind = sum dims = [0] : (!coco.tensor<8192xf32, sliced<0>>) -> !coco.tensor<f32, local>
  %t = COMBINE
  %n = coco.sqrt %t : (!coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  func.return %n : !coco.tensor<f32, replicated>
}
"""
ALL_REDUCE = "coco.all_reduce %p reduction = sum : !coco.tensor<f32, local> -> !coco.tensor<f32, replicated>"
ONE_BLOCK = "coco.broadcast %p root = 0 : !coco.tensor<f32, local> -> !coco.tensor<f32, replicated>"


@pytest.mark.parametrize("world", WORLDS)
def test_the_oracle_tells_the_rewrite_from_a_wrong_one(world: int):
    """At 8192 elements the rewrite (all_reduce of the partials) is
    equivalent to the norm, and the wrong one (rank 0's block alone) is not."""
    whole = cc.parse(UNSLICED.replace("64xf32", "8192xf32"))
    right = cc.parse(SLICED_NORM.replace("COMBINE", ALL_REDUCE))
    wrong = cc.parse(SLICED_NORM.replace("COMBINE", ONE_BLOCK))
    assert cc.equivalent(whole, right, world).ok
    assert not cc.equivalent(whole, wrong, world).ok


def test_refuses_without_a_slice_and_changes_nothing():
    module = cc.parse(UNSLICED)
    text = cc.to_text(module)
    with pytest.raises(cc.CocoError, match="nothing slices its operand"):
        cc.Pipeline("coco-slice-norm{op=w_norm}")(module)
    assert cc.to_text(module) == text
    # Without op=, the norm is left alone.
    assert ops_of(cc.Pipeline("coco-slice-norm")(module), coco.NormOp)
