"""What every coco pass shares: targeting one op by its `name`, refusing with a
located reason, and leaving the module untouched when it refuses.

CoCoNet's schedules apply a transformation to one stage; here every pass has the
option `op=NAME`. Without it the pass rewrites every op it applies to and skips
those whose precondition fails. With it, only ops carrying `name = "NAME"` are
considered, and one whose precondition fails stops the pass with a diagnostic
that says which precondition; the module is then exactly as it was.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriteWalker, RewritePattern
from xdsl.utils.exceptions import PassFailedException

from coconet_ir.ir import CocoError, location_of, verify


class PassRefused(CocoError, PassFailedException):
    """A pass's precondition failed on an op it was asked to transform."""


def stage_name(op: Operation) -> str | None:
    name = op.attributes.get("name")
    return name.data if isinstance(name, StringAttr) else None


def module_world_size(module: ModuleOp) -> int | None:
    """The world size fixed by the module's `coco.world_size` attribute."""
    attr = module.attributes.get("coco.world_size")
    return attr.value.data if isinstance(attr, IntegerAttr) else None


@dataclass(frozen=True)
class CocoPass(ModulePass, ABC):
    """A module pass with the `op=NAME` option and all-or-nothing application."""

    op: str | None = None
    """Only transform ops whose `name` attribute is this (CoCoNet's stage name)."""

    def targets(self, op: Operation) -> bool:
        """Whether the pass may transform `op` under the `op=` option."""
        return self.op is None or stage_name(op) == self.op

    def refuse(self, op: Operation, reason: str) -> PassRefused:
        return PassRefused(
            f"{location_of(op)}: error: '{op.name}' op {self.name} cannot apply: "
            f"{reason}"
        )

    def bad_option(self, reason: str) -> PassRefused:
        """An option value no op could satisfy: refused whatever `op=` says."""
        return PassRefused(f"<module>: error: {self.name}: {reason}")

    def skip_or_refuse(self, op: Operation, reason: str) -> None:
        """An op this pass cannot transform: an error when it was targeted by
        name, silently left alone otherwise."""
        if self.op is not None:
            raise self.refuse(op, reason)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with all_or_nothing(op):
            found = self.transform(ctx, op)
            if self.op is not None and not found:
                raise PassRefused(
                    f'<module>: error: {self.name}: no op named "{self.op}" that this '
                    "pass applies to"
                )
            verify(op)

    @abstractmethod
    def transform(self, ctx: Context, module: ModuleOp) -> bool:
        """Rewrite the module; return whether any targeted op was found."""


def rewrite_once(module: ModuleOp, pattern: RewritePattern) -> None:
    """Offer every op of `module` to `pattern` once; the ops a rewrite builds are
    not offered again."""
    PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(module)


@contextmanager
def all_or_nothing(module: ModuleOp) -> Iterator[None]:
    """On a CocoError inside the block, put `module` back as it was and
    re-raise (without the module dump xDSL's rewrite walker attaches: the
    located message already says everything)."""
    snapshot = module.clone()
    try:
        yield
    except CocoError as err:
        restore(module, snapshot)
        if hasattr(err, "__notes__"):
            del err.__notes__
        raise


def restore(module: ModuleOp, snapshot: ModuleOp) -> None:
    """Put the contents and attributes of `snapshot` back into `module`."""
    for old in list(module.body.block.ops):
        old.detach()
    for new in list(snapshot.body.block.ops):
        new.detach()
        module.body.block.add_op(new)
    module.attributes = dict(snapshot.attributes)
