"""The meaning of every coco op, as xDSL interpreter implementations.

Each implementation takes the operands' `DistValue`s and returns the results'
`DistValue`s; one numpy computation covers all ranks (the leading axis of
`DistValue.data` is the rank). Arithmetic on f16/bf16 runs in f32 and is rounded
to the element type after each op; reductions, norms and matmuls on halves
accumulate in f32 and round once. In a promoted run (`promoted_precision`) the
dtypes come from the element table's promoted columns (f32 held as f64, every
float computed in f64); the rules are the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.ir import BlockArgument, Operation

from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import TensorType, operand_axis
from coconet_ir.interpreter.context import ChunkFrame, stage_context
from coconet_ir.interpreter.philox import dropout_uniform
from coconet_ir.interpreter.values import (
    DistValue,
    compute_dtype,
    cut,
    local_shape,
    rounded_constant,
    storage_dtype,
)

GELU_SQRT_2_OVER_PI = 0.7978845608
GELU_CUBIC = 0.044715

Kernel = Callable[..., np.ndarray]

# ============================================================================
# Helpers
# ============================================================================


def result_type(op: Operation, index: int = 0) -> TensorType:
    tensor_type = op.results[index].type
    assert isinstance(tensor_type, TensorType)
    return tensor_type


def matmul_blocks(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each rank's `a @ b` (`coco.matmul`, `coco.batch_matmul`): `b`'s
    leading axes (the rank's, and the group's) match `a`'s, its matrix is
    broadcast over `a`'s other row dims; an `a` of one row per group (no row
    dim) gives none."""
    vector = a.ndim < b.ndim
    if vector:
        a = a[..., None, :]
    lead = b.ndim - 2
    b = b.reshape((*b.shape[:lead], *([1] * (a.ndim - b.ndim)), *b.shape[lead:]))
    product = np.matmul(a, b)
    return product[..., 0, :] if vector else product


def finish(op: Operation, value: np.ndarray, world: int, index: int = 0) -> DistValue:
    """Round a computed array to the result's element type."""
    tensor_type = result_type(op, index)
    return DistValue(
        tensor_type,
        value.astype(storage_dtype(tensor_type.element_type), copy=False),
        world,
    )


def in_compute_dtype(value: DistValue, data: np.ndarray | None = None) -> np.ndarray:
    """An operand's data in the dtype its arithmetic runs in."""
    array = value.data if data is None else data
    return array.astype(compute_dtype(value.type.element_type), copy=False)


def aligned(value: DistValue, result: TensorType) -> np.ndarray:
    """An operand's per-rank data, ready to broadcast against the result's.

    A replicated operand of a sliced result is cut like the result (rank `r`
    uses the block matching its own), unless it is broadcast along the sliced
    dimension; then leading unit dims make numpy align trailing dims."""
    data = value.data
    operand = value.type
    if result.layout.is_sliced and operand.layout.is_replicated:
        dim = operand_axis(operand, result, result.layout.sliced_dim)
        if dim is not None:
            data = cut(data[0], dim, value.world)
    pad = result.rank - operand.rank
    return data.reshape((data.shape[0], *([1] * pad), *data.shape[1:]))


def elementwise(
    op: Operation, args: PythonValues, kernel: Kernel, *, compute: bool = True
) -> PythonValues:
    """Apply `kernel` to the aligned operands (in their compute dtype unless
    `compute` is false) and round to the result type."""
    target = result_type(op)
    arrays = [aligned(a, target) for a in args]
    if compute:
        arrays = [in_compute_dtype(a, x) for a, x in zip(args, arrays)]
    world = args[0].world
    return (finish(op, kernel(*arrays), world),)


def truncating_divide(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """C integer division: the quotient truncated toward zero, wrapped to i32."""
    wide_lhs, wide_rhs = lhs.astype(np.int64), rhs.astype(np.int64)
    quotient = np.abs(wide_lhs) // np.abs(wide_rhs)
    negative = (wide_lhs < 0) != (wide_rhs < 0)
    return np.where(negative, -quotient, quotient).astype(np.int32)


def to_i32(array: np.ndarray) -> np.ndarray:
    """float → i32 truncates toward zero, saturates, and maps NaN to 0 (as
    CUDA's `__float2int_rz`)."""
    if array.dtype.kind != "f":
        return array.astype(np.int32)
    wide = np.nan_to_num(np.trunc(array.astype(np.float64)), nan=0.0)
    limits = np.iinfo(np.int32)
    return np.clip(wide, limits.min, limits.max).astype(np.int32)


def gelu(x: np.ndarray) -> np.ndarray:
    """`0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))` in x's dtype."""
    c = x.dtype.type
    inner = c(GELU_SQRT_2_OVER_PI) * (x + c(GELU_CUBIC) * x * x * x)
    return c(0.5) * x * (c(1.0) + np.tanh(inner))


def combine_ranks(value: DistValue, ufunc: np.ufunc) -> np.ndarray:
    """Combine all ranks' arrays in rank order 0..N-1, in the compute dtype;
    shape `(1, *shape)`."""
    stacked = in_compute_dtype(value, value.stacked())
    total = stacked[0]
    for rank in range(1, value.world):
        total = ufunc(total, stacked[rank])
    return total[np.newaxis]


def check_embedding_indices(op: Operation, indices: DistValue, rows: int) -> None:
    """Every rank's indices of `coco.embedding` lie in `[0, rows)`; the error
    names the first that does not, by its global table, bag and position."""
    data = indices.stacked()
    bad = np.argwhere((data < 0) | (data >= rows))
    if not len(bad):
        return
    rank, table, bag, position = (int(x) for x in bad[0])
    value = int(data[rank, table, bag, position])
    layout = indices.type.layout
    if layout.is_sliced:
        offset = rank * data.shape[1 + layout.sliced_dim]
        table += offset if layout.sliced_dim == 0 else 0
        bag += offset if layout.sliced_dim == 1 else 0
    where = f" on rank {rank}" if layout.is_local else ""
    raise CocoError(
        f"index {value} of table {table} (bag {bag}, position {position}){where} "
        f"is out of range [0, {rows})",
        op,
    )


def pool_bags(picked: np.ndarray, owned: np.ndarray, pooling: str) -> np.ndarray:
    """Pool each bag's rows `picked` `[T, B, L, D]` over `L`, counting only
    the `owned` ones (a row-sliced table's rank holds some rows): the
    partials of sum and mean add up over ranks, and max's combine by max
    (a bag with no owned row gives -inf)."""
    mask = owned[..., np.newaxis]
    if pooling == "max":
        lowest = picked.dtype.type(-np.inf)
        return np.max(np.where(mask, picked, lowest), axis=2)
    total = np.sum(np.where(mask, picked, 0), axis=2, dtype=picked.dtype)
    if pooling == "mean":
        return total / picked.dtype.type(picked.shape[2])
    return total


RANK_REDUCTIONS: dict[str, np.ufunc] = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}

COMPARISONS: dict[str, np.ufunc] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def global_indices(tensor_type: TensorType, world: int) -> np.ndarray:
    """The row-major global linear index of every element each rank holds
    (stacked like `DistValue.data`; a local value's indices are its own)."""
    indices = np.arange(np.prod(tensor_type.dims, dtype=np.int64), dtype=np.int64)
    indices = indices.reshape(tensor_type.dims)
    if tensor_type.layout.is_sliced:
        return cut(indices, tensor_type.layout.sliced_dim, world)
    return indices[np.newaxis]


def dropout_indices(
    op: coco.DropoutOp, operand: DistValue, frames: list[ChunkFrame]
) -> np.ndarray:
    """The global linear index of every element of a dropout's operand; inside
    an overlap chunk, its index in the un-chunked tensor (docs/dialect.md,
    "Regions")."""
    if not frames:
        return global_indices(operand.type, operand.world)
    if len(frames) > 1:
        raise CocoError("cannot keep its global index in nested coco.overlap", op)
    frame = frames[0]
    dim = frame.dims.get(op.operand)
    if dim is None:
        raise CocoError("has an operand whose chunk dim is unknown in coco.overlap", op)
    if dim < 0:
        return global_indices(operand.type, operand.world)
    sizes = operand.type.dims
    whole = operand.type.with_shape(
        [s * frame.chunks if i == dim else s for i, s in enumerate(sizes)]
    )
    indices = np.split(global_indices(whole, operand.world), frame.chunks, dim + 1)
    return indices[frame.index]


# ============================================================================
# Op implementations
# ============================================================================


def check_bucket_piece(op: Operation, piece: TensorType, world: int) -> None:
    """A piece of a bucket (`coco.concat`, `coco.split`) has one block per
    rank: its element count (sliced<0>: its dim 0) divides by the world."""
    count = math.prod(piece.dims)
    size = piece.dims[0] if piece.layout.is_sliced else count
    if size % world:
        what = "dimension 0" if piece.layout.is_sliced else "element count"
        raise CocoError(
            f"{world} ranks do not divide the {what} ({size}) of {piece}: a "
            "bucket holds one block of every piece per rank",
            op,
        )


def rank_major_blocks(op: Operation, value: DistValue, world: int) -> np.ndarray:
    """A bucket piece's per-rank data as `(ranks, [N,] run)`: a sliced<0>
    rank's block flattened, or the replicated/local value's flattening cut
    into `N` blocks."""
    check_bucket_piece(op, value.type, world)
    rows = value.data.shape[0]
    if value.type.layout.is_sliced:
        return value.data.reshape(rows, -1)
    return value.data.reshape(rows, world, -1)


def _elementwise_rule(kernel: Kernel) -> Callable[..., PythonValues]:
    """The implementation of an elementwise op computing `kernel`."""

    def run(
        self: CocoFunctions, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        return elementwise(op, args, kernel)

    return run


OneOperandOp = TypeVar("OneOperandOp", bound=Operation)


def _operand_rule(
    kind: type[OneOperandOp], result: Callable[[OneOperandOp, DistValue], np.ndarray]
) -> Callable[..., PythonValues]:
    """The implementation of `kind`, an op of one operand whose result (every
    rank's data, stacked) is `result(op, operand)`, rounded to the result's
    element type."""

    def run(
        self: CocoFunctions,
        interpreter: Interpreter,
        op: OneOperandOp,
        args: PythonValues,
    ) -> PythonValues:
        (operand,) = args
        return (finish(op, result(op, operand), operand.world),)

    return impl(kind)(run)


def _converted(op: coco.ConvertOp, operand: DistValue) -> np.ndarray:
    target = result_type(op).element_type
    if target == coco.i1:
        return operand.data != 0
    if target == coco.i32:
        return to_i32(operand.data)
    return operand.data


def _reduced(op: coco.ReduceOp, operand: DistValue) -> np.ndarray:
    axes = tuple(d + 1 for d in op.reduced_dims)
    data = in_compute_dtype(operand)
    kind = op.kind.data.value
    keep = op.keeps_dims
    if kind == "sum":
        return np.sum(data, axis=axes, dtype=data.dtype, keepdims=keep)
    if kind == "max":
        return np.max(data, axis=axes, keepdims=keep)
    return np.min(data, axis=axes, keepdims=keep)


def _transposed(op: coco.TransposeOp, operand: DistValue) -> np.ndarray:
    """Each rank's block transposed (the rank axis stays first)."""
    return np.transpose(operand.data, (0, *(d + 1 for d in op.permutation)))


def _reshaped(op: coco.ReshapeOp, operand: DistValue) -> np.ndarray:
    """Each rank's block in the result's local shape: the layout rule makes
    a rank's elements the same, in the same row-major order."""
    shape = local_shape(result_type(op), operand.world)
    return operand.data.reshape((operand.data.shape[0], *shape))


def _norm(op: coco.NormOp, operand: DistValue) -> np.ndarray:
    data = in_compute_dtype(operand)
    axes = tuple(range(1, data.ndim))
    return np.sqrt(np.sum(data * data, axis=axes, dtype=data.dtype))


def _reduced_over_ranks(
    op: coco.AllReduceOp | coco.ReduceScatterOp, operand: DistValue
) -> np.ndarray:
    """Every rank's value reduced (`op.reduction`), on every rank."""
    return combine_ranks(operand, RANK_REDUCTIONS[op.reduction.data])


def _root_value(op: coco.BroadcastOp, operand: DistValue) -> np.ndarray:
    root = op.root.value.data
    if not 0 <= root < operand.world:
        raise CocoError(
            f"root {root} is not a rank of the group of {operand.world}", op
        )
    return operand.rank(root)[np.newaxis]


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return x.dtype.type(1) / np.sqrt(x)


@register_impls
class CocoFunctions(InterpreterFunctions):
    """The reference semantics of the coco dialect (docs/interpreter.md)."""

    run_add = impl(coco.AddOp)(_elementwise_rule(np.add))
    run_sub = impl(coco.SubOp)(_elementwise_rule(np.subtract))
    run_mul = impl(coco.MulOp)(_elementwise_rule(np.multiply))
    run_max = impl(coco.MaxOp)(_elementwise_rule(np.maximum))
    run_min = impl(coco.MinOp)(_elementwise_rule(np.minimum))
    run_pow = impl(coco.PowOp)(_elementwise_rule(np.power))
    run_neg = impl(coco.NegOp)(_elementwise_rule(np.negative))
    run_abs = impl(coco.AbsOp)(_elementwise_rule(np.abs))
    run_sqrt = impl(coco.SqrtOp)(_elementwise_rule(np.sqrt))
    run_rsqrt = impl(coco.RsqrtOp)(_elementwise_rule(_rsqrt))
    run_exp = impl(coco.ExpOp)(_elementwise_rule(np.exp))
    run_log = impl(coco.LogOp)(_elementwise_rule(np.log))
    run_tanh = impl(coco.TanhOp)(_elementwise_rule(np.tanh))
    run_relu = impl(coco.ReluOp)(_elementwise_rule(_relu))
    run_gelu = impl(coco.GeluOp)(_elementwise_rule(gelu))

    @impl(coco.DivOp)
    def run_div(
        self,
        interpreter: Interpreter,
        op: coco.ElementwiseBinaryOp,
        args: PythonValues,
    ) -> PythonValues:
        if result_type(op).element_type != coco.i32:
            return elementwise(op, args, np.divide)
        target = result_type(op)
        if not np.all(aligned(args[1], target)):
            raise CocoError("divides an i32 by zero", op)
        return elementwise(op, args, truncating_divide)

    @impl(coco.CmpOp)
    def run_cmp(
        self, interpreter: Interpreter, op: coco.CmpOp, args: PythonValues
    ) -> PythonValues:
        return elementwise(op, args, COMPARISONS[op.predicate.data])

    @impl(coco.SelectOp)
    def run_select(
        self, interpreter: Interpreter, op: coco.SelectOp, args: PythonValues
    ) -> PythonValues:
        return elementwise(op, args, np.where, compute=False)

    run_convert = _operand_rule(coco.ConvertOp, _converted)

    @impl(coco.ConstantOp)
    def run_constant(
        self, interpreter: Interpreter, op: coco.ConstantOp, args: PythonValues
    ) -> PythonValues:
        world = stage_context(interpreter).world
        constant = result_type(op)
        value = rounded_constant(constant.element_type, op.python_value)
        return (finish(op, np.full((1, *constant.dims), value), world),)

    @impl(coco.DropoutOp)
    def run_dropout(
        self, interpreter: Interpreter, op: coco.DropoutOp, args: PythonValues
    ) -> PythonValues:
        (operand,) = args
        p = op.probability
        frames = stage_context(interpreter).chunk_frames
        u = dropout_uniform(op.seed.value.data, dropout_indices(op, operand, frames))
        data = in_compute_dtype(operand)
        scale = rounded_constant(operand.type.element_type, 1.0 - p)
        scale = scale.astype(data.dtype)
        kept = np.where(u >= p, data, data.dtype.type(0))
        return (finish(op, kept / scale, operand.world),)

    run_reduce = _operand_rule(coco.ReduceOp, _reduced)
    run_transpose = _operand_rule(coco.TransposeOp, _transposed)
    run_reshape = _operand_rule(coco.ReshapeOp, _reshaped)
    run_norm = _operand_rule(coco.NormOp, _norm)

    def _run_products(
        self,
        interpreter: Interpreter,
        op: coco.MatmulOp | coco.BatchMatmulOp,
        args: PythonValues,
    ) -> PythonValues:
        """`coco.matmul` and `coco.batch_matmul`: each rank's `a @ b`
        (`matmul_blocks`)."""
        lhs, rhs = args
        product = matmul_blocks(in_compute_dtype(lhs), in_compute_dtype(rhs))
        return (finish(op, product, lhs.world),)

    run_matmul = impl(coco.MatmulOp)(_run_products)
    run_batch_matmul = impl(coco.BatchMatmulOp)(_run_products)

    @impl(coco.EmbeddingOp)
    def run_embedding(
        self, interpreter: Interpreter, op: coco.EmbeddingOp, args: PythonValues
    ) -> PythonValues:
        tables, indices = args
        world = tables.world
        target = result_type(op)
        rows = tables.type.dims[1]
        check_embedding_indices(op, indices, rows)
        pooling = str(op.pooling.data)
        first_rows = tables.type.layout == coco.LayoutAttr.sliced(1)
        ranks = 1 if target.layout.is_replicated else world
        pooled = []
        for r in range(ranks):
            table = tables.rank(r).astype(compute_dtype(tables.type.element_type))
            index = indices.rank(r).astype(np.int64)
            if target.layout == coco.LayoutAttr.sliced(0):
                # the rank's tables: a replicated operand is cut like the result
                if tables.type.layout.is_replicated:
                    table = cut(table, 0, world)[r]
                if indices.type.layout.is_replicated:
                    index = cut(index, 0, world)[r]
            local = index - (r * table.shape[1] if first_rows else 0)
            owned = (local >= 0) & (local < table.shape[1])
            picked = table[
                np.arange(table.shape[0])[:, None, None], np.where(owned, local, 0)
            ]  # [T, B, L, D]
            pooled.append(pool_bags(picked, owned, pooling))
        return (finish(op, np.stack(pooled), world),)

    run_all_slice = _operand_rule(
        coco.AllSliceOp, lambda op, x: cut(x.data[0], op.dim.value.data, x.world)
    )

    @impl(coco.ConcatOp)
    def run_concat(
        self, interpreter: Interpreter, op: coco.ConcatOp, args: PythonValues
    ) -> PythonValues:
        world = args[0].world if args else stage_context(interpreter).world
        blocks = [rank_major_blocks(op, value, world) for value in args]
        flat = np.concatenate(blocks, axis=-1)
        return (finish(op, flat.reshape(flat.shape[0], -1), world),)

    @impl(coco.SplitOp)
    def run_split(
        self, interpreter: Interpreter, op: coco.SplitOp, args: PythonValues
    ) -> PythonValues:
        (flat,) = args
        world = flat.world
        sliced = flat.type.layout.is_sliced
        blocks = flat.data.reshape(flat.data.shape[0], *([] if sliced else [world]), -1)
        pieces: list[DistValue] = []
        start = 0
        for index, piece in enumerate(op.pieces):
            t = result_type(op, index)
            count = math.prod(t.dims)
            check_bucket_piece(op, t, world)
            run = blocks[..., start : start + count // world]
            start += count // world
            shape = local_shape(t, world)
            pieces.append(finish(op, run.reshape(run.shape[0], *shape), world, index))
        return tuple(pieces)

    @impl(coco.UpdateOp)
    def run_update(
        self, interpreter: Interpreter, op: coco.UpdateOp, args: PythonValues
    ) -> PythonValues:
        param = op.param
        if not isinstance(param, BlockArgument):
            raise CocoError("parameter must be an argument of the function", op)
        stage_context(interpreter).updates[param.index] = args[1]
        return ()

    # ------------------------------------------------------------------------
    # Collectives
    # ------------------------------------------------------------------------

    run_all_reduce = _operand_rule(coco.AllReduceOp, _reduced_over_ranks)
    run_reduce_scatter = _operand_rule(
        coco.ReduceScatterOp,
        lambda op, x: cut(_reduced_over_ranks(op, x)[0], op.dim.value.data, x.world),
    )
    run_all_gather = _operand_rule(
        coco.AllGatherOp, lambda op, x: x.global_value()[np.newaxis]
    )

    @impl(coco.ShiftOp)
    def run_shift(
        self, interpreter: Interpreter, op: coco.ShiftOp, args: PythonValues
    ) -> PythonValues:
        (operand,) = args
        if operand.type.layout.is_replicated:
            return (operand.with_data(result_type(op), operand.data),)
        # rank r receives what rank (r + by) mod N holds
        rotated = np.roll(operand.stacked(), -op.offset, axis=0)
        return (operand.with_data(result_type(op), rotated),)

    run_broadcast = _operand_rule(coco.BroadcastOp, _root_value)
    run_all_to_all = _operand_rule(
        coco.AllToAllOp,
        lambda op, x: cut(x.global_value(), op.dim.value.data, x.world),
    )

    @impl(coco.SendOp)
    def run_send(
        self, interpreter: Interpreter, op: coco.SendOp, args: PythonValues
    ) -> PythonValues:
        context = stage_context(interpreter)
        context.mailbox.put(context.channels.channel(op), args[0])
        return ()

    @impl(coco.RecvOp)
    def run_recv(
        self, interpreter: Interpreter, op: coco.RecvOp, args: PythonValues
    ) -> PythonValues:
        context = stage_context(interpreter)
        end = context.channels.channel(op)
        if not context.mailbox.ready(end):
            raise CocoError(f"has nothing to receive from @{end.source}", op)
        value = context.mailbox.take(end)
        return (value.with_data(result_type(op), value.data),)
