"""coco-slice-state: optimizer state that is only used through its slice stays
sliced (CoCoNet's asSlice; ZeRO's partitioned optimizer state).

After `coco-split-all-reduce` and `coco-reorder`, Adam's moments read

    %m_slice = coco.all_slice %m dim = 0          // %m: replicated argument
    %m1 = ...compute on %m_slice...               // sliced<0>
    %m1_ag = coco.all_gather %m1                  // only for the update
    coco.update %m, %m1_ag

Every rank keeps the whole of `m` although it only ever reads and writes its
block. This pass changes the argument's layout to `sliced<D>` in the function's
signature: the all_slices of the parameter become the parameter itself, the
update stores the slice (`coco.update %m, %m1`) and the all_gather that fed it
is erased when nothing else uses it. The global value of the parameter, before
and after, is unchanged (equivalence compares global values: docs/interpreter.md,
"Equivalence"), so the program is equivalent; each rank now holds 1/N of the
state and the all_gather is gone.

Preconditions, for `coco.update %p, %v` (checked when the pass is targeted with
`op=NAME`, the update's name): `%p` is replicated; `%v` is produced by a
`coco.all_gather` of a value sliced along some dim `D`; every other use of `%p`
is `coco.all_slice %p dim = D`.

Without `op=`, the pass slices the optimizer state: the parameters meeting the
preconditions whose new value the step also reads (Adam's `m1` feeds `mhat`),
not those whose new value is only stored (the weights `w` of SGD and Adam, which
the next forward pass needs whole). `weights=true` slices those too (ZeRO-3);
naming an update with `op=` slices its parameter whichever it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from coconet_ir.dialects.coco import (
    AllGatherOp,
    AllSliceOp,
    UpdateOp,
    label_of,
    tensor_type,
)
from coconet_ir.passes.base import CocoPass, rewrite_once


def describe(value: SSAValue) -> str:
    return f"%{value.name_hint}" if value.name_hint else "the parameter"


def state_problem(update: UpdateOp) -> str | None:
    """Why the parameter of `update` cannot stay sliced, or None."""
    param = update.param
    layout = tensor_type(param).layout
    if not layout.is_replicated:
        return f"parameter {describe(param)} is {layout}, not replicated"
    gather = update.value.owner
    if not isinstance(gather, AllGatherOp):
        return (
            "the new value is not produced by a coco.all_gather (run "
            "coco-split-all-reduce and coco-reorder first)"
        )
    dim = tensor_type(gather.operand).layout.sliced_dim
    for use in param.uses:
        user = use.operation
        if user is update:
            continue
        if not isinstance(user, AllSliceOp):
            return (
                f"parameter {describe(param)} is used by '{user.name}', not only "
                f"through coco.all_slice dim = {dim}"
            )
        if user.dim.value.data != dim:
            return (
                f"parameter {describe(param)} is cut along dim "
                f"{user.dim.value.data} by a coco.all_slice, but its new value is "
                f"gathered along dim {dim}"
            )
    return None


def new_value_is_read(update: UpdateOp) -> bool:
    """Whether the step reads the parameter's new value besides storing it: the
    slice feeds other ops than the all_gather, or the gathered value other ops
    than the update (optimizer state, as opposed to a weight)."""
    gather = update.value.owner
    assert isinstance(gather, AllGatherOp)
    return gather.operand.uses.get_length() > 1 or update.value.uses.get_length() > 1


def slice_parameter(update: UpdateOp, rewriter: PatternRewriter) -> None:
    """Make the parameter of `update` sliced like the value it stores (the
    function's type is the caller's to update)."""
    gather = update.value.owner
    assert isinstance(gather, AllGatherOp)
    block_value = gather.operand
    old_param = update.param
    cuts = [use.operation for use in old_param.uses if use.operation is not update]
    param = rewriter.replace_value_with_new_type(old_param, block_value.type)
    for cut in cuts:
        rewriter.replace(cut, [], [param])
    stored = UpdateOp.create(
        operands=[param, block_value], attributes=dict(update.attributes)
    )
    rewriter.replace(update, stored)
    if not gather.result.uses:
        rewriter.erase(gather)


@dataclass(frozen=True)
class SliceStatePattern(RewritePattern):
    """Keep the parameters of a function's `coco.update`s sliced: optimizer
    state, weights too if `weights`, or the update labelled `label` whichever
    it is; then give the function its new type, once."""

    weights: bool = False
    label: str | None = None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, func: FuncOp, rewriter: PatternRewriter) -> None:
        if func.is_declaration:
            return
        chosen = [
            op
            for op in func.body.block.ops
            if isinstance(op, UpdateOp) and self.chosen(op)
        ]
        for update in chosen:
            slice_parameter(update, rewriter)
        if chosen:
            func.update_function_type()
            rewriter.notify_op_modified(func)

    def chosen(self, update: UpdateOp) -> bool:
        if self.label is not None and label_of(update) != self.label:
            return False
        if state_problem(update) is not None:
            return False
        return self.label is not None or self.weights or new_value_is_read(update)


@dataclass(frozen=True)
class SliceState(CocoPass):
    """Keep the optimizer state (or the named update's parameter) sliced."""

    name = "coco-slice-state"

    weights: bool = False
    """Also slice parameters whose new value is only stored (ZeRO-3)."""

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in module.walk() if isinstance(op, UpdateOp))

    def problem(self, op: Operation) -> str | None:
        assert isinstance(op, UpdateOp)
        return state_problem(op)

    def rewrite(self, module: ModuleOp) -> None:
        rewrite_once(module, SliceStatePattern(self.weights, self.op))
