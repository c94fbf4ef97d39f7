"""coco-slice-norm: the norm of a replicated value that the program also
slices is computed on the slice (docs/passes.md, "coco-slice-norm").

LAMB's trust ratio reads `norm(w)` of the replicated weights, while after
`coco-reorder` its update reads `%w_slice = coco.all_slice %w dim = 0`. Every
rank squares and sums all of `w`; this pass makes each rank square and sum its
block and add the N partial sums with a scalar all_reduce:

    %n = coco.norm %w
becomes
    %n_square = coco.mul %w_slice, %w_slice
    %n_partial = coco.reduce %n_square kind = sum dims = [...]   // local, rank 0
    %n_squared = coco.all_reduce %n_partial reduction = sum       // NAME_ar
    %n = coco.sqrt %n_squared                                     // keeps NAME

1/N of the squares per rank for an all_reduce of one element (f16/bf16: the
squares and sums in f32 and the root rounded once, as `coco.norm` does, the
same ops coco-reorder writes for the norm of a slice). The sum is reassociated
across ranks, which the interpreter's equivalence allows (docs/interpreter.md).
In a fused kernel the partial sum and the scalar all_reduce join the region
(coco-fuse grows through reductions), so the norm costs no launch of its own.

Preconditions (checked when the pass is targeted with `op=NAME`, the norm's
name): the norm is directly in a function body, its operand is replicated, and
the same block also cuts that operand with `coco.all_slice` (the first such
all_slice in the block is used, moved before the norm if it comes after: its
operand is the norm's, so that is always legal). Without an existing
all_slice the pass adds none: it uses the slicing the program already has.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from coconet_ir.dialects.coco import AllSliceOp, NormOp, tensor_type
from coconet_ir.passes.base import (
    CocoPass,
    function_body_ops,
    in_function_labelled,
    rewrite_once,
)
from coconet_ir.passes.reorder import norm_of_slice


def the_slice(op: NormOp) -> AllSliceOp | None:
    """The first `all_slice` of the norm's replicated operand in the norm's
    block, if the operand is replicated and there is one."""
    operand = op.operand
    block = op.parent_block()
    if block is None or not tensor_type(operand).layout.is_replicated:
        return None
    cuts = {
        use.operation
        for use in operand.uses
        if isinstance(use.operation, AllSliceOp)
        and use.operation.parent_block() is block
    }
    return next((o for o in block.ops if o in cuts), None)  # type: ignore[return-value]


@dataclass(frozen=True)
class SliceNormPattern(RewritePattern):
    """Compute one norm (labelled `label`, if given) on its operand's slice."""

    label: str | None = None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NormOp, rewriter: PatternRewriter) -> None:
        if not in_function_labelled(op, self.label):
            return
        cut = the_slice(op)
        if cut is None:
            return
        if not cut.is_before_in_block(op):
            cut.detach()
            rewriter.insert(cut, InsertPoint.before(op))
        new_ops = norm_of_slice(op, cut.result)
        rewriter.insert(new_ops, InsertPoint.before(op))
        norm = new_ops[-1].results[0]
        norm.name_hint = op.result.name_hint
        rewriter.replace_all_uses_with(op.result, norm)
        rewriter.erase(op)


@dataclass(frozen=True)
class SliceNorm(CocoPass):
    """Compute the norm of a replicated value on the slice the program already
    cuts from it: partial sums of squares and a scalar all_reduce."""

    name = "coco-slice-norm"

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in function_body_ops(module) if isinstance(op, NormOp))

    def problem(self, op: Operation) -> str | None:
        assert isinstance(op, NormOp)
        if not tensor_type(op.operand).layout.is_replicated:
            return "its operand is not replicated"
        if the_slice(op) is None:
            return (
                "nothing slices its operand (no coco.all_slice of it in the same block)"
            )
        return None

    def rewrite(self, module: ModuleOp) -> None:
        rewrite_once(module, SliceNormPattern(self.op))
