"""coco-overlap{chunks=K dim=D}: a matmul and the collective it feeds (or that
feeds it) become one `coco.overlap` region that runs chunk by chunk, so that
chunk `c+1`'s matmul overlaps chunk `c`'s communication (docs/passes/coco-overlap.md).

The region holds the matmul and
- its only user when that is an `all_reduce`, a `reduce_scatter` or a
  `coco.fusion` (coco-fuse's reduce_scatter + compute + all_gather), and/or
- the `all_gather` that produces its lhs (sequence parallelism).

`dim` is the dim of the matmul's result that is chunked (by default the first
one that works): a dim of the lhs rows/batch (the lhs is chunked, the rhs
passed whole) or the last one (the rhs is chunked along its columns). Chunk
dims follow the values through the region (`coconet_ir.analysis.chunks`); every other
input is chunked along the dim it is combined on, or passed whole when it is
broadcast along it (a bias). A dropout inside keeps its mask: the interpreter
draws it at the element's index in the un-chunked tensor.

Preconditions (a targeted matmul that fails one is refused, with the reason):
`chunks` divides the chunk dim of every value of the region; no value is
chunked along its sliced dim or its contracted dim; the region holds no send,
recv, update or nested overlap; outlining it makes no cycle. `op=NAME` names
the matmul (CoCoNet's `overlap(mm, fused, chunks=4)`).

`per_peer=true` makes instead a `coco.per_peer` region, one chunk per rank
along the gathered or scattered dim (`per_peer_region`, `per_peer_plan`);
`auto=true` gives each matmul none, chunks or per peer by the prediction of
the cost model (`choose_overlap`, `coconet_ir.costmodel.overlap_choice`), as
coco-optimize does (docs/passes/coco-overlap.md, "Per peer" and "Choosing the
overlap").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import Rewriter

from coconet_ir.analysis.chunks import PARTIAL, ChunkPlan, plan_chunks
from coconet_ir.costmodel.machines import DEFAULT_MACHINE, PRESETS, Machine, machine
from coconet_ir.costmodel.overlap_choice import (
    OverlapMode,
    chunked_s,
    per_peer_s,
    unoverlapped_s,
)
from coconet_ir.diagnostics import location_of
from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    AllGatherOp,
    AllReduceOp,
    FusionOp,
    MatmulOp,
    OverlapOp,
    PerPeerOp,
    RecvOp,
    ReduceScatterOp,
    SendOp,
    UpdateOp,
    chunk_type,
    communication_in,
    label_attribute,
    label_of,
    tensor_type,
    world_size,
)
from coconet_ir.passes.base import (
    CocoPass,
    function_body_ops,
    in_function_labelled,
    retype,
    rewrite_once,
)
from coconet_ir.passes.regions import Boundary, boundary, cycle_through, outline

CONSUMERS = (AllReduceOp, ReduceScatterOp, FusionOp)
DEFAULT_WORLD = 8
"""The world size `auto` estimates for when the module does not say: one
node of eight GPUs."""
NOT_CHUNKABLE = (SendOp, RecvOp, UpdateOp, OverlapOp)


def region_of(matmul: MatmulOp) -> list[Operation] | str:
    """The matmul with its producer all_gather and/or consumer collective, in
    block order, or why there is no such region."""
    ops: list[Operation] = []
    lhs = matmul.lhs.owner
    if isinstance(lhs, AllGatherOp) and lhs.parent is matmul.parent:
        ops.append(lhs)
    ops.append(matmul)
    users = [use.operation for use in matmul.result.uses]
    if len(users) == 1 and isinstance(users[0], CONSUMERS):
        ops.append(users[0])
    if len(ops) == 1:
        return (
            "no collective feeds or consumes it (expected all_gather -> matmul, or "
            "matmul -> all_reduce, reduce_scatter or coco.fusion as its only user)"
        )
    for op in ops:
        for inner in op.walk():
            if isinstance(inner, NOT_CHUNKABLE):
                return (
                    f"the consumer chain contains '{inner.name}' at "
                    f"{location_of(inner)}, which cannot run chunk by chunk"
                )
    through = cycle_through(ops)
    if through is not None:
        return (
            f"overlapping would create a cycle through '{through.name}' at "
            f"{location_of(through)}"
        )
    return ops


def overlap_plan(
    matmul: MatmulOp, chunks: int, dim: int | None
) -> tuple[list[Operation], ChunkPlan] | str:
    """The region of `matmul` and its chunk plan for the result dim `dim` (by
    default the first that works), or why there is none."""
    ops = region_of(matmul)
    if isinstance(ops, str):
        return ops
    outputs = boundary(ops).outputs
    rank = tensor_type(matmul.result).rank
    if dim is not None and not 0 <= dim < rank:
        return f"dim {dim} is out of range for the result's rank {rank}"
    reasons: list[str] = []
    for candidate in [dim] if dim is not None else range(rank):
        plan = plan_chunks(ops, outputs, matmul, candidate, chunks)
        if isinstance(plan, ChunkPlan):
            return ops, plan
        reasons.append(f"dim {candidate}: {plan}")
    if dim is not None:
        return f"cannot chunk along {reasons[0]}"
    return "no chunkable dim (" + "; ".join(reasons) + ")"


def build_overlap(plan: ChunkPlan, chunks: int, label: str | None):
    """The builder `outline` calls: chunked block arguments, chunk dims."""

    def build(found: Boundary, body: Block) -> OverlapOp:
        input_dims = [plan.dims.get(v, -1) for v in found.inputs]
        for arg, value, d in zip(list(body.args), found.inputs, input_dims):
            typed = chunk_type(tensor_type(value), d, chunks)
            Rewriter.replace_value_with_new_type(arg, typed)
        return OverlapOp.create(
            operands=list(found.inputs),
            result_types=[v.type for v in found.outputs],
            properties={
                "chunks": IntegerAttr(chunks, i64),
                "input_dims": DenseArrayBase.from_list(i64, input_dims),
                "output_dims": DenseArrayBase.from_list(
                    i64, [plan.dims[v] for v in found.outputs]
                ),
            },
            attributes=label_attribute(label),
            regions=[Region(body)],
        )

    return build


def in_body(value: SSAValue, members: set[Operation]) -> bool:
    """Whether `value` is defined inside the region (not one of its inputs)."""
    if isinstance(value, OpResult):
        return value.op in members
    return isinstance(value, BlockArgument) and value.block.parent_op() in members


Found = TypeVar("Found")


class MatmulPattern(RewritePattern, ABC, Generic[Found]):
    """The patterns of this pass: a matmul directly in a function (labelled
    `label`, if given) is rewritten as its `plan` says, when it has one."""

    label: str | None

    @abstractmethod
    def plan(self, matmul: MatmulOp) -> Found | str | None:
        """What to make of `matmul`; None or why not (a sentence) if nothing."""

    @abstractmethod
    def make(self, matmul: MatmulOp, found: Found, rewriter: PatternRewriter) -> None:
        """Rewrite `matmul` as `found` says."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, matmul: MatmulOp, rewriter: PatternRewriter) -> None:
        if not in_function_labelled(matmul, self.label):
            return
        found = self.plan(matmul)
        if found is not None and not isinstance(found, str):
            self.make(matmul, found, rewriter)


Planned = tuple[list[Operation], ChunkPlan]
"""A matmul's region (its ops, in block order) and its chunk plan."""


@dataclass(frozen=True)
class OverlapPattern(MatmulPattern[Planned]):
    """Outline a matmul (labelled `label`, if given) with its collectives as a
    coco.overlap of `chunks` chunks along the result dim `dim`, when it can."""

    chunks: int
    dim: int | None = None
    label: str | None = None

    def plan(self, matmul: MatmulOp) -> Planned | str:
        return overlap_plan(matmul, self.chunks, self.dim)

    def make(self, matmul: MatmulOp, found: Planned, rewriter: PatternRewriter) -> None:
        make_overlap(matmul, *found, self.chunks, rewriter)


def make_overlap(
    matmul: MatmulOp,
    ops: list[Operation],
    plan: ChunkPlan,
    chunks: int,
    rewriter: PatternRewriter,
) -> None:
    """Outline `ops` (overlap_plan's region of `matmul`) as a coco.overlap."""
    label = label_of(matmul)
    build = build_overlap(plan, chunks, None if label is None else f"{label}_overlap")
    outline(ops, build, rewriter)
    for value, d in list(plan.dims.items()):
        if d >= 0 and in_body(value, plan.members):
            typed = chunk_type(tensor_type(value), d, chunks)
            retype(rewriter, value, typed)


# ============================================================================
# Per peer: one chunk per rank, along the gathered or scattered dim
# ============================================================================


def per_peer_region(matmul: MatmulOp) -> list[Operation] | str:
    """The all_gather feeding one side of `matmul`, the matmul, and the chain
    of only users that follows it (elementwise ops, a matmul taking it as lhs,
    ending at a reduce_scatter), in block order; or why there is none."""
    block = matmul.parent
    ops: list[Operation] = []
    for side in (matmul.lhs, matmul.rhs):
        producer = side.owner
        if isinstance(producer, AllGatherOp) and producer.parent is block:
            if side.uses.get_length() != 1:
                return f"the gathered value {side.type} has other users"
            ops.append(producer)
    if len(ops) == 2:
        return "both operands are gathered"
    ops.append(matmul)
    if ops[0] is not matmul and gathers_contracted_dim(matmul, ops[0]):
        # each step's product is a partial sum: nothing can follow it
        return ops
    value = matmul.result
    while value.uses.get_length() == 1:
        user = next(iter(value.uses)).operation
        if user.parent is not block:
            break
        if isinstance(user, ReduceScatterOp):
            if user.reduction.data != "sum":
                return f"the reduce_scatter reduces by {user.reduction.data}, not sum"
            ops.append(user)
            break
        follows = (
            isinstance(user, ELEMENTWISE_OPS)
            or (
                isinstance(user, MatmulOp)
                and user.lhs is value
                and user.rhs is not value
            )
            or (
                isinstance(user, FusionOp)
                and len(user.results) == 1
                and communication_in(user.block) is None
            )
        )
        if not follows:
            break
        ops.append(user)
        value = user.results[0]
    if not any(isinstance(op, AllGatherOp | ReduceScatterOp) for op in ops):
        return (
            "no all_gather feeds it and no reduce_scatter ends its chain of only "
            "users (expected all_gather -> matmul or matmul -> reduce_scatter)"
        )
    through = cycle_through(ops)
    if through is not None:
        return (
            f"the per-peer region would create a cycle through '{through.name}' at "
            f"{location_of(through)}"
        )
    return ops


def gathers_contracted_dim(matmul: MatmulOp, gather: Operation) -> bool:
    """Whether the all_gather feeding `matmul` gathers its contracted dim."""
    assert isinstance(gather, AllGatherOp)
    sliced = tensor_type(gather.operand).layout.sliced_dim
    if gather.result is matmul.rhs:
        return sliced == 0
    return sliced == tensor_type(matmul.lhs).rank - 1


def per_peer_dims(matmul: MatmulOp, gather: AllGatherOp | None) -> list[int]:
    """The chunk dims of the matmul's result to try: the one the gathered
    operand's blocks give (PARTIAL for its contracted dim: each step adds a
    partial product), else every dim."""
    rank = tensor_type(matmul.result).rank
    if gather is None:
        return list(range(rank))
    if gathers_contracted_dim(matmul, gather):
        return [PARTIAL]
    if gather.result is matmul.rhs:
        return [rank - 1]
    return [tensor_type(gather.operand).layout.sliced_dim]


def per_peer_plan(
    matmul: MatmulOp, dim: int | None
) -> tuple[list[Operation], ChunkPlan] | str:
    """The per-peer region of `matmul` and its chunk plan (the matmul result
    cut along `dim`, by default the dim the gathered blocks give), or why there
    is none."""
    ops = per_peer_region(matmul)
    if isinstance(ops, str):
        return ops
    gathers = [op for op in ops if isinstance(op, AllGatherOp)]
    scatters = [op for op in ops if isinstance(op, ReduceScatterOp)]
    candidates = per_peer_dims(matmul, gathers[0] if gathers else None)
    if dim is not None:
        if dim not in candidates:
            return f"dim {dim} is not a dim the per-peer chunks can cut"
        candidates = [dim]
    outputs = boundary(ops).outputs
    cut_sliced = [g.operand for g in gathers] + [rs.result for rs in scatters]
    # one chunk per rank: a known world size must divide every chunk dim
    chunks = world_size(matmul) or 1
    reasons: list[str] = []
    for candidate in candidates:
        plan = plan_chunks(ops, outputs, matmul, candidate, chunks, cut_sliced)
        if isinstance(plan, str):
            reasons.append(f"dim {candidate}: {plan}")
            continue
        problem = per_peer_problem(plan, gathers, scatters)
        if problem is None:
            return ops, plan
        reasons.append(f"dim {candidate}: {problem}")
    return "no per-peer chunking (" + "; ".join(reasons) + ")"


def per_peer_problem(
    plan: ChunkPlan, gathers: list[AllGatherOp], scatters: list[ReduceScatterOp]
) -> str | None:
    """Why `plan` is not one chunk per peer: a gathered operand must be cut
    along its sliced dim, a reduce_scatter along its dim."""
    for gather in gathers:
        t = tensor_type(gather.operand)
        if plan.dims[gather.operand] != t.layout.sliced_dim:
            return f"the gathered {t} is not cut along its sliced dim"
    for scatter in scatters:
        if plan.dims[scatter.result] != scatter.dim.value.data:
            return (
                f"the reduce_scatter's dim {scatter.dim.value.data} is not the "
                "chunk dim"
            )
    return None


def build_per_peer(plan: ChunkPlan, label: str | None):
    """The builder `outline` calls for a per-peer region."""

    def build(found: Boundary, body: Block) -> PerPeerOp:
        return PerPeerOp.create(
            operands=list(found.inputs),
            result_types=[v.type for v in found.outputs],
            properties={
                "input_dims": DenseArrayBase.from_list(
                    i64, [plan.dims.get(v, -1) for v in found.inputs]
                ),
                "output_dims": DenseArrayBase.from_list(
                    i64, [max(plan.dims[v], -1) for v in found.outputs]
                ),
            },
            attributes=label_attribute(label),
            regions=[Region(body)],
        )

    return build


def drop_collectives(region: PerPeerOp, rewriter: PatternRewriter) -> None:
    """Inside a freshly outlined per-peer body: the all_gather becomes the
    gathered block argument, the reduce_scatter the yielded partial."""
    for op in list(region.block.ops):
        if isinstance(op, AllGatherOp):
            arg = op.operand
            gathered = retype(rewriter, arg, op.result.type)
            rewriter.replace(op, [], [gathered])
        elif isinstance(op, ReduceScatterOp):
            rewriter.replace(op, [], [op.operand])


@dataclass(frozen=True)
class PerPeerPattern(MatmulPattern[Planned]):
    """Outline a matmul (labelled `label`, if given) with the all_gather
    feeding it and/or the chain ending in a reduce_scatter as a coco.per_peer
    region, when it can."""

    dim: int | None = None
    label: str | None = None

    def plan(self, matmul: MatmulOp) -> Planned | str:
        return per_peer_plan(matmul, self.dim)

    def make(self, matmul: MatmulOp, found: Planned, rewriter: PatternRewriter) -> None:
        make_per_peer(matmul, *found, rewriter)


def make_per_peer(
    matmul: MatmulOp, ops: list[Operation], plan: ChunkPlan, rewriter: PatternRewriter
) -> None:
    """Outline `ops` (per_peer_plan's region of `matmul`) as a coco.per_peer."""
    label = label_of(matmul)
    build = build_per_peer(plan, None if label is None else f"{label}_per_peer")
    region = outline(ops, build, rewriter)
    assert isinstance(region, PerPeerOp)
    drop_collectives(region, rewriter)


# ============================================================================
# Choosing: none, chunks or per peer, by the cost model
# ============================================================================


@dataclass(frozen=True)
class OverlapChoice:
    """The predicted time of each schedule for a matmul's collectives, and the
    plans the chosen one is built from."""

    times: dict[OverlapMode, float]
    chunked: tuple[list[Operation], ChunkPlan] | None
    per_peer: tuple[list[Operation], ChunkPlan] | None

    @property
    def best(self) -> OverlapMode:
        """The fastest; on a tie the simpler (none, then chunks)."""
        return min(self.times, key=lambda mode: self.times[mode])


def choose_overlap(
    matmul: MatmulOp, chunks: int, world: int, on: Machine | None = None
) -> OverlapChoice | None:
    """The schedules `matmul` can have and their predicted times over the
    same ops on `world` ranks of machine `on` (default: the cost model's
    default machine; docs/passes/coco-overlap.md, "Choosing"), or None when
    it has neither a chunked nor a per-peer region. The per-peer region may
    hold a second matmul (the MLP): its own chunked region counts for the
    chunked choice."""
    on = on or machine(DEFAULT_MACHINE)
    chunked = overlap_plan(matmul, chunks, None)
    per_peer = per_peer_plan(matmul, None)
    chunked = None if isinstance(chunked, str) else chunked
    per_peer = None if isinstance(per_peer, str) else per_peer
    if chunked is None and per_peer is None:
        return None
    chunk_regions: list[tuple[list[Operation], ChunkPlan]] = []
    matmuls = [matmul]
    if per_peer is not None:
        matmuls = [op for op in per_peer[0] if isinstance(op, MatmulOp)]
    for each in matmuls:
        plan = chunked if each is matmul else overlap_plan(each, chunks, None)
        if plan is not None and not isinstance(plan, str):
            chunk_regions.append(plan)
    # in block order, so that the prediction is deterministic
    in_chunks = [op for region, _ in chunk_regions for op in region]
    in_per_peer = per_peer[0] if per_peer is not None else []
    group = list(dict.fromkeys(in_chunks + in_per_peer))

    def rest(covered: Sequence[Operation]) -> float:
        done = set(covered)
        return unoverlapped_s([op for op in group if op not in done], world, on)

    times = {OverlapMode.NONE: rest([])}
    if chunk_regions:
        times[OverlapMode.CHUNKS] = rest(in_chunks) + sum(
            chunked_s(region, plan, chunks, world, on) for region, plan in chunk_regions
        )
    if per_peer is not None:
        times[OverlapMode.PER_PEER] = rest(in_per_peer) + per_peer_s(
            in_per_peer, per_peer[1], world, on
        )
    return OverlapChoice(times, chunked, per_peer)


@dataclass(frozen=True)
class ChosenOverlapPattern(MatmulPattern[OverlapChoice]):
    """Give a matmul (labelled `label`, if given) the schedule `choose_overlap`
    predicts fastest on `world` ranks."""

    chunks: int
    world: int
    on: Machine
    label: str | None = None
    only_per_peer: bool = False
    """Apply the choice only where it is per peer (leave the others)."""

    def plan(self, matmul: MatmulOp) -> OverlapChoice | None:
        return choose_overlap(matmul, self.chunks, self.world, self.on)

    def make(
        self, matmul: MatmulOp, choice: OverlapChoice, rewriter: PatternRewriter
    ) -> None:
        best = choice.best
        if best is OverlapMode.PER_PEER and choice.per_peer is not None:
            make_per_peer(matmul, *choice.per_peer, rewriter)
        elif best is OverlapMode.CHUNKS and choice.chunked is not None:
            if not self.only_per_peer:
                make_overlap(matmul, *choice.chunked, self.chunks, rewriter)


@dataclass(frozen=True)
class Overlap(CocoPass):
    """Overlap a matmul with the collective it feeds or is fed by, chunk by
    chunk, in a `coco.overlap` region."""

    name = "coco-overlap"

    chunks: int = 4
    """The number of chunks."""

    dim: int | None = None
    """The chunked dim of the matmul's result; by default the first that works."""

    per_peer: bool = False
    """One chunk per rank along the gathered/scattered dim, in a coco.per_peer
    region (`chunks` is then the world size)."""

    auto: bool = False
    """For each matmul, the schedule the cost model predicts fastest: none,
    `chunks` chunks or per peer (what coco-optimize does); with `per_peer`,
    only the matmuls for which that is per peer are rewritten."""

    world: int | None = None
    """The world size `auto` predicts for (default: `coco.world_size`, else 8)."""

    machine: str = DEFAULT_MACHINE
    """The cost model's machine `auto` predicts for (docs/performance.md)."""

    def check_options(self) -> None:
        if self.machine not in PRESETS:
            raise self.bad_option(
                f"unknown machine '{self.machine}'; the presets are "
                f"{', '.join(sorted(PRESETS))}"
            )
        self.require_at_least("chunks", 1)
        self.require_at_least("dim", 0)
        self.require_at_least("world", 1)
        if self.auto and self.dim is not None:
            raise self.bad_option("auto chooses the dim itself")

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in function_body_ops(module) if isinstance(op, MatmulOp))

    def problem(self, op: Operation) -> str | None:
        assert isinstance(op, MatmulOp)
        if self.auto:
            world, on = self.estimated_world(op), machine(self.machine)
            if choose_overlap(op, self.chunks, world, on) is None:
                return "neither a chunked nor a per-peer region"
            return None
        if self.per_peer:
            plan = per_peer_plan(op, self.dim)
        else:
            plan = overlap_plan(op, self.chunks, self.dim)
        return plan if isinstance(plan, str) else None

    def estimated_world(self, op: Operation) -> int:
        return self.world or world_size(op) or DEFAULT_WORLD

    def rewrite(self, module: ModuleOp) -> None:
        if self.auto:
            world = self.estimated_world(module)
            on = machine(self.machine)
            pattern = ChosenOverlapPattern(
                self.chunks, world, on, self.op, self.per_peer
            )
            rewrite_once(module, pattern)
        elif self.per_peer:
            rewrite_once(module, PerPeerPattern(self.dim, self.op))
        else:
            rewrite_once(module, OverlapPattern(self.chunks, self.dim, self.op))
