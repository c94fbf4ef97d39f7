"""Canonicalization patterns of the coco ops, applied by xDSL's `canonicalize`.

The ops of `coconet_ir.dialects.coco` carry `HasCanonicalizationPatternsTrait`s
whose `get_canonicalization_patterns` import the patterns from here lazily (as
xDSL's arith dialect does), so `coconet-opt -p canonicalize` uses them:

- `all_slice(all_gather(x)) dim = D` → `x` when `x` is `sliced<D>`;
- `all_gather(all_slice(x))` → `x`;
- `all_gather(reduce_scatter(x))` → `all_reduce(x)` with the same reduction,
  when the reduce_scatter has no other use. This is the inverse of
  `coco-split-all-reduce`: the canonical form is the single all_reduce, so run
  `canonicalize` before splitting, not between a split and the passes using it;
- `all_reduce(x) reduction = max|min` → `x` when `x` is `replicated` (every rank
  holds the same value);
- `convert(x)` to `x`'s own type → `x`.

A collective made unused by a pattern is erased by the pattern itself: xDSL's
dead-code sweep after canonicalization only removes ops with known effects, and
collectives declare none.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from coconet_ir.dialects.coco import (
    AllGatherOp,
    AllReduceOp,
    AllSliceOp,
    ConvertOp,
    ReduceScatterOp,
    ReductionKind,
    tensor_type,
)
from coconet_ir.passes.base import stage_name


def merged_name(scatter: ReduceScatterOp, gather: AllGatherOp) -> str | None:
    """The all_reduce's name: `NAME` for the `NAME_rs` / `NAME_ag` pair
    coco-split-all-reduce makes, else the all_gather's name."""
    scatter_name, gather_name = stage_name(scatter), stage_name(gather)
    if scatter_name is None or gather_name is None:
        return gather_name
    base = scatter_name.removesuffix("_rs")
    if base != scatter_name and gather_name == f"{base}_ag":
        return base
    return gather_name


@dataclass
class SliceOfGather(RewritePattern):
    """`all_slice(all_gather(x)) dim = D` → `x` when `x` is `sliced<D>`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AllSliceOp, rewriter: PatternRewriter) -> None:
        gather = op.operand.owner
        if not isinstance(gather, AllGatherOp):
            return
        if gather.operand.type != op.result.type:
            return
        rewriter.replace(op, [], [gather.operand])
        if not gather.result.uses:
            rewriter.erase(gather)


@dataclass
class GatherOfSlice(RewritePattern):
    """`all_gather(all_slice(x))` → `x`: the blocks of `x` put back together."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AllGatherOp, rewriter: PatternRewriter) -> None:
        sliced = op.operand.owner
        if not isinstance(sliced, AllSliceOp):
            return
        rewriter.replace(op, [], [sliced.operand])


@dataclass
class GatherOfScatter(RewritePattern):
    """`all_gather(reduce_scatter(x))` → `all_reduce(x)`, the reduction kept,
    when the all_gather is the reduce_scatter's only user."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AllGatherOp, rewriter: PatternRewriter) -> None:
        scatter = op.operand.owner
        if not isinstance(scatter, ReduceScatterOp):
            return
        if not op.operand.has_one_use():
            return
        reduce = AllReduceOp(
            scatter.operand,
            scatter.reduction.data,
            name=merged_name(scatter, op),
        )
        rewriter.replace(op, reduce)
        rewriter.erase(scatter)


IDEMPOTENT_REDUCTIONS = (ReductionKind.MAX, ReductionKind.MIN)
"""Reductions that give back a value every rank already holds."""


@dataclass
class ReplicatedIdempotentAllReduce(RewritePattern):
    """`all_reduce(x) reduction = max|min` → `x` when `x` is replicated."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AllReduceOp, rewriter: PatternRewriter) -> None:
        if op.reduction.data not in IDEMPOTENT_REDUCTIONS:
            return
        if not tensor_type(op.operand).layout.is_replicated:
            return
        rewriter.replace(op, [], [op.operand])


@dataclass
class SameTypeConvert(RewritePattern):
    """`convert(x)` whose result type is `x`'s type → `x`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ConvertOp, rewriter: PatternRewriter) -> None:
        if op.operand.type != op.result.type:
            return
        rewriter.replace(op, [], [op.operand])
