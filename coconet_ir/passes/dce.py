"""coco-dce: remove coco ops whose results are unused and that have no effect.

Removable, once no result is used:
- every `Pure` coco op (compute, `all_slice`, `constant`, `dropout`, ...);
- the collectives `all_reduce`, `reduce_scatter`, `all_gather`, `broadcast`,
  `all_to_all`: in SPMD every rank runs the same ops, so dropping a collective
  nobody reads drops it on all ranks together, and only saves bandwidth (xDSL's
  own `dce` keeps them: they carry no effect traits, so xDSL assumes the worst);
- a `coco.fusion` / `coco.overlap` region whose body has no `send`, `recv` or
  `update` (checked through nested regions).

Never removed: `coco.send` and `coco.recv` (a channel needs both ends),
`coco.update`, terminators, and ops of other dialects.

One reverse walk per block: an op is visited after all its users in the block,
so removing it can only make earlier ops dead, which the same walk then sees.
Nested regions are swept when their op is visited and kept. Only when a
removal makes dead an op the walk has already passed (possible across the
blocks of a multi-block region) is that op revisited, from a worklist; the pass
is linear in the size of the module.

`op=NAME` removes only the ops named NAME, and refuses when one is used or has
an effect; it does not remove what they leave dead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.rewriter import Rewriter
from xdsl.traits import IsTerminator, Pure

from coconet_ir.dialects.coco import (
    CocoOp,
    CollectiveOp,
    RecvOp,
    RegionOp,
    SendOp,
    UpdateOp,
)
from coconet_ir.passes.base import CocoPass

EFFECTFUL_OPS = (SendOp, RecvOp, UpdateOp)
"""Coco ops whose effect is not their results: they are never removed."""


def own_effect(op: Operation) -> str | None:
    """Why `op` itself (not counting nested ops) must stay even when its results
    are unused; None if it may go."""
    if op.has_trait(IsTerminator):
        return "it is a terminator"
    if isinstance(op, EFFECTFUL_OPS):
        return f"'{op.name}' has an effect besides its results"
    if isinstance(op, CollectiveOp | RegionOp):
        return None
    if isinstance(op, CocoOp) and op.has_trait(Pure):
        return None
    return f"'{op.name}' is not a coco op known to have no effect"


def effect(op: Operation) -> str | None:
    """Why `op` must stay even when its results are unused, looking inside its
    regions (a region may go only if nothing in it has an effect)."""
    reason = own_effect(op)
    if reason is not None:
        return reason
    for inner in op.walk():
        if inner is op or isinstance(inner, RegionOp) or inner.has_trait(IsTerminator):
            continue
        reason = own_effect(inner)
        if reason is not None:
            return f"its region holds '{inner.name}', which has an effect"
    return None


def first_user(op: Operation) -> Operation | None:
    """An op using one of `op`'s results, if any."""
    for result in op.results:
        for use in result.uses:
            return use.operation
    return None


def is_dead(op: Operation) -> bool:
    """No result of `op` is used and `op` has no effect."""
    return op.parent is not None and first_user(op) is None and effect(op) is None


@dataclass
class DeadCodeSweep:
    """One reverse walk over every block, erasing dead ops."""

    revisit: list[Operation] = field(default_factory=list[Operation])
    """Producers of erased ops' operands: dead now, maybe already passed."""

    def erase(self, op: Operation) -> None:
        self.revisit.extend(
            value.owner for value in op.operands if isinstance(value.owner, Operation)
        )
        Rewriter.erase_op(op)

    def sweep_block(self, block: Block) -> None:
        op = block.last_op
        while op is not None:
            previous = op.prev_op
            if is_dead(op):
                self.erase(op)
            else:
                self.sweep_regions(op)
            op = previous

    def sweep_regions(self, op: Operation) -> None:
        for region in op.regions:
            for block in reversed(region.blocks):
                self.sweep_block(block)

    def drain(self) -> None:
        """Erase what the walk passed before it became dead."""
        while self.revisit:
            op = self.revisit.pop()
            if is_dead(op):
                self.erase(op)


@dataclass(frozen=True)
class CocoDCE(CocoPass):
    """Remove unused coco compute ops, collectives and effect-free regions."""

    name = "coco-dce"

    def transform(self, ctx: Context, module: ModuleOp) -> bool:
        if self.op is not None:
            return self.remove_named(module)
        sweep = DeadCodeSweep()
        sweep.sweep_regions(module)
        sweep.drain()
        return True

    def remove_named(self, module: ModuleOp) -> bool:
        """Erase the ops named by `op=`, refusing if one is used or effectful."""
        named = [op for op in module.walk() if self.targets(op)]
        for op in named:
            self.check_removable(op)
        for op in named:
            Rewriter.erase_op(op)
        return bool(named)

    def check_removable(self, op: Operation) -> None:
        user = first_user(op)
        if user is not None:
            raise self.refuse(op, f"its result is used by '{user.name}'")
        reason = effect(op)
        if reason is not None:
            raise self.refuse(op, reason)
