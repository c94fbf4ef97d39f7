"""Outlining a group of ops into a `coco.fusion` or `coco.overlap` region.

Both coco-fuse and coco-overlap pick a group of ops of one block and move them
into an isolated region op: the region's inputs are the values defined outside
the group and used inside, its outputs the group's values used outside (only
those), and the region op takes the place of the group's last op. Ops outside
the group that sit before that place but depend on a group value move right
after the region op, in their order. A group that an outside op both depends on
and feeds would make a cycle; `cycle_through` finds that op. The region op
carries the fused location of the ops it holds (`loc(fused[...])`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import LocationAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from coconet_ir.dialects.coco import RecvOp, RegionOp, SendOp, YieldOp
from coconet_ir.passes.base import rewriting


@dataclass(frozen=True)
class Boundary:
    """A group of ops of one block, in block order, with the values crossing
    its boundary (each once, in order of first use or definition)."""

    ops: tuple[Operation, ...]
    inputs: tuple[SSAValue, ...]
    outputs: tuple[SSAValue, ...]

    @property
    def block(self) -> Block:
        block = self.ops[0].parent_block()
        assert block is not None
        return block


def positions(block: Block) -> dict[Operation, int]:
    """Every op of `block` by its position (computed once, for sorting)."""
    return {op: i for i, op in enumerate(block.ops)}


def listed_in_order(
    listed: Sequence[Operation], refuse: Callable[[Operation, str], Exception]
) -> tuple[dict[Operation, int], list[Operation], set[Operation]]:
    """A schedule's explicit list of ops (`ops=`), which must lie in one
    block: the block's op positions, the listed ops in block order, and the
    ops on a path from one of them to another. Raises `refuse(op, reason)`
    for an op of another block."""
    block = listed[0].parent_block()
    assert block is not None
    for op in listed:
        if op.parent_block() is not block:
            raise refuse(op, "the listed ops are not in one block")
    order = positions(block)
    ordered = sorted(set(listed), key=order.__getitem__)
    return order, ordered, set(descendants(ordered)) & ancestors(ordered)


def boundary(ordered: Sequence[Operation]) -> Boundary:
    """The group's inputs (defined outside, used inside) and outputs (defined
    inside, used outside); `ordered` is in block order."""
    group = set(ordered)
    inputs: dict[SSAValue, None] = {}
    outputs: dict[SSAValue, None] = {}
    for op in ordered:
        for value in op.operands:
            if value.owner not in group:
                inputs[value] = None
        for result in op.results:
            if any(use.operation not in group for use in result.uses):
                outputs[result] = None
    return Boundary(tuple(ordered), tuple(inputs), tuple(outputs))


def span(group: Sequence[Operation]) -> list[Operation]:
    """The ops from the group's first op to its last (group in block order):
    any op on a path that leaves the group and comes back lies there."""
    ops: list[Operation] = []
    op: Operation | None = group[0]
    while op is not None:
        ops.append(op)
        if op is group[-1]:
            break
        op = op.next_op
    return ops


def descendants(group: Sequence[Operation]) -> list[Operation]:
    """Ops outside the group, before its last op, that depend on a group value
    (transitively), in block order (SSA order is topological): outlining moves
    them after the region op."""
    members = set(group)
    reached: dict[Operation, None] = {}
    for op in span(group):
        if op in members:
            continue
        if any(v.owner in members or v.owner in reached for v in op.operands):
            reached[op] = None
    return list(reached)


def ancestors(group: Sequence[Operation]) -> set[Operation]:
    """Ops outside the group, after its first op, that a group op depends on
    (transitively): one backward pass."""
    members = set(group)
    needed: set[Operation] = set()
    for op in reversed(span(group)):
        if op not in members and op not in needed:
            continue
        for value in op.operands:
            if isinstance(value.owner, Operation) and value.owner not in members:
                needed.add(value.owner)
    return needed


def cycle_through(group: Sequence[Operation]) -> Operation | None:
    """An op outside the group that depends on a group value and that a group op
    depends on: outlining the group would make a cycle through it."""
    above = ancestors(group)
    return next((op for op in descendants(group) if op in above), None)


def reorders_messages(group: Sequence[Operation], moved: Sequence[Operation]) -> bool:
    """Whether moving `moved` after the group's last op would pass a send or
    recv that stays (a pipeline's message order on a channel must not change)."""
    if not any(isinstance(op, SendOp) for op in moved):
        return False
    last = group[-1]
    staying = set(group) | set(moved)
    op = moved[0].next_op
    while op is not None and op is not last:
        if op not in staying and isinstance(op, SendOp | RecvOp):
            return True
        op = op.next_op
    return False


def defined_at(value: SSAValue) -> LocationAttr:
    """Where `value` is defined: its op's location, or the argument's own."""
    if isinstance(value, BlockArgument):
        return value.location
    assert isinstance(value.owner, Operation)
    return value.owner.location


RegionBuilder = Callable[[Boundary, Block], RegionOp]
"""Makes the region op from the boundary and its (still empty) body block."""


def outline(
    ops: Sequence[Operation], build: RegionBuilder, rewriter: PatternRewriter
) -> RegionOp:
    """Move `ops` (in block order) into the region op `build` makes, at the
    place of the last of them; outside uses of their values use the region's
    results instead.

    The caller has checked `cycle_through` (no cycle) beforehand. The region
    op and its yield carry the ops' fused location, each argument the
    location of the value it stands for (as MLIR's outlining does)."""
    found = boundary(ops)
    with rewriting(*found.ops):
        moved = descendants(found.ops)
        group = set(found.ops)
        body = Block(arg_types=[v.type for v in found.inputs])
        region_op = build(found, body)
        rewriter.insert(region_op, InsertPoint.before(found.ops[-1]))
        for op in found.ops:
            op.detach()
            rewriter.insert(op, InsertPoint.at_end(body))
        arguments = dict(zip(found.inputs, body.args))
        for value, arg in arguments.items():
            arg.name_hint = value.name_hint
            arg.location = defined_at(value)
        for op in found.ops:  # the group's uses only: an input may have many others
            if any(value in arguments for value in op.operands):
                op.operands = [arguments.get(value, value) for value in op.operands]
                rewriter.notify_op_modified(op)
        for output, result in zip(found.outputs, region_op.results):
            rewriter.replace_uses_with_if(
                output, result, lambda use: use.operation not in group
            )
        rewriter.insert(YieldOp(*found.outputs), InsertPoint.at_end(body))
        after: Operation = region_op
        for op in moved:
            op.detach()
            rewriter.insert(op, InsertPoint.after(after))
            after = op
        return region_op
