"""Canonicalization patterns of the coco ops, applied by xDSL's `canonicalize`
(docs/passes/canonicalize.md).

The ops carry `CocoCanonicalizationPatterns` traits, whose
`get_canonicalization_patterns` import their op's entry of `PATTERNS` lazily,
as xDSL's arith dialect imports its patterns:

- `all_slice(all_gather(x)) dim = D` → `x` when `x` is `sliced<D>`;
- `all_gather(all_slice(x))` → `x`;
- `all_gather(reduce_scatter(x))` → `all_reduce(x)` with the same reduction,
  when the reduce_scatter has no other use. This is the inverse of
  `coco-split-all-reduce`: the canonical form is the single all_reduce, so run
  `canonicalize` before splitting, not between a split and the passes using it;
- `all_reduce(x) reduction = max|min` → `x` when `x` is `replicated` (every rank
  holds the same value);
- `convert(x)` to `x`'s own type → `x`;
- `shift(x) by = 0`, and a shift of a replicated `x` → `x`;
  `shift(shift(x) by = a) by = b` → `shift(x) by = a + b` when the inner
  shift has no other use (a multiple of N is the identity, but N is not
  known here);
- `transpose(x)` by the identity permutation, and `reshape(x)` to `x`'s own
  type → `x`; `transpose(transpose(x) perm = p) perm = q` → `transpose(x)
  perm = [p[q[0]], ...]` (or `x` when that is the identity);
  `reshape(reshape(x))` → one `reshape(x)` where the layout rules allow it
  from `x` directly.

A producer these rewrites leave unused (a gather, a reduce_scatter) is removed
by the dead-code sweep `canonicalize` ends with: collectives declare that they
have no memory effect.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from coconet_ir.dialects.coco.attributes import ReductionKind
from coconet_ir.dialects.coco.ops import (
    AllGatherOp,
    AllReduceOp,
    AllSliceOp,
    ConvertOp,
    LayoutError,
    ReduceScatterOp,
    ReshapeOp,
    ShiftOp,
    TransposeOp,
    label_of,
    tensor_type,
)


def merged_label(scatter: ReduceScatterOp, gather: AllGatherOp) -> str | None:
    """The all_reduce's label: `NAME` for the `NAME_rs` / `NAME_ag` pair
    coco-split-all-reduce makes, else the all_gather's label."""
    scatter_label, gather_label = label_of(scatter), label_of(gather)
    if scatter_label is None or gather_label is None:
        return gather_label
    base = scatter_label.removesuffix("_rs")
    if base != scatter_label and gather_label == f"{base}_ag":
        return base
    return gather_label


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
            label=merged_label(scatter, op),
        )
        rewriter.replace(op, reduce)


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


@dataclass
class IdentityShift(RewritePattern):
    """`shift(x) by = 0`, or of a replicated `x` → `x`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ShiftOp, rewriter: PatternRewriter) -> None:
        if op.offset == 0 or tensor_type(op.operand).layout.is_replicated:
            rewriter.replace(op, [], [op.operand])


@dataclass
class ShiftOfShift(RewritePattern):
    """`shift(shift(x) by = a) by = b` → `shift(x) by = a + b`, when the inner
    shift has no other use."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ShiftOp, rewriter: PatternRewriter) -> None:
        inner = op.operand.owner
        if not isinstance(inner, ShiftOp) or not op.operand.has_one_use():
            return
        label = label_of(op)
        rewriter.replace(
            op, ShiftOp(inner.operand, inner.offset + op.offset, label=label)
        )


@dataclass
class ComposeTransposes(RewritePattern):
    """`transpose(x)` by the identity → `x`; `transpose(transpose(x) perm = p)
    perm = q` → `transpose(x) perm = [p[q[j]] for j]`, or `x` when that is
    the identity (the inner transpose stays for its other uses)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TransposeOp, rewriter: PatternRewriter) -> None:
        perm, source = list(op.permutation), op.operand
        inner = source.owner
        if isinstance(inner, TransposeOp):
            perm = [inner.permutation[q] for q in perm]
            source = inner.operand
        if perm == list(range(len(perm))):
            rewriter.replace(op, [], [source])
        elif source is not op.operand:
            rewriter.replace(op, TransposeOp(source, perm, label=label_of(op)))


@dataclass
class ComposeReshapes(RewritePattern):
    """`reshape(x)` to `x`'s own type → `x`; `reshape(reshape(x))` → one
    `reshape(x)` when the layout rules give the same type from `x`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = op.operand.owner
        source = inner.operand if isinstance(inner, ReshapeOp) else op.operand
        if source.type == op.result.type:
            rewriter.replace(op, [], [source])
            return
        if source is op.operand:
            return
        target = tensor_type(op.result)
        try:
            direct = ReshapeOp(source, target.dims, label=label_of(op))
        except LayoutError:
            return  # the layout allows it only through the inner shape
        if direct.result.type == target:
            rewriter.replace(op, direct)


PATTERNS: dict[str, tuple[RewritePattern, ...]] = {
    AllSliceOp.name: (SliceOfGather(),),
    AllGatherOp.name: (GatherOfSlice(), GatherOfScatter()),
    AllReduceOp.name: (ReplicatedIdempotentAllReduce(),),
    ConvertOp.name: (SameTypeConvert(),),
    ShiftOp.name: (IdentityShift(), ShiftOfShift()),
    TransposeOp.name: (ComposeTransposes(),),
    ReshapeOp.name: (ComposeReshapes(),),
}
"""The canonicalization patterns of each op, by op name."""
