"""coco-fuse: group collectives and the compute on their slices into
`coco.fusion` regions (docs/dialect.md, "Regions created by transformations";
docs/passes/coco-fuse.md), each one kernel for the lowering.

Two kinds of group, formed in this order in every function:

1. **Fused collectives** (CoCoNet's fused all-reduce): a `reduce_scatter`, the
   elementwise ops that compute on its slices (any op of `coco.
   ELEMENTWISE_OPS` with an operand in the group), the `all_gather`s of those
   slices and the `send`s of group values; with `reductions` (the default),
   also the reductions of a whole slice to a rank-0 partial and the scalar
   `all_reduce`s completing them (LAMB's norms), and the compute on their
   results; always the keep-dims reductions of a slice's rows (a LayerNorm's
   statistics: `is_row_reduction`) and the compute on those rows. Groups
   joined by an op that uses both merge (one kernel, several reductions).
   Then the group grows **backward**: an `all_slice`, an elementwise op or a
   reduction step whose every use is in the group joins it (`beta1 * m` of
   Adam's sliced moment), except rank-0 arithmetic on arguments and
   constants (`1 - beta1`), which the host computes once.
2. **Elementwise chains**: the remaining connected elementwise ops, when there
   are at least two.

A group never makes a cycle: an op that depends on a group value through an op
outside the group does not join it. Nor does an op that would bring two
reductions of the same value into one group. A lone `reduce_scatter` is left
alone.

The fusion takes the place of the group's last op; its inputs are the values
the group uses from outside, its results the group values used outside. It is
named `NAME_fused` after the group's first named op, preferring a
reduce_scatter.

With `op=NAME`, only the region the default pass makes that holds the
reduce_scatter or elementwise op named NAME is fused (`FusionPlan`: the
default pass run on a copy), whichever of its ops is named. The pass refuses
(changing nothing) when the default pass leaves that op out of every region:
the one op that could join it closes a cycle ("fusing would create a cycle:
'coco.y' at LOC uses a group value through 'coco.x' at LOC, which is outside
the group"), or a second reduction of the same data, or nothing to fuse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from math import prod

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from coconet_ir.analysis.fused_plan import is_row_reduction
from coconet_ir.diagnostics import location_of
from coconet_ir.dialects import coco
from coconet_ir.passes.base import ListedOpsPass, function_body_ops, rewrite_once
from coconet_ir.passes.regions import (
    Boundary,
    descendants,
    listed_in_order,
    outline,
    positions,
    reorders_messages,
)

Joins = Callable[[Operation, Operation], bool]
"""Whether `op` may join the group of `producer` through a value of it."""


SCALAR_ELEMENTS = 1
"""The most elements a value reduced across ranks inside a fused kernel may
have: a norm's or a sum's rank-0 partial (`coco.all_reduce` of it)."""


def joins_collective_group(
    op: Operation, producer: Operation, *, reductions: bool = True
) -> bool:
    """Slices flow into compute, gathers and sends, and (with `reductions`)
    into reductions of the whole slice whose scalar partials an all_reduce
    adds up; a gathered value only into a send."""
    if isinstance(producer, coco.SendOp):
        return False
    if isinstance(op, coco.SendOp):
        return True
    if isinstance(producer, coco.AllGatherOp):
        return False
    if isinstance(op, coco.ReduceOp) and is_row_reduction(op):
        return True
    if isinstance(op, coco.ReduceOp | coco.AllReduceOp):
        return reductions and is_reduction_step(op)
    return isinstance(op, (*coco.ELEMENTWISE_OPS, coco.AllGatherOp))


def is_reduction_step(op: coco.ReduceOp | coco.AllReduceOp) -> bool:
    """A slice reduction or the scalar all_reduce completing one."""
    if isinstance(op, coco.ReduceOp):
        return is_slice_reduction(op)
    return is_scalar_all_reduce(op)


def is_slice_reduction(op: coco.ReduceOp) -> bool:
    """A reduction of a sliced value over all its dims: each rank's scalar
    partial (local), which a scalar all_reduce completes."""
    operand = coco.tensor_type(op.operand)
    return operand.layout.is_sliced and len(op.reduced_dims) == operand.rank


def is_scalar_all_reduce(op: coco.AllReduceOp) -> bool:
    return prod(coco.tensor_type(op.operand).dims) <= SCALAR_ELEMENTS


def joins_chain(op: Operation, producer: Operation) -> bool:
    return isinstance(op, coco.ELEMENTWISE_OPS) and isinstance(
        producer, coco.ELEMENTWISE_OPS
    )


@dataclass
class Grouping:
    """Groups grown in one pass over a block, in order (SSA order is
    topological). Group ids merge union-find style.

    `reach[op]` holds the groups `op` depends on or belongs to; `via[op]` the
    groups it depends on through some op outside them. An op may join group G
    only when G is not in its `via`: that is the cycle check.

    Only OPEN groups — some member's result still has a user not visited yet —
    are kept in these sets: an op can join only a group one of its operands
    comes from, so a closed group is never asked about again, and the sets
    (transitive, one entry per group) stay the size of the open frontier,
    not of everything before: a chain of L layers is linear in L, not
    quadratic."""

    joins: Joins
    seeds: Callable[[Operation], bool]
    merge_reductions: bool
    parent: list[int] = field(default_factory=list[int])
    group_of: dict[Operation, int] = field(default_factory=dict[Operation, int])
    reach: dict[Operation, set[int]] = field(default_factory=dict[Operation, set[int]])
    via: dict[Operation, set[int]] = field(default_factory=dict[Operation, set[int]])
    group_via: dict[int, set[int]] = field(default_factory=dict[int, set[int]])
    problems: dict[int, str] = field(default_factory=dict[int, str])
    open_uses: dict[int, int] = field(default_factory=dict[int, int])
    """Group root → uses of its members' results by ops not visited yet."""

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def norm(self, groups: Iterable[int]) -> set[int]:
        """The roots of `groups` that are still open."""
        return {r for g in groups if self.open_uses[r := self.find(g)]}

    def group(self, op: Operation) -> int | None:
        g = self.group_of.get(op)
        return None if g is None else self.find(g)

    def visit(self, op: Operation) -> None:
        self.place(op)
        for value in op.operands:
            g = self.group_of.get(value.owner)  # type: ignore[arg-type]
            if g is not None:
                self.open_uses[self.find(g)] -= 1

    def place(self, op: Operation) -> None:
        """Put `op` in a group (joining, merging or seeding) or outside."""
        producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        reach = self.norm(g for p in producers for g in self.reach.get(p, ()))
        linked = {
            g
            for p in producers
            if (g := self.group(p)) is not None and self.joins(op, p)
        }
        via = self.norm(g for p in producers for g in self.via.get(p, ()))
        bad = (
            via
            | (reach - linked)
            | self.norm(h for g in linked for h in self.group_via[g])
        )
        problem = self.join_problem(op, linked, bad)
        if linked and problem is None:
            self.add(op, self.merge(linked), reach, bad)
            return
        if problem is not None:
            for g in linked:
                self.problems.setdefault(g, problem)
        if self.seeds(op):
            self.add(op, self.new_group(), reach, reach | via)
            return
        self.reach[op] = reach
        self.via[op] = reach | via

    def join_problem(
        self, op: Operation, linked: set[int], bad: set[int]
    ) -> str | None:
        """Why `op` cannot join (and merge) the `linked` groups, if it cannot."""
        for g in sorted(linked & bad):
            through = self.cycle_witness(op, g)
            return (
                f"fusing would create a cycle: '{op.name}' at {location_of(op)} "
                f"uses a group value through '{through.name}' at "
                f"{location_of(through)}, which is outside the group"
            )
        if self.merge_reductions and len(linked) > 1:
            return self.duplicate_reduction(linked)
        return None

    def cycle_witness(self, op: Operation, g: int) -> Operation:
        """An op outside group `g` on a path from `g` to `op`."""
        for value in op.operands:
            p = value.owner
            if not isinstance(p, Operation) or g not in self.norm(
                self.reach.get(p, ())
            ):
                continue
            if self.group(p) != g:
                return p
            if g in self.norm(self.via.get(p, ())):
                return self.cycle_witness(p, g)
        for member, h in self.group_of.items():
            if self.find(h) != g and g in self.norm(self.via.get(member, ())):
                return member
        return op

    def duplicate_reduction(self, linked: set[int]) -> str | None:
        return duplicate_reduction(
            member for member, h in self.group_of.items() if self.find(h) in linked
        )

    def new_group(self) -> int:
        self.parent.append(len(self.parent))
        self.group_via[len(self.parent) - 1] = set()
        self.open_uses[len(self.parent) - 1] = 0
        return len(self.parent) - 1

    def merge(self, linked: set[int]) -> int:
        root, *others = sorted(linked)
        for g in others:
            self.parent[g] = root
            self.group_via[root] |= self.group_via[g]
            self.open_uses[root] += self.open_uses.pop(g)
            if g in self.problems:
                self.problems.setdefault(root, self.problems[g])
        return root

    def add(self, op: Operation, g: int, reach: set[int], via: set[int]) -> None:
        self.group_of[op] = g
        self.open_uses[g] += sum(r.uses.get_length() for r in op.results)
        self.reach[op] = reach | {g}
        self.via[op] = via - {g}
        self.group_via[g] |= self.via[op]

    def groups(self, order: dict[Operation, int]) -> list[list[Operation]]:
        """The groups' ops, each in block order (`order`: op positions)."""
        found: dict[int, list[Operation]] = {}
        for op, g in self.group_of.items():
            found.setdefault(self.find(g), []).append(op)
        return [sorted(ops, key=order.__getitem__) for ops in found.values()]

    def absorb_producers(self, block: Block, reductions: bool) -> None:
        """Grow the groups backward: an op that could join a group (an
        `all_slice`, an elementwise op, a slice reduction, a scalar
        all_reduce) and whose uses are all in one group joins it, the block
        walked from its end so that a producer sees its users decided. Scalar
        arithmetic on arguments and constants (`1 - b1`) stays outside: the
        host computes it once, not every thread. Joining only values the
        group alone reads cannot close a cycle."""
        host_scalars = HostScalars()
        for op in reversed(block.ops):
            if op in self.group_of or not is_absorbable(op, reductions):
                continue
            if all(host_scalars.holds(r) for r in op.results):
                continue
            users = {self.group(use.operation) for r in op.results for use in r.uses}
            if len(users) == 1 and (g := users.pop()) is not None:
                self.group_of[op] = g


def is_absorbable(op: Operation, reductions: bool) -> bool:
    if isinstance(op, coco.ReduceOp) and is_row_reduction(op):
        return True
    if isinstance(op, coco.ReduceOp | coco.AllReduceOp):
        return reductions and is_reduction_step(op)
    return isinstance(op, (coco.AllSliceOp, *coco.ELEMENTWISE_OPS))


@dataclass
class HostScalars:
    """Which values are rank-0 and computed from arguments and constants
    only, by elementwise ops: what the host computes once per step."""

    known: dict[SSAValue, bool] = field(default_factory=dict[SSAValue, bool])

    def holds(self, value: SSAValue) -> bool:
        if value not in self.known:
            owner = value.owner
            self.known[value] = coco.tensor_type(value).rank == 0 and (
                not isinstance(owner, Operation)
                or (
                    isinstance(owner, (coco.ConstantOp, *coco.ELEMENTWISE_OPS))
                    and all(self.holds(o) for o in owner.operands)
                )
            )
        return self.known[value]


def grow(block: Block, grouping: Grouping) -> Grouping:
    for op in block.ops:
        grouping.visit(op)
    return grouping


def collective_groups(block: Block, reductions: bool = True) -> Grouping:
    grouping = grow(
        block,
        Grouping(
            partial(joins_collective_group, reductions=reductions),
            lambda op: isinstance(op, coco.ReduceScatterOp),
            merge_reductions=True,
        ),
    )
    grouping.absorb_producers(block, reductions)
    return grouping


def chain_groups(block: Block) -> Grouping:
    """Elementwise chains, but not of rank-0 arithmetic on arguments and
    constants (`1 - lr * wd`): the host computes that once, as it does
    outside a fused collective."""
    host_scalars = HostScalars()

    def on_device(op: Operation) -> bool:
        return isinstance(op, coco.ELEMENTWISE_OPS) and not all(
            host_scalars.holds(r) for r in op.results
        )

    return grow(
        block,
        Grouping(
            lambda op, producer: on_device(op) and joins_chain(op, producer),
            on_device,
            merge_reductions=False,
        ),
    )


def fusion_label(ops: list[Operation]) -> str | None:
    """`LABEL_fused` after the first labelled reduce_scatter, else the first
    labelled op."""
    ordered = sorted(ops, key=lambda op: not isinstance(op, coco.ReduceScatterOp))
    label = next((n for op in ordered if (n := coco.label_of(op)) is not None), None)
    return None if label is None else f"{label}_fused"


def build_fusion(found: Boundary, body: Block) -> coco.FusionOp:
    label = fusion_label(list(found.ops))
    return coco.FusionOp.create(
        operands=list(found.inputs),
        result_types=[v.type for v in found.outputs],
        attributes=coco.label_attribute(label),
        regions=[Region(body)],
    )


NOTHING_TO_FUSE = (
    "there is nothing to fuse it with (no elementwise op, all_gather or send "
    "uses its result)"
)


def group_problem(grouping: Grouping, ops: list[Operation]) -> str | None:
    """Why the group is not fused, if it is not. A group cut short (by a
    cycle or a second reduction) is fused as far as it goes; one cut down to
    a lone op says what cut it."""
    if len(ops) < 2:
        return grouping.problems.get(grouping.group(ops[0]), NOTHING_TO_FUSE)  # type: ignore[arg-type]
    if reorders_messages(ops, descendants(ops)):
        return "fusing would reorder the messages of a pipeline channel"
    return None


@dataclass
class FusionPlan:
    """What the default coco-fuse makes of one function: its regions (the
    function's own ops, in the order they are fused) and why each op of a
    group left unfused is left so. Found by fusing a copy, so a targeted fuse
    (`op=`) outlines exactly a region the default one makes."""

    original: dict[Operation, Operation]
    """An op of the copy → the function's op."""
    regions: list[list[Operation]] = field(default_factory=list[list[Operation]])
    problems: dict[Operation, str] = field(default_factory=dict[Operation, str])

    @staticmethod
    def of(func: FuncOp, reductions: bool, collectives: bool = True) -> FusionPlan:
        copy = func.clone()
        Block([copy])  # the rewriter inserts next to ops of a block
        plan = FusionPlan(dict(zip(copy.walk(), func.walk())))
        fuse_function(copy, reductions, PatternRewriter(copy), plan, collectives)
        return plan

    def note(self, group: list[Operation], problem: str | None) -> None:
        """Record a group of the copy and why it is not fused."""
        ops = [self.original[op] for op in group]
        if problem is None:
            self.regions.append(ops)
            for op in ops:
                self.problems.pop(op, None)
            return
        fused = {op for region in self.regions for op in region}
        for op in ops:
            if op not in fused:
                self.problems.setdefault(op, problem)

    def problem(self, op: Operation) -> str | None:
        """Why the default fuse leaves `op` outside every region, if it does."""
        if any(op in region for region in self.regions):
            return None
        return self.problems.get(op, NOTHING_TO_FUSE)


def fuse_groups(
    block: Block,
    grouping: Grouping,
    rewriter: PatternRewriter,
    plan: FusionPlan | None = None,
) -> None:
    """Outline the groups that can be fused; record each in `plan`, if given."""
    for ops in grouping.groups(positions(block)):
        problem = group_problem(grouping, ops)
        if plan is not None:
            plan.note(ops, problem)
        if problem is None:
            outline(ops, build_fusion, rewriter)


def fuse_function(
    func: FuncOp,
    reductions: bool,
    rewriter: PatternRewriter,
    plan: FusionPlan | None = None,
    collectives: bool = True,
) -> None:
    """Fuse the groups of one function body: fused collectives first (unless
    `collectives` is off), then elementwise chains."""
    block = func.body.block
    if collectives:
        fuse_groups(block, collective_groups(block, reductions), rewriter, plan)
    fuse_groups(block, chain_groups(block), rewriter, plan)
    # A per-peer region's step body is a block of compute: its
    # elementwise chains become one kernel per step too.
    for region in [op for op in block.ops if isinstance(op, coco.PerPeerOp)]:
        inner = region.block
        fuse_groups(inner, chain_groups(inner), rewriter, plan)


@dataclass(frozen=True)
class FuseFunction(RewritePattern):
    """Fuse the groups of one function body (only the regions the default
    fuse makes that hold an op labelled `label`, if given)."""

    label: str | None = None
    reductions: bool = True
    collectives: bool = True

    @op_type_rewrite_pattern
    def match_and_rewrite(self, func: FuncOp, rewriter: PatternRewriter) -> None:
        if func.is_declaration:
            return
        if self.label is None:
            fuse_function(func, self.reductions, rewriter, None, self.collectives)
            return
        for ops in FusionPlan.of(func, self.reductions, self.collectives).regions:
            if any(coco.label_of(op) == self.label for op in ops):
                block = ops[0].parent_block()
                assert block is not None
                outline(
                    sorted(ops, key=positions(block).__getitem__),
                    build_fusion,
                    rewriter,
                )


def is_fusible(op: Operation) -> bool:
    """Whether `op` may be named by `op=`: a reduce_scatter or elementwise op."""
    return isinstance(op, (coco.ReduceScatterOp, *coco.ELEMENTWISE_OPS))


def duplicate_reduction(group: Iterable[Operation]) -> str | None:
    """Why `group` cannot be one kernel, if it holds two reduce_scatters of
    the same value."""
    reduced: dict[object, coco.ReduceScatterOp] = {}
    for member in group:
        if not isinstance(member, coco.ReduceScatterOp):
            continue
        first = reduced.setdefault(member.operand, member)
        if first is not member:
            return (
                "the group would hold two reductions of the same data: "
                f"'{first.name}' at {location_of(first)} and at "
                f"{location_of(member)}"
            )
    return None


def can_be_fused(op: Operation) -> bool:
    """Whether a fused kernel can hold `op`."""
    if isinstance(op, coco.ReduceOp) and is_row_reduction(op):
        return True
    if isinstance(op, coco.ReduceOp | coco.AllReduceOp):
        return is_reduction_step(op)
    return isinstance(
        op,
        (
            coco.ReduceScatterOp,
            coco.AllGatherOp,
            coco.AllSliceOp,
            coco.SendOp,
            *coco.ELEMENTWISE_OPS,
        ),
    )


def block_level(op: Operation, block: Block) -> Operation | None:
    """`op` or the op of `block` that holds it."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        if parent is None:
            return None
        op = parent
    return op


def listed_group(
    listed: Sequence[Operation], refuse: Callable[[Operation, str], Exception]
) -> list[Operation]:
    """The region of a schedule's explicit list (`coco-fuse{ops=...}`): the
    listed ops, every op on a path from one of them to another, and the
    producers only the region reads (not host scalar arithmetic), in block
    order. Raises `refuse(op, reason)` naming the op that prevents one region."""
    block = listed[0].parent_block()
    assert block is not None
    order, ordered, between = listed_in_order(listed, refuse)
    members = set(ordered) | between
    host_scalars = HostScalars()
    for op in reversed(block.ops):
        if op in members or not is_absorbable(op, True):
            continue
        if all(host_scalars.holds(r) for r in op.results):
            continue
        users = {
            block_level(use.operation, block) for r in op.results for use in r.uses
        }
        if users and users <= members:
            members.add(op)
    group = sorted(members, key=order.__getitem__)
    for op in group:
        if not can_be_fused(op):
            where = "lies between the listed ops" if op in between else "is listed"
            raise refuse(
                op,
                f"'{op.name}' at {location_of(op)} {where} and a fused kernel "
                "cannot hold it",
            )
    if len(group) < 2:
        raise refuse(ordered[0], "there is nothing to fuse it with")
    if (problem := duplicate_reduction(group)) is not None:
        raise refuse(ordered[0], problem)
    if reorders_messages(group, descendants(group)):
        raise refuse(
            ordered[0], "fusing would reorder the messages of a pipeline channel"
        )
    return group


@dataclass(frozen=True)
class FuseListed(RewritePattern):
    """Outline one precomputed group of a function's body."""

    group: tuple[Operation, ...]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, func: FuncOp, rewriter: PatternRewriter) -> None:
        if self.group[0].parent_op() is func:
            outline(self.group, build_fusion, rewriter)


@dataclass(frozen=True)
class Fuse(ListedOpsPass):
    """Fuse reduce_scatter + compute + all_gather/send, and elementwise chains,
    into `coco.fusion` regions."""

    name = "coco-fuse"

    reductions: bool = True
    """Grow fused collectives through slice reductions and the scalar
    all_reduces that complete them (LAMB's norms)."""

    collectives: bool = True
    """Make fused collectives (off: elementwise chains only, whose kernels
    touch no peer's memory: for ranks on several nodes)."""

    ops: tuple[str, ...] = ()
    """A schedule's explicit stage list: fuse the ops labelled these, what
    lies between them and what only they read, into ONE region."""

    def rewrite_listed(self, module: ModuleOp, listed: list[Operation]) -> None:
        group = listed_group(listed, self.refuse)
        rewrite_once(module, FuseListed(tuple(group)))

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in function_body_ops(module) if is_fusible(op))

    def problem(self, op: Operation) -> str | None:
        func = op.parent_op()
        assert isinstance(func, FuncOp)
        return FusionPlan.of(func, self.reductions, self.collectives).problem(op)

    def rewrite(self, module: ModuleOp) -> None:
        rewrite_once(module, FuseFunction(self.op, self.reductions, self.collectives))
