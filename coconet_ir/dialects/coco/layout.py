"""Layout inference: the rules (docs/dialect.md, "Compute ops") that give a compute op's
result type from its operand types (docs/dialect.md, "Elementwise layout rules").

Each rule takes operand types and returns the result type, or raises a
LayoutError whose message states the rule. The ops' `infer_result_type` call
them: their builders to compute result types, their verifiers to check the
declared one. Broadcasting (`operand_axis`, `result_axis`) is stated here once
for the dialect, the passes, the analyses and the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from math import prod

from xdsl.dialects.builtin import i1, i32
from xdsl.ir import Attribute

from coconet_ir.dialects.coco.attributes import (
    LOCAL,
    REPLICATED,
    LayoutAttr,
    LayoutError,
    LayoutKind,
    TensorType,
)
from coconet_ir.dialects.coco.element_types import is_float

# ============================================================================
# Broadcasting
# ============================================================================


def broadcast_shapes(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy broadcasting of trailing dims; raises LayoutError on a mismatch."""
    rank = max(len(s) for s in shapes)
    result: list[int] = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise LayoutError(
                f"operand shapes {' and '.join(str(list(s)) for s in shapes)} do "
                f"not broadcast (dimension {axis} of the result has sizes "
                f"{sorted(sizes)})"
            )
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def result_axis(operand: TensorType, result_rank: int, dim: int) -> int:
    """The dim of an elementwise result that dim `dim` of `operand` lines up
    with: numpy broadcasting aligns trailing dims."""
    return dim + result_rank - operand.rank


def operand_axis(
    operand: TensorType, result: TensorType, result_dim: int
) -> int | None:
    """The dim of `operand` that lines up with dim `result_dim` of the
    elementwise `result`, or None when the operand is broadcast along it (the
    dim is absent from the operand, or of size 1)."""
    axis = result_dim - (result.rank - operand.rank)
    if axis < 0 or operand.dims[axis] == 1:
        return None
    return axis


# ============================================================================
# Elementwise ops
# ============================================================================


def elementwise_layout(types: Sequence[TensorType], result_rank: int) -> LayoutAttr:
    """The layout rule for elementwise ops.

    Equal layouts keep it; `replicated` takes the layout of the other operands;
    sliced operands must cut the same (right-aligned) result dimension; `local`
    with `sliced` is an error.
    """
    sliced_dims: set[int] = set()
    has_local = False
    for t in types:
        if t.layout.is_local:
            has_local = True
        elif t.layout.is_sliced:
            sliced_dims.add(result_axis(t, result_rank, t.layout.sliced_dim))
    if has_local and sliced_dims:
        raise LayoutError(
            "cannot combine a local operand with a sliced one (local with sliced "
            "is an error: all_reduce the local operand or all_gather the sliced "
            "one first)"
        )
    if len(sliced_dims) > 1:
        raise LayoutError(
            "sliced operands must cut the same dimension of the result, got "
            f"dimensions {sorted(sliced_dims)} (use coco.all_to_all)"
        )
    if has_local:
        return LOCAL
    if not sliced_dims:
        return REPLICATED
    return LayoutAttr.sliced(sliced_dims.pop())


def _check_sliced_not_broadcast(
    types: Sequence[TensorType], shape: tuple[int, ...], layout: LayoutAttr
) -> None:
    """A sliced operand must have the full size along its sliced dimension."""
    if not layout.is_sliced:
        return
    for t in types:
        if (
            t.layout.is_sliced
            and t.dims[t.layout.sliced_dim] != shape[layout.sliced_dim]
        ):
            raise LayoutError(
                f"a sliced operand cannot be broadcast along its sliced dimension "
                f"({t} against result shape {list(shape)})"
            )


def infer_elementwise(
    types: Sequence[TensorType], result_element_type: Attribute | None = None
) -> TensorType:
    """Shape by broadcasting, layout by `elementwise_layout`; the element type is
    the first operand's unless `result_element_type` says otherwise."""
    shape = broadcast_shapes([t.dims for t in types])
    layout = elementwise_layout(types, len(shape))
    _check_sliced_not_broadcast(types, shape, layout)
    if result_element_type is None:
        result_element_type = types[0].element_type
    return TensorType(shape, result_element_type, layout)


def check_same_element_type(types: Sequence[TensorType]) -> None:
    """Operands of elementwise ops and matmul share one element type."""
    kinds = {t.element_type for t in types}
    if len(kinds) > 1:
        raise LayoutError(
            "operands must have the same element type (use coco.convert), got "
            f"{', '.join(str(t.element_type) for t in types)}"
        )


# ============================================================================
# Reductions, matmul, dims
# ============================================================================


def check_dim_in_range(what: str, dim: int, operand: TensorType) -> None:
    if not 0 <= dim < operand.rank:
        raise LayoutError(
            f"{what} {dim} is out of range for an operand of rank {operand.rank}"
        )


def infer_reduce(
    operand: TensorType, dims: Sequence[int], keep_dims: bool = False
) -> TensorType:
    """Reductions: replicated → replicated, local → local; on sliced<D> a set of
    dims including D gives local partials, excluding D gives sliced (renumbered,
    unless `keep_dims` keeps the reduced dims with size 1)."""
    if not dims:
        raise LayoutError("needs at least one dimension to reduce (dims = [...])")
    if len(set(dims)) != len(dims):
        raise LayoutError(f"dims must be distinct, got {list(dims)}")
    for d in dims:
        check_dim_in_range("dim", d, operand)
    if keep_dims:
        shape = [1 if axis in dims else s for axis, s in enumerate(operand.dims)]
    else:
        shape = [s for axis, s in enumerate(operand.dims) if axis not in dims]
    layout = operand.layout
    if layout.is_sliced:
        cut = layout.sliced_dim
        if cut in dims:
            layout = LOCAL
        elif not keep_dims:
            layout = LayoutAttr.sliced(cut - sum(1 for d in dims if d < cut))
    return TensorType(shape, operand.element_type, layout)


def infer_transpose(operand: TensorType, perm: Sequence[int]) -> TensorType:
    """`coco.transpose`: result dim `j` is operand dim `perm[j]`; a sliced
    operand's cut moves with its dim (sliced<D> → sliced<j> where
    `perm[j] = D`)."""
    if sorted(perm) != list(range(operand.rank)):
        raise LayoutError(
            f"perm must be a permutation of the operand's {operand.rank} dims, got "
            f"{list(perm)}"
        )
    shape = [operand.dims[d] for d in perm]
    layout = operand.layout
    if layout.is_sliced:
        layout = LayoutAttr.sliced(list(perm).index(layout.sliced_dim))
    return TensorType(shape, operand.element_type, layout)


def infer_reshape(operand: TensorType, shape: Sequence[int]) -> TensorType:
    """`coco.reshape`: the same elements in row-major order, in `shape`.

    Replicated and local values reshape freely. A value sliced along `D`
    reshapes when the dims before `D` keep their product `P`: its result is
    sliced along the first dim `E` with `prod(shape[:E]) = P` and
    `shape[E] > 1`, so that every rank's block (`P` runs of `dims[D]/N`
    rows) is the same elements before and after, and no data moves."""
    if any(s < 1 for s in shape):
        raise LayoutError(f"result dims must be positive, got {list(shape)}")
    if prod(shape) != prod(operand.dims):
        raise LayoutError(
            f"cannot reshape {list(operand.dims)} ({prod(operand.dims)} elements) "
            f"into {list(shape)} ({prod(shape)} elements)"
        )
    layout = operand.layout
    if layout.is_sliced:
        layout = LayoutAttr.sliced(_reshaped_cut(operand, shape))
    return TensorType(shape, operand.element_type, layout)


def _reshaped_cut(operand: TensorType, shape: Sequence[int]) -> int:
    """The dim of `shape` a reshape of the sliced `operand` is cut along."""
    before = prod(operand.dims[: operand.layout.sliced_dim])
    candidates = [e for e in range(len(shape)) if prod(shape[:e]) == before]
    for e in candidates:
        if shape[e] > 1:
            return e
    if candidates and operand.dims[operand.layout.sliced_dim] == 1:
        return candidates[0]
    raise LayoutError(
        f"cannot reshape {operand} into {list(shape)}: the dims before the "
        f"sliced dim {operand.layout.sliced_dim} hold {before} rows, and no "
        f"prefix of {list(shape)} does (a reshape of a sliced value may merge or "
        "split dims before the sliced one, or from it on, but not across it)"
    )


MATMUL_RULES = (
    "replicated x replicated -> replicated, sliced<d not last> x replicated -> "
    "sliced<d>, replicated x sliced<1> -> sliced<last>, sliced<last> x sliced<0> "
    "-> local, local x replicated -> local"
)
"""The matmul table (docs/dialect.md, "Ops"), as error messages quote it."""


def matmul_layout(lhs: TensorType, rhs: TensorType) -> LayoutAttr | None:
    """The result layout by the matmul table, or None when no row matches."""
    last = lhs.rank - 1
    a, b = lhs.layout, rhs.layout
    if b.is_replicated:
        if a.is_replicated:
            return REPLICATED
        if a.is_sliced and a.sliced_dim != last:
            return a
        if a.is_local:
            return LOCAL
        return None
    if a.is_replicated and b.is_sliced and b.sliced_dim == 1:
        return LayoutAttr.sliced(last)
    if a.is_sliced and a.sliced_dim == last and b.is_sliced and b.sliced_dim == 0:
        return LOCAL
    return None


def check_product_operands(lhs: TensorType, rhs: TensorType) -> None:
    """A matmul's operands: one element type, and an arithmetic one."""
    check_same_element_type([lhs, rhs])
    if lhs.element_type == i1:
        raise LayoutError("does not take i1 operands (i1 is not arithmetic)")


def contracted(
    lhs: TensorType,
    rhs: TensorType,
    layout_of: Callable[[TensorType, TensorType], LayoutAttr | None],
    rules: str,
) -> TensorType:
    """`lhs @ rhs` once the ranks are checked: `lhs`'s last dim contracts
    with `rhs`'s second to last (`K`), the layout is `layout_of`'s (None:
    the error quotes `rules`), the shape `[..., M]`."""
    if lhs.dims[-1] != rhs.dims[-2]:
        raise LayoutError(
            f"contraction sizes differ: lhs {list(lhs.dims)} has K = {lhs.dims[-1]}"
            f" but rhs {list(rhs.dims)} has K = {rhs.dims[-2]}"
        )
    layout = layout_of(lhs, rhs)
    if layout is None:
        raise LayoutError(
            f"has no layout rule for lhs {lhs.layout} and rhs {rhs.layout} "
            f"(allowed: {rules})"
        )
    return TensorType((*lhs.dims[:-1], rhs.dims[-1]), lhs.element_type, layout)


def infer_matmul(lhs: TensorType, rhs: TensorType) -> TensorType:
    """`a: [..., K]` times `b: [K, M]` gives `[..., M]`, laid out by the table."""
    check_product_operands(lhs, rhs)
    if lhs.rank < 2 or rhs.rank != 2:
        raise LayoutError(
            "needs a lhs of rank >= 2 and a rhs of rank 2, got ranks "
            f"{lhs.rank} and {rhs.rank}"
        )
    return contracted(lhs, rhs, matmul_layout, MATMUL_RULES)


BATCH_MATMUL_RULES = (
    "replicated x replicated -> replicated, sliced<0> x sliced<0> -> sliced<0>, "
    "sliced<d not 0, not last> x replicated -> sliced<d>, local x replicated -> "
    "local"
)
"""The batch_matmul table (docs/dialect.md, "coco.batch_matmul")."""


def batch_matmul_layout(lhs: TensorType, rhs: TensorType) -> LayoutAttr | None:
    """The result layout by the batch_matmul table, or None when no row
    matches. `sliced<0> x sliced<0>` is expert parallelism: each rank holds
    its groups (experts) of both operands."""
    last = lhs.rank - 1
    a, b = lhs.layout, rhs.layout
    if a == b and (a.is_replicated or a == LayoutAttr.sliced(0)):
        return a
    if b.is_replicated and a.is_sliced and 0 < a.sliced_dim < last:
        return a
    if b.is_replicated and a.is_local:
        return LOCAL
    return None


def infer_batch_matmul(lhs: TensorType, rhs: TensorType) -> TensorType:
    """`a: [G, ..., K]` times `b: [G, K, M]` gives `[G, ..., M]`: group `g`
    of `a` times matrix `g` of `b`, laid out by the table."""
    check_product_operands(lhs, rhs)
    if lhs.rank < 2 or rhs.rank != 3:
        raise LayoutError(
            "needs a lhs of rank >= 2 and a rhs of rank 3, got ranks "
            f"{lhs.rank} and {rhs.rank}"
        )
    if lhs.dims[0] != rhs.dims[0]:
        raise LayoutError(
            f"group counts differ: lhs {list(lhs.dims)} has G = {lhs.dims[0]} but "
            f"rhs {list(rhs.dims)} has G = {rhs.dims[0]}"
        )
    return contracted(lhs, rhs, batch_matmul_layout, BATCH_MATMUL_RULES)


def require_layout(operand: TensorType, *allowed: LayoutKind) -> None:
    """The operand's layout kind must be one of `allowed` (a collective's rule)."""
    if operand.layout.kind.data not in allowed:
        raise LayoutError(
            f"operand must be {' or '.join(allowed)}, got {operand.layout}"
        )


@lru_cache(maxsize=1 << 16)
def chunk_type(t: TensorType, dim: int, chunks: int) -> TensorType:
    """The type of one of `chunks` equal chunks of `t` along `dim` (-1: whole);
    made once per question (the cost model asks it for every value of every
    candidate schedule)."""
    if dim < 0:
        return t
    return t.with_shape([d // chunks if i == dim else d for i, d in enumerate(t.dims)])


EMBEDDING_RULES = (
    "tables replicated with indices replicated, sliced<0> or sliced<1>; "
    "tables sliced<0> with indices replicated or sliced<0>; tables sliced<1> "
    "or sliced<2> with indices replicated; local with local or replicated"
)


def embedding_layout(tables: LayoutAttr, indices: LayoutAttr) -> LayoutAttr | None:
    """The result layout of `coco.embedding` (docs/dialect.md, "coco.embedding"),
    or None when no rule matches: table parallelism (tables sliced<0>: each
    rank pools for its tables), row-sliced tables (sliced<1>: each rank pools
    the rows it holds, a local partial), column-sliced tables (sliced<2>),
    and indices cut along the tables or the batch of replicated tables."""
    if tables.is_local or indices.is_local:
        ok = (tables.is_local or tables.is_replicated) and (
            indices.is_local or indices.is_replicated
        )
        return LOCAL if ok else None
    if tables.is_replicated:
        if indices.is_replicated:
            return REPLICATED
        return indices if indices.sliced_dim in (0, 1) else None
    dim = tables.sliced_dim
    if dim == 0:
        return tables if indices.is_replicated or indices == tables else None
    if not indices.is_replicated:
        return None
    return LOCAL if dim == 1 else tables


def infer_embedding(tables: TensorType, indices: TensorType) -> TensorType:
    """Tables `[T, R, D]` (float) looked up with indices `[T, B, L]` (i32) give
    the pooled rows `[T, B, D]`, laid out by `embedding_layout`."""
    if tables.rank != 3 or indices.rank != 3:
        raise LayoutError(
            "needs tables [T, R, D] and indices [T, B, L], got ranks "
            f"{tables.rank} and {indices.rank}"
        )
    if not is_float(tables.element_type):
        raise LayoutError(f"needs floating-point tables, got {tables.element_type}")
    if indices.element_type != i32:
        raise LayoutError(f"needs i32 indices, got {indices.element_type}")
    if tables.dims[0] != indices.dims[0]:
        raise LayoutError(
            f"tables {list(tables.dims)} and indices {list(indices.dims)} have "
            "different numbers of tables"
        )
    layout = embedding_layout(tables.layout, indices.layout)
    if layout is None:
        raise LayoutError(
            f"has no layout rule for tables {tables.layout} and indices "
            f"{indices.layout} (allowed: {EMBEDDING_RULES})"
        )
    shape = (tables.dims[0], indices.dims[1], tables.dims[2])
    return TensorType(shape, tables.element_type, layout)
