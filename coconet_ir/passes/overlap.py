"""coco-overlap{chunks=K dim=D}: a matmul and the collective it feeds (or that
feeds it) become one `coco.overlap` region that runs chunk by chunk, so that
chunk `c+1`'s matmul overlaps chunk `c`'s communication (COCO_DIALECT.md §7).

The region holds the matmul and
- its only user when that is an `all_reduce`, a `reduce_scatter` or a
  `coco.fusion` (coco-fuse's reduce_scatter + compute + all_gather), and/or
- the `all_gather` that produces its lhs (sequence parallelism).

`dim` is the dim of the matmul's result that is chunked (by default the first
one that works): a dim of the lhs rows/batch (the lhs is chunked, the rhs
passed whole) or the last one (the rhs is chunked along its columns). Chunk
dims follow the values through the region (`coco.chunk_dims`); every other
input is chunked along the dim it is combined on, or passed whole when it is
broadcast along it (a bias). A dropout inside keeps its mask: the interpreter
draws it at the element's index in the un-chunked tensor.

Preconditions (a targeted matmul that fails one is refused, with the reason):
`chunks` divides the chunk dim of every value of the region; no value is
chunked along its sliced dim or its contracted dim; the region holds no send,
recv, update or nested overlap; outlining it makes no cycle. `op=NAME` names
the matmul (CoCoNet's `overlap(mm, fused, chunks=4)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.rewriter import Rewriter

from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    AllGatherOp,
    AllReduceOp,
    AllSliceOp,
    CollectiveOp,
    FusionOp,
    MatmulOp,
    OverlapOp,
    RecvOp,
    ReduceScatterOp,
    SendOp,
    TensorType,
    UpdateOp,
    as_tensor_type,
    chunk_type,
    result_chunk_dim,
)
from coconet_ir.ir import location_of
from coconet_ir.passes.base import CocoPass, stage_name
from coconet_ir.passes.regions import Boundary, boundary, cycle_through, outline

CONSUMERS = (AllReduceOp, ReduceScatterOp, FusionOp)
NOT_CHUNKABLE = (SendOp, RecvOp, UpdateOp, OverlapOp)


class ChunkConflict(Exception):
    """A value of the region cannot be chunked consistently."""


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
    return ops


def aligned_dim(value: SSAValue, result: TensorType, dim: int) -> int:
    """The dim of an operand that lines up with `dim` of an elementwise result
    (numpy broadcasting aligns trailing dims); -1 when it is broadcast."""
    t = as_tensor_type(value, "operand")
    own = dim - result.rank + t.rank
    return own if own >= 0 and t.dims[own] != 1 else -1


@dataclass
class ChunkPlan:
    """The chunk dim of every value of a region (and of its inputs): chunked
    values follow the matmul result, the others are chunked where they meet
    it (`demand`)."""

    dims: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])

    def demand(self, value: SSAValue, dim: int) -> None:
        """`value` must be chunked along `dim` (-1: whole); so must what it is
        computed from."""
        known = self.dims.get(value)
        if known is not None:
            if known != dim:
                raise ChunkConflict(
                    f"{value.type} is needed chunked along both dim {known} and "
                    f"dim {dim}"
                )
            return
        self.dims[value] = dim
        self.demand_sources(value, dim)

    def demand_sources(self, value: SSAValue, dim: int) -> None:
        if isinstance(value, BlockArgument):
            owner = value.block.parent_op()
            if isinstance(owner, FusionOp) and value.block is owner.block:
                self.demand(owner.inputs[value.index], dim)
            return
        if not isinstance(value, OpResult) or value.op not in self.members:
            return
        op = value.op
        if isinstance(op, FusionOp):
            self.demand(op.yield_op.values[value.index], dim)
        elif isinstance(op, AllSliceOp | CollectiveOp):
            self.demand(op.operands[0], dim)
        elif isinstance(op, ELEMENTWISE_OPS):
            result = as_tensor_type(value, "result")
            for operand in op.operands:
                self.demand(
                    operand, -1 if dim < 0 else aligned_dim(operand, result, dim)
                )
        elif dim >= 0:
            raise ChunkConflict(f"'{op.name}' at {location_of(op)} cannot be chunked")

    members: set[Operation] = field(default_factory=set[Operation])
    """Every op of the region, nested ones included."""

    def run(self, ops: Sequence[Operation]) -> None:
        """Propagate chunk dims forward through `ops` (into fusion bodies)."""
        for op in ops:
            if isinstance(op, FusionOp):
                for arg, value in zip(op.block.args, op.inputs):
                    if value in self.dims:
                        self.dims[arg] = self.dims[value]
                self.run([o for o in op.block.ops if o is not op.yield_op])
                for result, value in zip(op.results, op.yield_op.values):
                    if value in self.dims:
                        self.dims[result] = self.dims[value]
                continue
            self.visit(op)

    def visit(self, op: Operation) -> None:
        known = [self.dims.get(v) for v in op.operands]
        if None in known:
            if not isinstance(op, ELEMENTWISE_OPS):
                return
            result = as_tensor_type(op.results[0], "result")
            chunked = [
                d + result.rank - as_tensor_type(v, "operand").rank
                for v, d in zip(op.operands, known)
                if d is not None and d >= 0
            ]
            if not chunked:
                return
            for value, d in zip(op.operands, known):
                if d is None:
                    self.demand(value, aligned_dim(value, result, chunked[0]))
            known = [self.dims[v] for v in op.operands]
        dim = result_chunk_dim(op, [d for d in known if d is not None])
        if isinstance(dim, str):
            raise ChunkConflict(f"'{op.name}' at {location_of(op)}: {dim}")
        for result in op.results:
            self.dims[result] = dim


def matmul_operand_dims(matmul: MatmulOp, dim: int) -> tuple[int, int]:
    """(lhs, rhs) chunk dims that chunk the matmul's result along `dim`."""
    last = as_tensor_type(matmul.result, "result").rank - 1
    return (-1, 1) if dim == last else (dim, -1)


def plan_chunks(
    ops: Sequence[Operation], found: Boundary, matmul: MatmulOp, dim: int, chunks: int
) -> ChunkPlan | str:
    """Chunk dims for the region when the matmul result is chunked along `dim`,
    or why that does not work."""
    plan = ChunkPlan(members={inner for op in ops for inner in op.walk()})
    try:
        lhs_dim, rhs_dim = matmul_operand_dims(matmul, dim)
        plan.demand(matmul.lhs, lhs_dim)
        plan.demand(matmul.rhs, rhs_dim)
        plan.run(ops)
    except ChunkConflict as err:
        return str(err)
    for value in found.outputs:
        if plan.dims.get(value, -1) < 0:
            return f"its result {value.type} would not be chunked"
    for value, d in plan.dims.items():
        problem = chunk_problem(as_tensor_type(value, "value"), d, chunks)
        if problem is not None:
            return problem
    return plan


def chunk_problem(t: TensorType, dim: int, chunks: int) -> str | None:
    if dim < 0:
        return None
    if t.layout.is_sliced and t.layout.sliced_dim == dim:
        return f"dim {dim} is the sliced dim of {t}"
    if t.dims[dim] % chunks:
        return f"{chunks} chunks do not divide dim {dim} of {t}"
    return None


def build_overlap(plan: ChunkPlan, chunks: int, name: str | None):
    """The builder `outline` calls: chunked block arguments, chunk dims."""

    def build(found: Boundary, body: Block) -> OverlapOp:
        input_dims = [plan.dims.get(v, -1) for v in found.inputs]
        for arg, value, d in zip(list(body.args), found.inputs, input_dims):
            typed = chunk_type(as_tensor_type(value, "input"), d, chunks)
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
            attributes={} if name is None else {"name": StringAttr(name)},
            regions=[Region(body)],
        )

    return build


def in_body(value: SSAValue, members: set[Operation]) -> bool:
    """Whether `value` is defined inside the region (not one of its inputs)."""
    if isinstance(value, OpResult):
        return value.op in members
    return isinstance(value, BlockArgument) and value.block.parent_op() in members


def retype_chunks(plan: ChunkPlan, chunks: int) -> None:
    """Give every chunked value of the body its chunk type."""
    for value, d in list(plan.dims.items()):
        if d < 0 or not in_body(value, plan.members):
            continue
        Rewriter.replace_value_with_new_type(
            value, chunk_type(as_tensor_type(value, "value"), d, chunks)
        )


@dataclass(frozen=True)
class Overlap(CocoPass):
    """Overlap a matmul with the collective it feeds or is fed by, chunk by
    chunk, in a `coco.overlap` region."""

    name = "coco-overlap"

    chunks: int = 4
    """The number of chunks."""

    dim: int | None = None
    """The chunked dim of the matmul's result; by default the first that works."""

    def transform(self, ctx: Context, module: ModuleOp) -> bool:
        if self.chunks < 1:
            raise self.bad_option(f"chunks must be >= 1, got {self.chunks}")
        if self.dim is not None and self.dim < 0:
            raise self.bad_option(f"dim must be >= 0, got {self.dim}")
        matmuls = [
            op
            for op in module.walk()
            if isinstance(op, MatmulOp)
            and isinstance(op.parent_op(), FuncOp)
            and self.targets(op)
        ]
        for matmul in matmuls:
            self.overlap(matmul)
        return bool(matmuls)

    def overlap(self, matmul: MatmulOp) -> None:
        if self.chunks < 1:
            self.skip_or_refuse(matmul, f"chunks must be >= 1, got {self.chunks}")
            return
        ops = region_of(matmul)
        if isinstance(ops, str):
            self.skip_or_refuse(matmul, ops)
            return
        through = cycle_through(ops)
        if through is not None:
            self.skip_or_refuse(
                matmul,
                f"overlapping would create a cycle through '{through.name}' at "
                f"{location_of(through)}",
            )
            return
        plan = self.choose_plan(ops, matmul)
        if isinstance(plan, str):
            self.skip_or_refuse(matmul, plan)
            return
        name = stage_name(matmul)
        outline(
            ops,
            build_overlap(
                plan, self.chunks, None if name is None else f"{name}_overlap"
            ),
        )
        retype_chunks(plan, self.chunks)

    def choose_plan(self, ops: list[Operation], matmul: MatmulOp) -> ChunkPlan | str:
        """The plan for `dim`, or for the first dim that works."""
        found = boundary(ops)
        rank = as_tensor_type(matmul.result, "result").rank
        if self.dim is not None and not 0 <= self.dim < rank:
            return f"dim {self.dim} is out of range for the result's rank {rank}"
        candidates = [self.dim] if self.dim is not None else list(range(rank))
        reasons: list[str] = []
        for dim in candidates:
            plan = plan_chunks(ops, found, matmul, dim, self.chunks)
            if isinstance(plan, ChunkPlan):
                return plan
            reasons.append(f"dim {dim}: {plan}")
        if self.dim is not None:
            return f"cannot chunk along {reasons[0]}"
        return "no chunkable dim (" + "; ".join(reasons) + ")"
