"""Chunk dims: which dim of each value of a chunked computation is cut
(docs/dialect.md, "Regions created by transformations"; docs/passes/coco-overlap.md).

A `coco.overlap` region runs its body chunk by chunk; each value of the body is
a chunk of the un-chunked value along one dim, or the whole value (-1). The
rules, stated once, for each kind of op:

- elementwise: operand dims line up with result dims from the right (numpy
  broadcasting); a chunked operand cuts the result dim it lines up with, an
  operand passed whole must be broadcast along it;
- all_slice and the collectives keep the shape, so a chunk maps to a chunk;
- matmul: chunking lhs rows (not the contracted dim) chunks the result rows,
  chunking rhs columns chunks the result's last dim; cutting the contracted
  dim of both makes each chunk's result a partial sum (`PARTIAL`), which
  nothing but a per-peer region's summed output may take;
- reduce: the chunk dim survives, renumbered, unless it is reduced;
- a norm (or a constant) of whole values is whole.

`chunk_dims` propagates them forward from a block's arguments (the interpreter
does so for every overlap it runs, so that a dropout keeps its global index);
`plan_chunks` finds the chunk dims of a region coco-overlap is about to make,
demanding them backward from the matmul's operands too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.rewriter import Rewriter

from coconet_ir.diagnostics import location_of
from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    AllSliceOp,
    CollectiveOp,
    ConstantOp,
    FusionOp,
    MatmulOp,
    NormOp,
    PerPeerOp,
    ReduceOp,
    TensorType,
    YieldOp,
    chunk_type,
    operand_axis,
    result_axis,
    tensor_type,
)


class ChunkConflict(Exception):
    """A value cannot be chunked consistently; the message says why."""


# ============================================================================
# The rules, forward (operand dims → result dim) and backward
# ============================================================================


def _elementwise_chunk_dim(op: Operation, operand_dims: Sequence[int]) -> int | str:
    """Chunked operands must cut the same (right-aligned) dim of the result; an
    operand passed whole must be broadcast along it."""
    result = tensor_type(op.results[0])
    cut_dims = {
        result_axis(tensor_type(v), result.rank, d)
        for v, d in zip(op.operands, operand_dims)
        if d >= 0
    }
    if len(cut_dims) > 1:
        return f"its operands are chunked along different dims {sorted(cut_dims)}"
    if not cut_dims:
        return -1
    dim = cut_dims.pop()
    for v, d in zip(op.operands, operand_dims):
        t = tensor_type(v)
        if d < 0 and operand_axis(t, result, dim) is not None:
            return (
                f"operand {t} is passed whole but is not broadcast along the "
                f"chunk dim {dim}"
            )
    return dim


PARTIAL = -2
"""The "chunk dim" of a matmul whose contracted dim is cut on both sides: each
chunk's result has the whole shape and is a partial sum; the chunks add up
(a `coco.per_peer` output that is summed over the steps)."""


def _matmul_chunk_dim(op: MatmulOp, lhs_dim: int, rhs_dim: int) -> int | str:
    last = tensor_type(op.lhs).rank - 1
    if lhs_dim == last and rhs_dim == 0:
        return PARTIAL
    if lhs_dim == last or rhs_dim == 0:
        return "the contracted dim cannot be chunked"
    if lhs_dim >= 0 and rhs_dim >= 0:
        return "only one matmul operand may be chunked"
    if rhs_dim == 1:
        return last
    return lhs_dim


def _reduce_chunk_dim(op: ReduceOp, dim: int) -> int | str:
    if dim < 0:
        return -1
    if dim in op.reduced_dims:
        return f"it reduces the chunk dim {dim}"
    return dim - sum(1 for d in op.reduced_dims if d < dim)


def result_chunk_dim(op: Operation, operand_dims: Sequence[int]) -> int | str:
    """The dim along which the result of `op` is chunked when its operands are
    chunked along `operand_dims` (-1: whole), or why `op` cannot run on chunks.

    Region ops (a fusion nested in an overlap) are walked by `propagate`."""
    if PARTIAL in operand_dims:
        return "a partial sum (a matmul over a cut contracted dim) cannot feed it"
    if isinstance(op, ConstantOp):
        return -1
    if isinstance(op, ELEMENTWISE_OPS):
        return _elementwise_chunk_dim(op, operand_dims)
    if isinstance(op, AllSliceOp | CollectiveOp):
        # The result has the operand's shape: a chunk maps to a chunk.
        return operand_dims[0]
    if isinstance(op, MatmulOp):
        return _matmul_chunk_dim(op, *operand_dims)
    if isinstance(op, ReduceOp):
        return _reduce_chunk_dim(op, operand_dims[0])
    if isinstance(op, NormOp) and operand_dims[0] < 0:
        return -1
    return f"'{op.name}' cannot run chunk by chunk"


def operand_chunk_dims(op: Operation, result_dim: int) -> list[int] | str:
    """The chunk dims of the operands of `op` that make its result chunked
    along `result_dim` (-1: whole), or why `op` cannot produce such a chunk
    (the backward rule). The whole result of another op asks nothing of its
    operands (an empty list)."""
    if isinstance(op, AllSliceOp | CollectiveOp):
        return [result_dim]
    if isinstance(op, ELEMENTWISE_OPS):
        result = tensor_type(op.results[0])
        return [
            -1 if result_dim < 0 else _or_whole(operand_axis(v, result, result_dim))
            for v in (tensor_type(o) for o in op.operands)
        ]
    if result_dim < 0:
        return []
    return f"'{op.name}' at {location_of(op)} cannot be chunked"


def matmul_operand_dims(matmul: MatmulOp, result_dim: int) -> tuple[int, int]:
    """(lhs, rhs) chunk dims that chunk the matmul's result along `result_dim`:
    the lhs rows for a row dim, the rhs columns for the last dim, both
    contracted dims for `PARTIAL`."""
    last = tensor_type(matmul.result).rank - 1
    if result_dim == PARTIAL:
        return (tensor_type(matmul.lhs).rank - 1, 0)
    return (-1, 1) if result_dim == last else (result_dim, -1)


def _or_whole(axis: int | None) -> int:
    return -1 if axis is None else axis


# ============================================================================
# Forward propagation through a body
# ============================================================================


def propagate(ops: Sequence[Operation], dims: dict[SSAValue, int]) -> None:
    """Give every result of `ops` (in order, into nested fusion bodies) its
    chunk dim from those of its operands, which `dims` holds; raises
    ChunkConflict naming the first op that cannot run on chunks."""
    for op in ops:
        if isinstance(op, FusionOp):
            inner = op.yield_op
            for arg, value in zip(op.block.args, op.inputs):
                dims[arg] = dims.get(value, -1)
            propagate([o for o in op.block.ops if o is not inner], dims)
            for result, value in zip(op.results, inner.arguments):
                dims[result] = dims.get(value, -1)
            continue
        dim = result_chunk_dim(op, [dims.get(v, -1) for v in op.operands])
        if isinstance(dim, str):
            raise ChunkConflict(f"'{op.name}' at {location_of(op)}: {dim}")
        for result in op.results:
            dims[result] = dim


@dataclass
class ChunkDims:
    """Which dim of each value of a chunked body is cut (-1: the value is
    whole), as `chunk_dims` propagates it from the block arguments."""

    dims: dict[SSAValue, int]
    problem: str | None = None
    """Why propagation stopped (the first op that cannot run on chunks)."""


def chunk_dims(block: Block, arg_dims: Sequence[int]) -> ChunkDims:
    """Propagate chunk dims from a block's arguments through its ops (into
    nested fusion regions too): what element of the un-chunked value each
    element of a chunk is, so that dropout keeps its global index."""
    found = ChunkDims(dict(zip(block.args, arg_dims)))
    body = [op for op in block.ops if not isinstance(op, YieldOp)]
    try:
        propagate(body, found.dims)
    except ChunkConflict as err:
        found.problem = str(err)
    return found


# ============================================================================
# Planning a region: forward, with demands backward
# ============================================================================


@dataclass
class ChunkPlan:
    """The chunk dim of every value of a region that coco-overlap is about to
    outline (and of its inputs): values computed from a chunked value follow
    it; the others are chunked where they meet it (`demand`)."""

    members: set[Operation]
    """Every op of the region, nested ones included."""
    dims: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])

    def demand(self, value: SSAValue, dim: int) -> None:
        """`value` must be chunked along `dim` (-1: whole); so must what it is
        computed from inside the region."""
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
            self.demand(op.yield_op.arguments[value.index], dim)
            return
        operand_dims = operand_chunk_dims(op, dim)
        if isinstance(operand_dims, str):
            raise ChunkConflict(operand_dims)
        for operand, d in zip(op.operands, operand_dims):
            self.demand(operand, d)

    def run(self, ops: Sequence[Operation]) -> None:
        """Propagate chunk dims forward through `ops` (into fusion bodies),
        demanding dims of the operands that meet a chunked value."""
        for op in ops:
            if isinstance(op, FusionOp):
                for arg, value in zip(op.block.args, op.inputs):
                    if value in self.dims:
                        self.dims[arg] = self.dims[value]
                self.run([o for o in op.block.ops if o is not op.yield_op])
                for result, value in zip(op.results, op.yield_op.arguments):
                    if value in self.dims:
                        self.dims[result] = self.dims[value]
                continue
            self.visit(op)

    def visit(self, op: Operation) -> None:
        known = [self.dims.get(v) for v in op.operands]
        if None in known and isinstance(op, MatmulOp) and known != [None, None]:
            # a matmul on a chunk: its other operand is passed whole
            for value, d in zip(op.operands, known):
                if d is None:
                    self.demand(value, -1)
            known = [self.dims[v] for v in op.operands]
        if None in known:
            if not isinstance(op, ELEMENTWISE_OPS):
                return
            result = tensor_type(op.results[0])
            chunked = [
                result_axis(tensor_type(v), result.rank, d)
                for v, d in zip(op.operands, known)
                if d is not None and d >= 0
            ]
            if not chunked:
                return
            operand_dims = operand_chunk_dims(op, chunked[0])
            assert not isinstance(operand_dims, str)
            for value, d, wanted in zip(op.operands, known, operand_dims):
                if d is None:
                    self.demand(value, wanted)
            known = [self.dims[v] for v in op.operands]
        dim = result_chunk_dim(op, [d for d in known if d is not None])
        if isinstance(dim, str):
            raise ChunkConflict(f"'{op.name}' at {location_of(op)}: {dim}")
        for result in op.results:
            self.dims[result] = dim


def chunk_problem(t: TensorType, dim: int, chunks: int) -> str | None:
    """Why `t` cannot be cut into `chunks` chunks along `dim`, or None."""
    if dim < 0:
        return None
    if t.layout.is_sliced and t.layout.sliced_dim == dim:
        return f"dim {dim} is the sliced dim of {t}"
    if t.dims[dim] % chunks:
        return f"{chunks} chunks do not divide dim {dim} of {t}"
    return None


def plan_chunks(
    ops: Sequence[Operation],
    outputs: Sequence[SSAValue],
    matmul: MatmulOp,
    dim: int,
    chunks: int,
    per_peer: Sequence[SSAValue] = (),
) -> ChunkPlan | str:
    """Chunk dims for the region `ops` (whose results used outside are
    `outputs`) when the matmul result is chunked along `dim`, or why that does
    not work. The values `per_peer` (a gathered operand, a reduce_scatter's
    result) may be cut along their sliced dim: one chunk is one rank's block."""
    plan = ChunkPlan(members={inner for op in ops for inner in op.walk()})
    try:
        lhs_dim, rhs_dim = matmul_operand_dims(matmul, dim)
        plan.demand(matmul.lhs, lhs_dim)
        plan.demand(matmul.rhs, rhs_dim)
        plan.run(ops)
    except ChunkConflict as err:
        return str(err)
    for value in outputs:
        if plan.dims.get(value, -1) == -1 or (plan.dims[value] == PARTIAL) != (
            dim == PARTIAL
        ):
            return f"its result {value.type} would not be chunked"
    for value, d in plan.dims.items():
        t = tensor_type(value)
        if value in per_peer and t.layout.is_sliced and t.layout.sliced_dim == d:
            continue
        problem = chunk_problem(t, d, chunks)
        if problem is not None:
            return problem
    return plan


# ============================================================================
# The step of a per-peer region
# ============================================================================


def per_peer_dims(op: PerPeerOp) -> ChunkDims:
    """The chunk dims of a `coco.per_peer` body, checked: every value can run
    on chunks and each yielded value is chunked along its output's dim."""
    found = chunk_dims(op.block, op.input_dims.get_values())
    if found.problem is None:
        yielded = op.yield_op.arguments
        for value, dim in zip(yielded, op.output_dims.get_values(), strict=True):
            if found.dims.get(value, -1) != (PARTIAL if dim == -1 else dim):
                found.problem = (
                    f"the body yields {value.type} chunked along dim "
                    f"{found.dims.get(value, -1)}, not along the output dim {dim}"
                )
                break
    return found


def step_of(op: PerPeerOp, world: int) -> tuple[PerPeerOp, ChunkDims]:
    """A copy of `op` whose body has the types of one step on `world` ranks
    (every chunked value cut into `world` chunks), with its chunk dims; raises
    ChunkConflict when the body cannot run per peer."""
    step = op.clone()
    found = per_peer_dims(step)
    if found.problem is not None:
        raise ChunkConflict(found.problem)
    dims: dict[SSAValue, int] = {}
    for value, dim in found.dims.items():
        if dim >= 0:
            t = tensor_type(value)
            if t.dims[dim] % world:
                raise ChunkConflict(f"{world} ranks do not divide dim {dim} of {t}")
            value = Rewriter.replace_value_with_new_type(
                value, chunk_type(t, dim, world)
            )
        dims[value] = dim
    return step, ChunkDims(dims)
