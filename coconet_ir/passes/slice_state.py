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

Bucketed state (`coco-bucket`) is sliced a bucket at a time. There the
parameters reach the step as `coco.all_slice (coco.concat %m_0, %m_1, ...) dim
= 0` and their new values as `coco.split (coco.all_gather %m1)`. As the
concatenation is rank-major, rank `r`'s block of the bucket is the
concatenation of the parameters' blocks `r` along dim 0: the parameters become
`sliced<0>`, the all_slice becomes the concatenation of the slices, the split
splits the slice `%m1`, each update stores its piece, and the all_gather goes.
Preconditions: the concat's operands are parameters (replicated, dim 0
divisible by the world size, or by 8 when unknown, used by nothing but this
concat and their update), each concat operand's new value is the
corresponding piece of one `coco.split` of a `coco.all_gather`, and the concat
is only cut by `coco.all_slice dim = 0`. The choice between state and weights
is the one below, for the bucket as a whole; an update named with `op=`
slices its whole bucket.

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
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from coconet_ir.dialects.coco import (
    AllGatherOp,
    AllSliceOp,
    ConcatOp,
    LayoutAttr,
    SplitOp,
    UpdateOp,
    label_of,
    tensor_type,
    world_size,
)
from coconet_ir.passes.base import (
    CocoPass,
    retype_values,
    rewrite_once,
    rewriting,
)
from coconet_ir.passes.split_all_reduce import ASSUMED_WORLD


def describe(value: SSAValue) -> str:
    return f"%{value.name_hint}" if value.name_hint else "the parameter"


def state_problem(update: UpdateOp) -> str | None:
    """Why the parameter of `update` cannot stay sliced, or None."""
    param = update.param
    if any(isinstance(use.operation, ConcatOp) for use in param.uses):
        group = bucket_group(update)
        return group if isinstance(group, str) else None
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


def is_bucketed(update: UpdateOp) -> bool:
    """Whether `update`'s parameter reaches the step through a bucket."""
    return any(isinstance(use.operation, ConcatOp) for use in update.param.uses)


def new_value_is_read(update: UpdateOp) -> bool:
    """Whether the step reads the parameter's new value besides storing it: the
    slice feeds other ops than the all_gather, or the gathered value other ops
    than the update (optimizer state, as opposed to a weight)."""
    gather = update.value.owner
    assert isinstance(gather, AllGatherOp)
    return gather.operand.uses.get_length() > 1 or update.value.uses.get_length() > 1


def slice_parameter(update: UpdateOp, rewriter: PatternRewriter) -> None:
    """Make the parameter of `update`, already given the type of the value it
    stores (`sliced_types`), sliced in its uses too (the function's type is
    the caller's to update)."""
    gather = update.value.owner
    assert isinstance(gather, AllGatherOp)
    block_value = gather.operand
    param = update.param
    cuts = [use.operation for use in param.uses if use.operation is not update]
    for cut in cuts:
        rewriter.replace(cut, [], [param])
    stored = UpdateOp.create(
        operands=[param, block_value], attributes=dict(update.attributes)
    )
    with rewriting(update):
        rewriter.replace(update, stored)
    if not gather.result.uses:
        rewriter.erase(gather)


@dataclass(frozen=True)
class BucketGroup:
    """Parameters concatenated into one bucket, sliced together."""

    concat: ConcatOp
    split: SplitOp
    gather: AllGatherOp
    updates: list[UpdateOp]


def bucket_group(update: UpdateOp) -> BucketGroup | str:
    """The bucket whose parameters slice together with `update`'s, or why
    they cannot stay sliced."""
    param = update.param
    concats = [u.operation for u in param.uses if isinstance(u.operation, ConcatOp)]
    concat = concats[0]
    assert isinstance(concat, ConcatOp)
    split = update.value.owner
    if not isinstance(split, SplitOp):
        return (
            f"parameter {describe(param)} is bucketed by a coco.concat, but its "
            "new value is not a piece of a coco.split"
        )
    gather = split.flat.owner
    if not isinstance(gather, AllGatherOp):
        return (
            "the bucket's new value is not produced by a coco.all_gather (run "
            "coco-split-all-reduce and coco-reorder first)"
        )
    if tensor_type(gather.operand).layout != LayoutAttr.sliced(0):
        return "the bucket's new value is not gathered along dim 0"
    params = list(concat.pieces)
    if len(params) != len(split.pieces) or len(set(params)) != len(params):
        return "the bucket's coco.concat and coco.split do not match piece for piece"
    world = world_size(concat)
    size = ASSUMED_WORLD if world is None else world
    updates: list[UpdateOp] = []
    for p, piece in zip(params, split.pieces):
        found = [u.operation for u in piece.uses]
        stores = [u for u in found if isinstance(u, UpdateOp) and u.param is p]
        if len(found) != 1 or len(stores) != 1:
            return (
                f"piece {piece.index} of the bucket's coco.split is not only "  # type: ignore[attr-defined]
                f"the new value of {describe(p)}"
            )
        t = tensor_type(p)
        if not t.layout.is_replicated:
            return f"parameter {describe(p)} is {t.layout}, not replicated"
        if t.dims[0] % size:
            which = "every world size up to" if world is None else "the world size"
            return (
                f"dimension 0 of parameter {describe(p)} ({t.dims[0]}) is not "
                f"divisible by {which} {size}"
            )
        others = [u.operation for u in p.uses if u.operation not in (concat, stores[0])]
        if others:
            return (
                f"parameter {describe(p)} is used by '{others[0].name}', not only "
                "through its bucket"
            )
        updates.append(stores[0])
    for use in concat.result.uses:
        cut = use.operation
        if not isinstance(cut, AllSliceOp) or cut.dim.value.data != 0:
            return (
                f"the bucket of {describe(param)} is used by '{cut.name}', not "
                "only through coco.all_slice dim = 0"
            )
    return BucketGroup(concat, split, gather, updates)


def bucket_value_is_read(group: BucketGroup) -> bool:
    """As `new_value_is_read`, for a bucket."""
    gathered = group.gather
    return (
        gathered.operand.uses.get_length() > 1 or gathered.result.uses.get_length() > 1
    )


def sliced_types(
    updates: list[UpdateOp], groups: list[BucketGroup]
) -> dict[SSAValue, Attribute]:
    """The new type of each parameter to slice: the type of the block an
    update stores, sliced<0> for a bucket's pieces."""
    types: dict[SSAValue, Attribute] = {}
    for update in updates:
        gather = update.value.owner
        assert isinstance(gather, AllGatherOp)
        types[update.param] = gather.operand.type
    sliced = LayoutAttr.sliced(0)
    for group in groups:
        for piece in group.concat.pieces:
            types[piece] = tensor_type(piece).with_layout(sliced)
    return types


def slice_bucket(group: BucketGroup, rewriter: PatternRewriter) -> None:
    """Make the parameters of a bucket sliced<0>: the bucket is the
    concatenation of their slices, the split splits the sliced new value."""
    params = list(group.concat.pieces)  # already sliced (`sliced_types`)
    concat = ConcatOp(params, label=label_of(group.concat))
    with rewriting(group.concat):
        rewriter.insert(concat, InsertPoint.before(group.concat))
    for use in list(group.concat.result.uses):
        rewriter.replace(use.operation, [], [concat.result])
    rewriter.erase(group.concat)
    block_value = group.gather.operand
    shapes = [tensor_type(p).dims for p in params]
    split = SplitOp(block_value, shapes, label=label_of(group.split))
    with rewriting(group.split):
        rewriter.insert(split, InsertPoint.before(group.split))
    for update, param, piece in zip(group.updates, params, split.pieces):
        stored = UpdateOp.create(
            operands=[param, piece], attributes=dict(update.attributes)
        )
        with rewriting(update):
            rewriter.replace(update, stored)
    rewriter.erase(group.split)
    if not group.gather.result.uses:
        rewriter.erase(group.gather)


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
        updates = [op for op in func.body.block.ops if isinstance(op, UpdateOp)]
        bucketed = [u for u in updates if is_bucketed(u)]
        in_buckets = set(bucketed)  # not the list: quadratic in the updates
        chosen = [u for u in updates if u not in in_buckets and self.chosen(u)]
        groups = self.chosen_buckets(bucketed)
        retype_values(rewriter, sliced_types(chosen, groups))
        for update in chosen:
            slice_parameter(update, rewriter)
        for group in groups:
            slice_bucket(group, rewriter)
        if chosen or groups:
            func.update_function_type()
            rewriter.notify_op_modified(func)

    def chosen_buckets(self, updates: list[UpdateOp]) -> list[BucketGroup]:
        """The buckets to slice: those of a labelled update, or every
        bucket of state (of weights too if `weights`)."""
        groups: list[BucketGroup] = []
        examined: set[Operation] = set()
        for update in updates:
            # a bucket is examined once, from its first update: its verdict
            # is the same from every member (and examining it walks them all)
            owner = update.value.owner
            if isinstance(owner, SplitOp):
                if owner in examined:
                    continue
                examined.add(owner)
            group = bucket_group(update)
            if isinstance(group, str):
                continue
            members = group.updates
            if self.label is not None:
                if not any(label_of(u) == self.label for u in members):
                    continue
            elif not (self.weights or bucket_value_is_read(group)):
                continue
            groups.append(group)
        return groups

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
