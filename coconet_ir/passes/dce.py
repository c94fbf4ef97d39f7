"""coco-dce: remove ops whose results are unused and that have no effect
(docs/passes/coco-dce.md).

Untargeted, this is xDSL's own dead-code elimination (`dce`), which reads the
effects the coco ops declare: compute ops, `all_slice`, `constant` and the
collectives (SPMD: a collective nobody reads is dropped on every rank together)
go once unused, and so does a `coco.fusion` / `coco.overlap` region whose body
has no effect; `coco.send`, `coco.recv` (a channel needs both ends) and
`coco.update` stay, as do terminators and ops of unknown effect.

What the generic pass cannot do is `op=NAME`: remove only the ops labelled
NAME, refusing (and changing nothing) when one is used or has an effect. What
their removal leaves dead stays.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.rewriter import Rewriter
from xdsl.traits import IsTerminator, RecursiveMemoryEffect, get_effects
from xdsl.transforms.dead_code_elimination import region_dce, would_be_trivially_dead

from coconet_ir.dialects.coco import label_of
from coconet_ir.passes.base import CocoPass


def first_user(op: Operation) -> Operation | None:
    """An op using one of `op`'s results, if any."""
    for result in op.results:
        for use in result.uses:
            return use.operation
    return None


def own_effect(op: Operation) -> str | None:
    """Why `op` itself (not its regions) keeps it alive although unused."""
    if op.has_trait(IsTerminator):
        return "it is a terminator"
    if op.has_trait(RecursiveMemoryEffect) or would_be_trivially_dead(op):
        return None
    if get_effects(op) is None:
        return f"'{op.name}' may have an effect besides its results"
    return f"'{op.name}' has an effect besides its results"


def effect(op: Operation) -> str | None:
    """Why `op` must stay even when its results are unused, as xDSL's effect
    analysis decides it; a region op names the op of its body that has one."""
    if would_be_trivially_dead(op):
        return None
    reason = own_effect(op)
    if reason is not None:
        return reason
    for inner in op.walk():
        if inner is not op and own_effect(inner) and not inner.has_trait(IsTerminator):
            return f"its region holds '{inner.name}', which has an effect"
    return f"'{op.name}' has an effect besides its results"


@dataclass(frozen=True)
class CocoDCE(CocoPass):
    """Remove unused ops that have no effect; `op=NAME` removes one op."""

    name = "coco-dce"

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in module.walk() if op is not module)

    def problem(self, op: Operation) -> str | None:
        user = first_user(op)
        if user is not None:
            return f"its result is used by '{user.name}'"
        return effect(op)

    def rewrite(self, module: ModuleOp) -> None:
        if self.op is None:
            region_dce(module.body)
            return
        for op in [op for op in module.walk() if label_of(op) == self.op]:
            Rewriter.erase_op(op)
