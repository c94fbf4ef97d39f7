"""coco-reorder: the elementwise consumers of an `all_gather` move before it, onto
the slices; the all_gather moves after them.

CoCoNet's reorder. After `coco-split-all-reduce`, `all_reduce(g)` reads
`all_gather(reduce_scatter(g))`, and the compute that consumes the gathered value
runs, redundantly, on the whole tensor on every rank. This pass makes each rank
compute on its own block instead:

- The *slice set* of `%ag = coco.all_gather %s` (`%s: sliced<D>`) is the forward
  closure of elementwise ops (binary, unary, cmp, select, convert, dropout) whose
  operands are `%ag`, values of the slice set, or replicated values. Each such op is
  rebuilt where it stands, on slices: its result is sliced along the dimension
  that lines up with `D` (broadcasting aligns dims from the right).
- A replicated operand broadcast along that dimension (absent or of size 1: a
  rank-0 `lr`, a bias `[H]` against `[B, H]` sliced<0>) is used as it is; another
  one is cut by `coco.all_slice` (a bias `[H]` against `[B, H]` sliced<1>: dim 0),
  one all_slice per value and dimension. Replicated elementwise ops whose result
  is only used cut, on one dimension, by the slice set are computed on slices too
  (`b1 * m` becomes `b1 * all_slice(m)`: Adam's state is then only read through its
  slice, which `coco-slice-state` exploits); the all_slice of an all_gather along
  its own dimension is the all_gather's operand.
- `coco.norm(v)` of a slice-set value becomes `sqrt(all_reduce(reduce(v*v, sum,
  all dims), sum))`; `coco.reduce(v, K, dims)` over dims that include the sliced
  one becomes the reduction of the block (local partials) and an `all_reduce`
  with `K`; over dims that exclude it, the reduction joins the slice set (its result
  is sliced, the dimension renumbered).
- A slice-set value also used whole (by `coco.update`, `func.return`, `coco.send`,
  `coco.matmul`, any op outside the slice set) gets one `coco.all_gather` right after
  its sliced definition. The original all_gather is erased once unused.
- Dropout keeps its meaning: its mask is drawn at global indices
  (docs/interpreter.md, "Dropout"), so it commutes with slicing.

Every replaced result keeps its type, so the ops outside the slice set are
untouched. Names: a rebuilt op keeps its `name`; the all_gather of a value whose
producer is named `X` is `X_ag`, the all_reduce finishing a reduction or norm `X`
is `X_ar` (the norm's `sqrt` keeps `X`).

Preconditions, checked when the pass is targeted with `op=NAME` (the all_gather's
name; after `coco-split-all-reduce` an all_reduce `N` gives `N_rs` and `N_ag`):
the op is a `coco.all_gather` directly in a function body, and something consumes
its result that can move: an elementwise op whose other operands are replicated
(a local operand stops the slice set: local with sliced is an error), a norm or a
reduction. Without `op=`, every all_gather is reordered and those with nothing to
move are left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum, auto

from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from coconet_ir.diagnostics import location_of
from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    AllGatherOp,
    AllReduceOp,
    AllSliceOp,
    ConvertOp,
    LayoutAttr,
    MulOp,
    NormOp,
    ReduceKind,
    ReduceOp,
    SqrtOp,
    TensorType,
    element_info,
    infer_reduce,
    label_of,
    operand_axis,
    result_axis,
    tensor_type,
)
from coconet_ir.passes.base import (
    ListedOpsPass,
    function_body_ops,
    rewrite_once,
    rewriting,
)
from coconet_ir.passes.regions import listed_in_order


def suffixed(op: Operation, suffix: str) -> str | None:
    """`LABEL_suffix` for an op labelled LABEL, None for an unlabelled one."""
    label = label_of(op)
    return None if label is None else f"{label}_{suffix}"


class MoveKind(Enum):
    SLICED = auto()
    """Rebuilt on slices; its result is the slice of the original result."""
    PARTIAL = auto()
    """A reduction over the sliced dim: the block's partial, then an all_reduce."""
    NORM = auto()
    """A norm: `sqrt(all_reduce(reduce(v*v)))`."""


@dataclass(frozen=True)
class Move:
    """How one op of the slice set is rebuilt."""

    kind: MoveKind
    sliced_type: TensorType | None = None
    """The result type on slices (SLICED only)."""


@dataclass
class SliceSet:
    """The ops of one block that move onto slices, found in two linear sweeps:
    forward from the all_gathers (`grow`), then backward over replicated
    producers whose result the slice set only uses cut (`pull`)."""

    seeds: list[AllGatherOp]
    allowed: set[Operation] | None = None
    """With a schedule's explicit list (`ops=`): the only ops that may move
    forward from the seeds (replicated producers are still pulled)."""
    sliced: dict[SSAValue, TensorType] = field(
        default_factory=dict[SSAValue, TensorType]
    )
    """Values of the slice set (replicated in the program) → their type on slices."""
    moves: dict[Operation, Move] = field(default_factory=dict[Operation, Move])
    demands: dict[SSAValue, list[int]] = field(
        default_factory=dict[SSAValue, list[int]]
    )
    """Replicated value → the dim each of its uses in the slice set cuts it along."""

    def grow(self, block: Block) -> None:
        seeds = set(self.seeds)
        for op in block.ops:
            if op in seeds:
                assert isinstance(op, AllGatherOp)
                self.sliced[op.result] = tensor_type(op.operand)
                continue
            if self.allowed is not None and op not in self.allowed:
                continue
            move = self.classify(op)
            if move is None:
                continue
            self.moves[op] = move
            if move.sliced_type is not None:
                self.sliced[op.results[0]] = move.sliced_type

    def classify(self, op: Operation) -> Move | None:
        if isinstance(op, ReduceOp | NormOp):
            return self.classify_reduction(op)
        if isinstance(op, ELEMENTWISE_OPS):
            return self.classify_elementwise(op)
        return None

    def classify_reduction(self, op: ReduceOp | NormOp) -> Move | None:
        operand = self.sliced.get(op.operand)
        if operand is None:
            return None
        if isinstance(op, NormOp):
            return Move(MoveKind.NORM)
        result = infer_reduce(operand, op.reduced_dims, op.keeps_dims)
        if result.layout.is_local:
            return Move(MoveKind.PARTIAL)
        return Move(MoveKind.SLICED, result)

    def classify_elementwise(self, op: Operation) -> Move | None:
        result = tensor_type(op.results[0])
        if not result.layout.is_replicated:  # then no operand is local or sliced
            return None
        dims = {
            result_axis(t, result.rank, t.layout.sliced_dim)
            for t in (self.sliced.get(o) for o in op.operands)
            if t is not None
        }
        if len(dims) != 1:
            return None
        (dim,) = dims
        self.demand_operands(op, result, dim)
        return Move(MoveKind.SLICED, result.with_layout(LayoutAttr.sliced(dim)))

    def demand_operands(self, op: Operation, result: TensorType, dim: int) -> None:
        """Record the cut each replicated operand of `op` needs."""
        for operand in op.operands:
            if operand in self.sliced:
                continue
            axis = operand_axis(tensor_type(operand), result, dim)
            if axis is not None:
                self.demands.setdefault(operand, []).append(axis)

    def pull(self, block: Block) -> None:
        for op in reversed(block.ops):
            if op in self.moves or not isinstance(op, ELEMENTWISE_OPS):
                continue
            if any(operand in self.sliced for operand in op.operands):
                continue  # its slice-set operands cut other dims than its result
            result = op.results[0]
            axis = self.sole_demand(result)
            if axis is None:
                continue
            sliced_type = tensor_type(result).with_layout(LayoutAttr.sliced(axis))
            self.moves[op] = Move(MoveKind.SLICED, sliced_type)
            self.sliced[result] = sliced_type
            self.demand_operands(op, tensor_type(result), axis)

    def sole_demand(self, value: SSAValue) -> int | None:
        """The dim every use of `value` cuts it along, when all its uses are in
        the slice set and agree."""
        axes = self.demands.get(value)
        if not axes or len(set(axes)) != 1 or len(axes) != value.uses.get_length():
            return None
        return axes[0]

    def why_not(self, op: Operation) -> str:
        """Why `op`, which uses no value this set cannot move, stays."""
        if not isinstance(op, (ReduceOp, NormOp, *ELEMENTWISE_OPS)):
            return "only elementwise ops, norms and reductions move onto slices"
        if not any(o in self.sliced for o in op.operands):
            return "it uses neither the all_gather's value nor a moved computation"
        if any(tensor_type(o).layout.is_local for o in op.operands):
            return "an operand is local (local with sliced is an error)"
        return "its operands are cut along different dims"

    def moves_something(self, seed: AllGatherOp) -> bool:
        return any(use.operation in self.moves for use in seed.result.uses)


def norm_of_slice(op: NormOp, block: SSAValue) -> list[Operation]:
    """The ops computing `op` (a norm) from `block`, each rank's slice of its
    operand: `sqrt(all_reduce(reduce(x*x)))`, the last op's result the norm.
    On f16/bf16 the squares and sums run in f32 and the root is rounded once,
    as `coco.norm` does (squaring in f16 would overflow from |x| > 256). Names:
    the all_reduce is `LABEL_ar`, the root keeps `LABEL`."""
    element_type = tensor_type(block).element_type
    widen = element_info(element_type).is_half
    prologue: list[Operation] = [ConvertOp(block, f32)] if widen else []
    if prologue:
        block = prologue[0].results[0]
    square = MulOp(block, block)
    partial = ReduceOp(square, ReduceKind.SUM, range(tensor_type(block).rank))
    total = AllReduceOp(partial, "sum", label=suffixed(op, "ar"))
    root = SqrtOp(total, label=None if widen else label_of(op))
    epilogue: list[Operation] = (
        [ConvertOp(root, element_type, label=label_of(op))] if widen else []
    )
    hint = op.result.name_hint
    if hint is not None:
        square.result.name_hint = f"{hint}_square"
        partial.result.name_hint = f"{hint}_partial"
        total.result.name_hint = f"{hint}_squared"
        for widened in prologue:
            widened.results[0].name_hint = f"{hint}_f32"
        if widen:
            root.result.name_hint = f"{hint}_root"
    return [*prologue, square, partial, total, root, *epilogue]


@dataclass
class SliceSetRewriter:
    """Rebuilds the slice set's ops on slices, in program order, then erases the
    originals."""

    moving: SliceSet
    rewriter: PatternRewriter
    slice_of: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])
    """Original value → its slice."""
    cuts: dict[tuple[SSAValue, int], SSAValue] = field(
        default_factory=dict[tuple[SSAValue, int], SSAValue]
    )
    """(replicated value, dim) → its all_slice."""

    def rewrite(self, block: Block) -> None:
        for seed in self.moving.seeds:
            self.slice_of[seed.result] = seed.operand
        moved = [op for op in block.ops if op in self.moving.moves]
        for op in moved:
            with rewriting(op):
                self.rebuild(op, self.moving.moves[op])
        for op in reversed(moved):
            self.rewriter.erase(op)
        for seed in self.moving.seeds:
            if not seed.result.uses:
                self.rewriter.erase(seed)

    def rebuild(self, op: Operation, move: Move) -> None:
        if move.kind is MoveKind.NORM:
            assert isinstance(op, NormOp)
            self.rebuild_norm(op)
        elif move.kind is MoveKind.PARTIAL:
            assert isinstance(op, ReduceOp)
            self.rebuild_partial(op)
        else:
            assert move.sliced_type is not None
            self.rebuild_sliced(op, move.sliced_type)

    def rebuild_sliced(self, op: Operation, sliced_type: TensorType) -> None:
        result = op.results[0]
        dim = sliced_type.layout.sliced_dim
        operands = [self.cut(o, tensor_type(result), dim, op) for o in op.operands]
        new = op.create(
            operands=operands,
            result_types=[sliced_type],
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        new.results[0].name_hint = result.name_hint
        self.rewriter.insert(new, InsertPoint.before(op))
        self.slice_of[result] = new.results[0]
        self.gather_for_outside_uses(op, new)

    def rebuild_partial(self, op: ReduceOp) -> None:
        kind = op.kind.data
        partial = ReduceOp(
            self.slice_of[op.operand],
            kind,
            op.reduced_dims,
            keep_dims=op.keeps_dims,
            label=label_of(op),
        )
        total = AllReduceOp(partial, str(kind), label=suffixed(op, "ar"))
        if op.result.name_hint is not None:
            partial.result.name_hint = f"{op.result.name_hint}_partial"
        self.replace_with(op, [partial, total])

    def rebuild_norm(self, op: NormOp) -> None:
        self.replace_with(op, norm_of_slice(op, self.slice_of[op.operand]))

    def replace_with(self, op: Operation, new_ops: list[Operation]) -> None:
        """Insert `new_ops` before `op`; the last one's result takes over `op`'s
        uses (`op` itself is erased with the other originals)."""
        self.rewriter.insert(new_ops, InsertPoint.before(op))
        result = new_ops[-1].results[0]
        result.name_hint = op.results[0].name_hint
        self.rewriter.replace_all_uses_with(op.results[0], result)

    def cut(
        self, value: SSAValue, result: TensorType, dim: int, user: Operation
    ) -> SSAValue:
        """The operand `value` of `user` on slices: its slice for a slice-set value,
        itself when broadcast along the sliced dim, else its all_slice."""
        if value in self.slice_of:
            return self.slice_of[value]
        axis = operand_axis(tensor_type(value), result, dim)
        if axis is None:
            return value
        return self.all_slice(value, axis, user)

    def all_slice(self, value: SSAValue, axis: int, user: Operation) -> SSAValue:
        """`all_slice value dim = axis`, made once, before its first user; the
        operand itself for an all_gather of a value sliced along `axis`."""
        owner = value.owner
        if isinstance(owner, AllGatherOp):
            gathered = tensor_type(owner.operand)
            if gathered.layout.sliced_dim == axis:
                return owner.operand
        key = (value, axis)
        if key not in self.cuts:
            cut = AllSliceOp(value, axis)
            if value.name_hint is not None:
                cut.result.name_hint = f"{value.name_hint}_slice"
            self.rewriter.insert(cut, InsertPoint.before(user))
            self.cuts[key] = cut.result
        return self.cuts[key]

    def gather_for_outside_uses(self, op: Operation, new: Operation) -> None:
        """One all_gather of `new`'s result for the uses of `op`'s result that
        stay outside the slice set."""
        moves = self.moving.moves
        result = op.results[0]
        if all(use.operation in moves for use in result.uses):
            return
        gather = AllGatherOp(new.results[0], label=suffixed(op, "ag"))
        gather.result.name_hint = result.name_hint
        self.rewriter.insert(gather, InsertPoint.after(new))
        self.rewriter.replace_uses_with_if(
            result, gather.result, lambda use: use.operation not in moves
        )


def gathers(block: Block, label: str | None) -> list[AllGatherOp]:
    """The all_gathers of `block` (labelled `label`, if given)."""
    return [
        op
        for op in block.ops
        if isinstance(op, AllGatherOp) and (label is None or label_of(op) == label)
    ]


def slice_set(block: Block, seeds: list[AllGatherOp]) -> SliceSet:
    """What moves onto slices from `seeds`: seeds that move nothing dropped."""
    moving = SliceSet(seeds)
    moving.grow(block)
    moving.pull(block)
    moving.seeds = [seed for seed in seeds if moving.moves_something(seed)]
    return moving


def listed_slice_set(
    listed: list[Operation], refuse: Callable[[Operation, str], Exception]
) -> SliceSet:
    """The slice set of a schedule's explicit list (`coco-reorder{ops=...}`,
    CoCoNet's `reorder(ag, {computations})`): the listed all_gathers are the
    seeds; the listed computations move, with every op on a path between two
    listed ops (the unnamed ops of a computation), and the replicated
    producers only they read; nothing else moves. Raises `refuse(op, reason)`
    naming the op that prevents it."""
    block = listed[0].parent_block()
    assert block is not None
    order, ordered, between = listed_in_order(listed, refuse)
    seeds = [op for op in ordered if isinstance(op, AllGatherOp)]
    computations = [op for op in ordered if not isinstance(op, AllGatherOp)]
    if not seeds:
        raise refuse(ordered[0], "the list names no coco.all_gather")
    if not computations:
        raise refuse(seeds[0], "the list names no computation to move")
    moving = SliceSet(seeds, allowed=set(computations) | between)
    moving.grow(block)
    moving.pull(block)
    for op in computations:
        if op in moving.moves:
            continue
        path, frontier = set[Operation](), [op]
        while frontier:  # what `op` depends on between the listed ops
            for value in frontier.pop().operands:
                owner = value.owner
                if owner in between and owner not in path:
                    assert isinstance(owner, Operation)
                    path.add(owner)
                    frontier.append(owner)
        stuck = next(
            (o for o in sorted(path, key=order.__getitem__) if o not in moving.moves),
            op,
        )
        if stuck is op:
            reason = moving.why_not(op)
        else:
            reason = (
                f"'{stuck.name}' at {location_of(stuck)}, on its path from the "
                "all_gather, cannot move"
            )
        raise refuse(
            op,
            f"'{op.name}' at {location_of(op)} cannot move onto the slices: {reason}",
        )
    for seed in seeds:
        if not moving.moves_something(seed):
            raise refuse(seed, "no listed computation uses its result")
    return moving


@dataclass(frozen=True)
class ReorderListed(RewritePattern):
    """Rewrite one precomputed slice set of a function's body."""

    moving: SliceSet

    @op_type_rewrite_pattern
    def match_and_rewrite(self, func: FuncOp, rewriter: PatternRewriter) -> None:
        block = self.moving.seeds[0].parent_block()
        if block is not None and block.parent_op() is func:
            SliceSetRewriter(self.moving, rewriter).rewrite(block)


@dataclass(frozen=True)
class ReorderFunction(RewritePattern):
    """Reorder the all_gathers (labelled `label`, if given) of one function."""

    label: str | None = None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, func: FuncOp, rewriter: PatternRewriter) -> None:
        if func.is_declaration:
            return
        block = func.body.block
        seeds = gathers(block, self.label)
        if not seeds:
            return
        moving = slice_set(block, seeds)
        if moving.seeds:
            SliceSetRewriter(moving, rewriter).rewrite(block)


@dataclass(frozen=True)
class Reorder(ListedOpsPass):
    """Move the elementwise consumers of every (or the named) all_gather onto the
    slices, before the all_gather."""

    name = "coco-reorder"

    ops: tuple[str, ...] = ()
    """A schedule's explicit list: the all_gather and the computations that
    move onto its slices (CoCoNet's `reorder(ag, {...})`); nothing else moves."""

    def rewrite_listed(self, module: ModuleOp, listed: list[Operation]) -> None:
        moving = listed_slice_set(listed, self.refuse)
        rewrite_once(module, ReorderListed(moving))

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in function_body_ops(module) if isinstance(op, AllGatherOp))

    def problem(self, op: Operation) -> str | None:
        assert isinstance(op, AllGatherOp)
        block = op.parent_block()
        assert block is not None
        # The slice set the rewrite grows: from every gather the pass targets.
        seeds = gathers(block, self.op) if self.op is not None else [op]
        if op in slice_set(block, seeds).seeds:
            return None
        return (
            "nothing to move: no elementwise op (with replicated other operands), "
            "norm or reduction consumes its result"
        )

    def not_a_candidate(self, op: Operation) -> str | None:
        if not isinstance(op.parent_op(), FuncOp):
            return None
        return (
            "it is not a coco.all_gather (after coco-split-all-reduce, an "
            "all_reduce named N gives N_rs and N_ag)"
        )

    def rewrite(self, module: ModuleOp) -> None:
        rewrite_once(module, ReorderFunction(self.op))
