"""What every coco pass shares: targeting ops by their label, refusing with a
located reason before changing anything, and warning when options matched
nothing (docs/passes.md, "Targeting and refusal").

CoCoNet's schedules apply a transformation to one named op; here every pass has
the option `op=NAME`. Without it the pass rewrites every op it applies to and
skips those whose precondition fails. With it, only ops labelled NAME (their
`name` attribute) are considered, and one whose precondition fails stops the
pass with a diagnostic that says which precondition. Preconditions are checked
before any rewrite, so a pass that refuses leaves the module as it was.

A pass declares what it works on (`candidates`), its precondition for one op
(`problem`) and the rewrite itself (`rewrite`); its rewrite patterns check the
same precondition and skip the ops that fail it. The driver (coconet-opt, a
`cc.Pipeline`) verifies the module after each pass: passes do not.

The ops a pass creates carry the location of the op they stand for, as in
MLIR (docs/passes.md, "Locations after a pass"): every op inserted while
rewriting op X (`rewriting(X)`; by default X is the op `rewrite_once` offered
the pattern) gets X's location, and an op standing for several (a fusion
region) their fused location, `loc(fused[...])`; so a diagnostic about it
points at the user's line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    FusedLoc,
    LocationAttr,
    ModuleOp,
    NoneAttr,
    UnknownLoc,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriterListener,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.utils.exceptions import PassFailedException

from coconet_ir.diagnostics import CocoError, warn
from coconet_ir.dialects.coco import AllReduceOp, label_of


class PassRefused(CocoError, PassFailedException):
    """A pass's precondition failed on an op it was asked to transform, or an
    option has a value no op could satisfy."""


@dataclass(frozen=True)
class CocoPass(ModulePass, ABC):
    """A module pass with the `op=NAME` option; it refuses before rewriting."""

    op: str | None = None
    """Only transform ops labelled this (their `name` attribute)."""

    def targets(self, op: Operation) -> bool:
        """Whether the pass may transform `op` under the `op=` option."""
        return self.op is None or label_of(op) == self.op

    def refuse(self, op: Operation, reason: str) -> PassRefused:
        return PassRefused(f"{self.name} cannot apply: {reason}", op)

    def bad_option(self, reason: str) -> PassRefused:
        """An option value no op could satisfy: refused whatever `op=` says."""
        return PassRefused(f"{self.name}: {reason}")

    def listed_ops(self, module: ModuleOp, names: Sequence[str]) -> list[Operation]:
        """The function-body ops labelled `names` (a schedule's explicit list,
        the `ops=` option), in the list's order; refuses a name no op has."""
        found: list[Operation] = []
        for name in names:
            ops = [o for o in function_body_ops(module) if label_of(o) == name]
            if not ops:
                raise self.bad_option(f'no op named "{name}" in a function body')
            found += ops
        return found

    def require_at_least(self, option: str, minimum: int) -> None:
        """Refuse an integer option (when given) below `minimum`."""
        value = getattr(self, option)
        if value is not None and value < minimum:
            raise self.bad_option(f"{option} must be >= {minimum}, got {value}")

    # -- what a pass defines -------------------------------------------------

    def check_options(self) -> None:
        """Raise `bad_option` for an option value no op could satisfy."""

    @abstractmethod
    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        """The ops of the kind this pass transforms (before `op=` filtering)."""

    @abstractmethod
    def problem(self, op: Operation) -> str | None:
        """Why the pass cannot transform the candidate `op`, or None."""

    @abstractmethod
    def rewrite(self, module: ModuleOp) -> None:
        """Transform every targeted candidate whose precondition holds."""

    def not_a_candidate(self, op: Operation) -> str | None:
        """Why a labelled op of another kind cannot be targeted, if the pass
        says so (else `op=` naming it only counts as naming nothing)."""
        return None

    # -- the driver ----------------------------------------------------------

    def rewrites_all(self) -> bool:
        """Whether `apply` is `check_options`, a warning at most and
        `rewrite`: the pass names no op to transform (`op=`)."""
        return self.op is None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.check_options()
        if self.op is not None:
            self.check_targets(op)
        elif self.changed():
            self.warn_if_nothing_applies(op)
        self.rewrite(op)

    def check_targets(self, module: ModuleOp) -> None:
        """Refuse if no candidate carries the label, or if one fails its
        precondition; nothing has been rewritten yet."""
        kinds = set(self.candidates(module))
        found = False
        for op in module.walk():
            if label_of(op) != self.op:
                continue
            reason = self.problem(op) if op in kinds else self.not_a_candidate(op)
            if reason is not None:
                raise self.refuse(op, reason)
            found = found or op in kinds
        if not found:
            raise self.bad_option(f'no op named "{self.op}" that this pass applies to')

    def changed(self) -> list[str]:
        """The options (but `op`) set to other than their default."""
        return [
            f.name
            for f in fields(self)
            if f.name != "op" and getattr(self, f.name) != f.default
        ]

    def changed_options(self) -> list[str]:
        """`NAME=VALUE` for every option set to other than its default."""
        return [f"{name}={getattr(self, name)}" for name in self.changed()]

    def warn_if_nothing_applies(self, module: ModuleOp) -> None:
        """Warn, naming the options, when they keep the pass from every
        candidate although the defaults would transform one."""
        candidates = list(self.candidates(module))
        if not candidates or any(self.problem(op) is None for op in candidates):
            return  # (stops at the first candidate it transforms)
        defaults = replace(
            self,
            **{f.name: f.default for f in fields(self) if f.name in self.changed()},
        )
        if all(defaults.problem(op) is not None for op in candidates):
            return
        options = " ".join(self.changed_options())
        reason = self.problem(candidates[0])
        warn(f"{self.name} transforms no op with {options}: {reason}", candidates[0])


class ListedOpsPass(CocoPass, ABC):
    """A pass a schedule may also give an explicit list of ops (coco-fuse,
    coco-reorder): with `ops=`, it rewrites exactly the ops labelled so, as
    one group, instead of every candidate (or the one named by `op=`)."""

    ops: tuple[str, ...]
    """The option, declared (with its default and meaning) by each pass, in
    its place among the pass's options."""

    @abstractmethod
    def rewrite_listed(self, module: ModuleOp, listed: list[Operation]) -> None:
        """Rewrite the `ops=` ops (in the list's order) as one group, or
        refuse before changing anything."""

    def rewrites_all(self) -> bool:
        return not self.ops and super().rewrites_all()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.ops:
            super().apply(ctx, op)
            return
        if self.op is not None:
            raise self.bad_option("give op= or ops=, not both")
        self.rewrite_listed(op, self.listed_ops(op, self.ops))


@dataclass(frozen=True)
class AllReducePass(CocoPass, ABC):
    """A pass that transforms all_reduces (coco-split-all-reduce,
    coco-bucket): every one in the module is a candidate."""

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in module.walk() if isinstance(op, AllReduceOp))


@dataclass(frozen=True)
class Rewrite:
    """A pass's rewrite of every op it applies to, its options checked: a
    part of coco-optimize, or a pass that `rewrites_all` applied with its
    warning ignored. Steps are values (equal steps rewrite an equal module
    alike), so the autotuner runs a prefix its candidates share once."""

    part: CocoPass

    def __call__(self, module: ModuleOp) -> None:
        self.part.check_options()
        self.part.rewrite(module)


def in_function_labelled(op: Operation, label: str | None) -> bool:
    """Whether a pattern given `op=label` rewrites `op`: directly in a
    function body, and labelled `label` when one is given."""
    if not isinstance(op.parent_op(), FuncOp):
        return False
    return label is None or label_of(op) == label


def function_body_ops(module: ModuleOp) -> Iterator[Operation]:
    """The ops directly in the bodies of the module's functions, in order."""
    for func in module.ops:
        if isinstance(func, FuncOp) and not func.is_declaration:
            yield from func.body.block.ops


def rewrite_once(module: ModuleOp, pattern: RewritePattern) -> None:
    """Offer every op of `module` to `pattern` once; the ops a rewrite builds are
    not offered again. The ops it inserts carry the location of the op being
    rewritten (`rewriting`): by default the op offered."""
    located = PatternRewriterListener(operation_insertion_handler=[locate_inserted])
    walker = PatternRewriteWalker(
        Located(pattern), apply_recursively=False, listener=located
    )
    walker.rewrite_module(module)


# -- locations of the ops a pass creates ---------------------------------------

_ORIGIN: ContextVar[LocationAttr | None] = ContextVar("coco_origin", default=None)
"""The location the ops inserted now get: that of the op(s) being rewritten."""


@contextmanager
def rewriting(*ops: Operation) -> Iterator[None]:
    """While rewriting `ops`: the ops `rewrite_once`'s rewriter inserts that
    have no location get theirs (fused when several), MLIR's habit."""
    token = _ORIGIN.set(fused_location(ops))
    try:
        yield
    finally:
        _ORIGIN.reset(token)


@dataclass(frozen=True)
class Located(RewritePattern):
    """`pattern`, each op it is offered being rewritten (`rewriting`)."""

    pattern: RewritePattern

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        with rewriting(op):
            self.pattern.match_and_rewrite(op, rewriter)


def locate_inserted(op: Operation) -> None:
    """The insertion listener of `rewrite_once`: give `op` the location of
    what is being rewritten, if it has none (an op moved keeps its own)."""
    if (origin := _ORIGIN.get()) is not None:
        locate(op, origin)


def fused_location(ops: Iterable[Operation]) -> LocationAttr:
    """The location of what `ops` become together: the one they share, else
    MLIR's `loc(fused[...])` of their distinct known locations (in order,
    nested fused locations flattened), unknown if they have none."""
    found: dict[Attribute, None] = {}
    for op in ops:
        location = op.location
        parts: Sequence[Attribute] = (location,)
        if isinstance(location, FusedLoc) and isinstance(location.metadata, NoneAttr):
            parts = cast(ArrayAttr[Attribute], location.locations).data
        found.update((part, None) for part in parts if not isinstance(part, UnknownLoc))
    if not found:
        return UnknownLoc()
    if len(found) == 1:
        return next(iter(found))  # pyright: ignore[reportReturnType]
    return FusedLoc(tuple(found), NoneAttr())


def locate(op: Operation, location: LocationAttr) -> None:
    """Give `op`, the ops nested in it and their blocks' arguments that have no
    location `location`."""
    for inner in op.walk():
        if isinstance(inner.location, UnknownLoc):
            inner.location = location
        for region in inner.regions:
            for block in region.blocks:
                for arg in block.args:
                    if isinstance(arg.location, UnknownLoc):
                        arg.location = location


def move_contents(module: ModuleOp, source: ModuleOp) -> None:
    """Make `module` hold `source`'s ops (moved, not copied) and attributes."""
    for old in list(module.body.block.ops):
        old.detach()
    for new in list(source.body.block.ops):
        new.detach()
        module.body.block.add_op(new)
    module.attributes = dict(source.attributes)


def retype(rewriter: PatternRewriter, value: SSAValue, new_type: Attribute) -> SSAValue:
    """`rewriter.replace_value_with_new_type`, keeping a block argument's
    location (xDSL's makes the new argument without one)."""
    new = rewriter.replace_value_with_new_type(value, new_type)
    if isinstance(value, BlockArgument) and isinstance(new, BlockArgument):
        new.location = value.location
    return new


def retype_values(
    rewriter: PatternRewriter, types: Mapping[SSAValue, Attribute]
) -> None:
    """Give each value its new type, as `replace_value_with_new_type` does
    (a new value takes over the old one's uses), but the arguments of one
    block all at once: that method rebuilds the block's argument list for
    each argument, quadratic in a function of thousands of parameters
    (docs/performance.md, "Compile time"); and each user's operands at
    once."""
    blocks: dict[Block, list[BlockArgument]] = {}
    for value in types:
        if isinstance(value, BlockArgument):
            blocks.setdefault(value.block, []).append(value)
        else:
            rewriter.replace_value_with_new_type(value, types[value])
    for block, olds in blocks.items():
        args = list(block.args)
        news: list[BlockArgument] = []
        for old in olds:
            new = BlockArgument(types[old], block, old.index)
            new.name_hint = old.name_hint
            new.location = old.location  # where the parameter is written
            args[old.index] = new
            news.append(new)
        # one new argument list (xDSL's Rewriter sets it the same way)
        block._args = tuple(args)  # pyright: ignore[reportPrivateUsage]
        # each user's operands at once: setting them one by one rebuilds the
        # operand list each time, quadratic in a bucket's coco.concat
        renamed: dict[SSAValue, SSAValue] = dict(zip(olds, news))
        users = {use.operation: None for old in olds for use in old.uses}
        for user in users:
            user.operands = [renamed.get(v, v) for v in user.operands]
        if (op := block.parent_op()) is not None:
            rewriter.handle_operation_modification(op)
        rewriter.has_done_action = True
