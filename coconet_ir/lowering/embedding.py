"""`coco.embedding` on the device: the pooled lookup of one output element,
and the op-by-op kernel (docs/gpu/device.md, "Embedding").

Rank `r` computes its block `[T', B', D']` of the result from the tables and
indices it holds (`EmbeddingLookup`): element `(t, b, d)` loops over the bag's
`L` indices, checks each against the global row count (`cf.assert`, which
the CUDA target prints as a device-side failure naming the op, MLIR's NVVM
pipeline as `__assertfail`: an index out of range is never read), and pools
the rows this rank holds (a row-sliced table: those of its block) in the
compute type (f32 for halves). The fused computation-collective kernel
(issue 10) calls the same loop (`emit_pooled_lanes`) per tile: where it
can, `vector` consecutive elements a thread (one 16-byte load of each row)
and `unroll` indices a step, checked together, their rows loaded before
any is added, the next step's indices loaded with them
(docs/gpu/tile-kernels.md, "Reading the rows").
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, cf, func, scf
from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from coconet_ir.dialects.coco import (
    EmbeddingOp,
    LayoutAttr,
    RegionOp,
    TensorType,
    as_tensor_type,
    element_info,
    label_of,
)
from coconet_ir.dialects.coco_gpu import WORK_ATTR
from coconet_ir.lowering.bufferize import local_shape
from coconet_ir.lowering.fused_collectives import Ints
from coconet_ir.lowering.kernels import (
    VECTOR_BYTES,
    Indexer,
    KernelSite,
    combine,
    compute_type,
    constant,
    flat_args,
    from_compute,
    grid_stride_loop,
    index,
    index_constant,
    launch,
    linear,
    load,
    load_lanes,
    memref_element,
    reduce_identity,
    store,
    to_compute,
)
from coconet_ir.lowering.kernels import lanes as kernel_lanes


@dataclass(frozen=True)
class EmbeddingLookup:
    """What one rank's lookup reads, from the op's types on `world` ranks."""

    tables: TensorType
    indices: TensorType
    result: TensorType
    pooling: str
    world: int
    name: str
    """The op's label, or ""."""

    @staticmethod
    def of(op: EmbeddingOp, world: int) -> EmbeddingLookup:
        return EmbeddingLookup(
            as_tensor_type(op.tables),
            as_tensor_type(op.indices),
            as_tensor_type(op.result),
            str(op.pooling.data),
            world,
            label_of(op) or "",
        )

    def shape(self, t: TensorType) -> tuple[int, ...]:
        return local_shape(t, self.world)

    @property
    def by_tables(self) -> bool:
        """The result is cut along the tables (each rank pools for T/N)."""
        return self.result.layout == LayoutAttr.sliced(0)

    @property
    def rows_cut(self) -> bool:
        """The tables are cut along their rows (each rank holds R/N)."""
        return self.tables.layout == LayoutAttr.sliced(1)

    @property
    def needs_rank(self) -> bool:
        """Whether a rank's reads depend on its rank: a replicated operand
        cut like a sliced<0> result, or row-sliced tables."""
        whole = self.tables.layout.is_replicated or self.indices.layout.is_replicated
        return self.rows_cut or (self.by_tables and whole)

    @property
    def kind(self) -> str:
        """How rows combine (`mean` sums, then divides)."""
        return "max" if self.pooling == "max" else "sum"


def out_of_range(lookup: EmbeddingLookup) -> str:
    """What a lookup of an index outside its tables says (every kernel that
    pools: the same words as the interpreter's)."""
    named = f" {lookup.name!r}" if lookup.name else ""
    rows = lookup.tables.dims[1]
    return f"'coco.embedding' op{named}: an index is out of range [0, {rows})"


def index_bounds(function: func.FuncOp) -> dict[int, int]:
    """Argument number → the global row count of the tables it indexes, for
    every argument of `function` that is an embedding's indices (read through
    the inputs of the region ops, coco.fusion, around the embedding)."""
    bounds: dict[int, int] = {}
    for op in function.walk():
        if not isinstance(op, EmbeddingOp):
            continue
        value = op.indices
        while isinstance(value, BlockArgument) and isinstance(
            value.owner.parent_op(), RegionOp
        ):
            region_op = value.owner.parent_op()
            assert isinstance(region_op, RegionOp)
            value = region_op.inputs[value.index]
        if isinstance(value, BlockArgument) and value.owner is function.body.block:
            rows = as_tensor_type(op.tables).dims[1]
            bounds[value.index] = min(bounds.get(value.index, rows), rows)
    return bounds


def emit_pooled(
    b: Builder,
    lookup: EmbeddingLookup,
    tables: SSAValue,
    indices: SSAValue,
    rank: SSAValue | None,
    t: SSAValue,
    bag: SSAValue,
    d: SSAValue,
) -> SSAValue:
    """Element `(t, bag, d)` of this rank's result block, from the flat
    per-rank `tables` and `indices` buffers."""
    (value,) = emit_pooled_lanes(b, lookup, (tables, indices, rank), (t, bag, d))
    return value


def vector_of(lookup: EmbeddingLookup) -> int:
    """Elements of a table row one thread loads at once: `VECTOR_BYTES` of
    them where a row (D elements) is whole vectors, else 1."""
    width = lookup.shape(lookup.tables)[2]
    size = element_info(lookup.result.element_type).bytes
    fits = VECTOR_BYTES // size
    return fits if (width * size) % VECTOR_BYTES == 0 else 1


def unroll_of(lookup: EmbeddingLookup) -> int:
    """Indices of a bag a thread takes per step (`POOL_UNROLL`, or the widest
    power of two dividing L): their rows' loads are in flight together."""
    length = lookup.shape(lookup.indices)[2]
    return max(u for u in (1, 2, 4, POOL_UNROLL) if length % u == 0)


POOL_UNROLL = 8
"""Indices a thread pools per step at most: with 16-byte rows, 8 loads of
16 bytes in flight per thread (128 bytes; 32 KiB a block of 256)."""


def emit_pooled_lanes(
    b: Builder,
    lookup: EmbeddingLookup,
    buffers: tuple[SSAValue, SSAValue, SSAValue | None],
    at: tuple[SSAValue, SSAValue, SSAValue],
    vector: int = 1,
    unroll: int = 1,
) -> list[SSAValue]:
    """Elements `(t, bag, d .. d + vector)` of this rank's result block, from
    the flat per-rank `tables` and `indices` buffers (`buffers`: tables,
    indices, rank): a loop over the bag's indices, `unroll` a step (each
    step checks its indices, then loads their rows, `vector` elements in one
    load: `d` a multiple of `vector`, `tables` aligned to its size), one
    accumulator per element in the compute type."""
    tables, indices, rank = buffers
    t, bag, d = at
    table_count, rows, _ = lookup.shape(lookup.tables)
    _, bags, length = lookup.shape(lookup.indices)
    global_rows = lookup.tables.dims[1]
    element = lookup.result.element_type
    acc_type = compute_type(element)
    identity = reduce_identity(lookup.kind, acc_type)
    result_tables = lookup.shape(lookup.result)[0]

    def offset(replicated: bool) -> SSAValue:
        """`t` in a buffer that holds every table (a replicated operand of a
        result cut along the tables) or only this rank's."""
        if not (lookup.by_tables and replicated):
            return t
        assert rank is not None
        start = b.insert(arith.MuliOp(rank, index_constant(b, result_tables))).result
        return b.insert(arith.AddiOp(start, t)).result

    t_table = offset(lookup.tables.layout.is_replicated)
    t_index = offset(lookup.indices.layout.is_replicated)
    first_row = None
    if lookup.rows_cut:
        assert rank is not None
        first_row = b.insert(arith.MuliOp(rank, index_constant(b, rows))).result

    steps = length // unroll
    # With `unroll` > 1 a step's indices are loaded by the step before (the
    # first step's before the loop): their loads are in flight with the
    # rows' (loop-carried, `ahead`).
    ahead = unroll > 1

    def indices_at(builder: Builder, first: SSAValue) -> list[SSAValue]:
        """The bag's `unroll` indices from position `first`, as stored."""
        i = Ints(builder)
        return [
            load(
                builder,
                indices,
                [
                    linear(
                        builder,
                        [t_index, bag, i.add(first, u) if u else first],
                        (table_count, bags, length),
                    )
                ],
            )
            for u in range(unroll)
        ]

    index_type = memref_element(indices.type)
    carried = [index_type] * unroll if ahead else []
    body = Block(arg_types=[index, *[acc_type] * vector, *carried])
    step, *rest = body.args
    accs, current = rest[:vector], rest[vector:]
    step.name_hint = "l" if unroll == 1 else "step"
    for acc in accs:
        acc.name_hint = "acc"
    for raw in current:
        raw.name_hint = "next"
    inner = Builder(InsertPoint.at_end(body))

    def within(value: SSAValue, bound: int) -> SSAValue:
        zero = index_constant(inner, 0)
        lower = inner.insert(arith.CmpiOp(value, zero, "sge")).result
        upper = inner.insert(arith.CmpiOp(value, index_constant(inner, bound), "slt"))
        return inner.insert(arith.AndIOp(lower, upper.result)).result

    def check(raws: list[SSAValue]) -> list[tuple[SSAValue, SSAValue | None]]:
        """The rows of indices `raws`, checked together (one `cf.assert`),
        each in this rank's part of the table (row 0 where it does not hold
        it), and whether it holds it."""
        found = []
        for raw in raws:
            row = inner.insert(arith.IndexCastOp(raw, index)).result
            row.name_hint = "row"
            found.append((row, within(row, global_rows)))
        valid = found[0][1]
        for _, more in found[1:]:
            valid = inner.insert(arith.AndIOp(valid, more)).result
        inner.insert(cf.AssertOp(valid, out_of_range(lookup)))
        checked: list[tuple[SSAValue, SSAValue | None]] = []
        for row, owned in found:
            if ahead and first_row is None:
                # Every row is this rank's, and the assert has checked them:
                # read as they are (no select of row 0 and the identity).
                checked.append((row, None))
                continue
            local_row = row
            if first_row is not None:
                local_row = inner.insert(arith.SubiOp(row, first_row)).result
                owned = within(local_row, rows)
            # A row this rank does not hold is read at row 0 and replaced by
            # the identity: no divergent branch, and every read in bounds.
            safe = index_constant(inner, 0)
            safe = inner.insert(arith.SelectOp(owned, local_row, safe)).result
            checked.append((safe, owned))
        return checked

    checked = check(list(current) if ahead else indices_at(inner, step))
    width = lookup.shape(lookup.tables)[2]
    reads = [
        kernel_lanes(
            inner,
            load_lanes(
                inner,
                tables,
                linear(inner, [t_table, safe, d], (table_count, rows, width)),
                vector,
            ),
        )
        for safe, _ in checked
    ]
    following: list[SSAValue] = []
    if ahead:  # the next step's (the first step's again, on the last)
        i = Ints(inner)
        upcoming = i.rem(i.add(step, 1), steps)
        following = indices_at(inner, i.mul(upcoming, unroll))
    sums: list[SSAValue] = list(accs)
    for (_, owned), read in zip(checked, reads, strict=True):
        for j, lane in enumerate(read):
            value = to_compute(inner, lane)
            if owned is not None:
                other = constant(inner, identity, acc_type)
                value = inner.insert(arith.SelectOp(owned, value, other)).result
            sums[j] = combine(inner, lookup.kind, sums[j], value)
    inner.insert(scf.YieldOp(*sums, *following))
    start = constant(b, identity, acc_type)
    first = indices_at(b, index_constant(b, 0)) if ahead else []
    totals = b.insert(
        scf.ForOp(
            index_constant(b, 0),
            index_constant(b, steps),
            index_constant(b, 1),
            [*[start] * vector, *first],
            body,
        )
    ).results[:vector]
    values: list[SSAValue] = []
    for total in totals:
        if lookup.pooling == "mean":
            count = constant(b, length, acc_type)
            total = b.insert(arith.DivfOp(total, count)).result
        values.append(from_compute(b, total, element))
    return values


def embedding_kernel(
    site: KernelSite,
    lookup: EmbeddingLookup,
    tables: SSAValue,
    indices: SSAValue,
    out: SSAValue,
) -> list[Operation]:
    """Host ops launching the op-by-op lookup: a thread per element of this
    rank's result block."""
    host, kernels, threads, name = site
    views, (tables_flat, indices_flat, out_flat) = flat_args(
        host, [tables, indices, out]
    )
    specs: list[tuple[str, object]] = [("n", index)]
    args: list[SSAValue] = []
    if lookup.needs_rank:
        specs.append(("rank", index))
        args.append(host.rank())
    specs += [
        ("tables", tables_flat.type),
        ("indices", indices_flat.type),
        ("out", out_flat.type),
    ]
    args += [tables_flat, indices_flat, out_flat]
    kernel, body = kernels.kernel(name, specs)  # type: ignore[arg-type]
    kernel_args = list(kernel.body.block.args)
    rank_arg = kernel_args[1] if lookup.needs_rank else None
    tables_arg, indices_arg, out_arg = kernel_args[-3:]
    loop, i = grid_stride_loop(body, kernel_args[0])
    shape = lookup.shape(lookup.result)
    digits = Indexer(loop, i, shape)
    t, bag, d = (digits.digit(k) for k in range(3))
    value = emit_pooled(loop, lookup, tables_arg, indices_arg, rank_arg, t, bag, d)
    store(loop, value, out_arg, [i])
    count = shape[0] * shape[1] * shape[2]
    ops = launch(host, kernels, kernel, count, args, threads)
    # the rows it pools, not the whole tables (for the cost model)
    element = element_info(lookup.result.element_type).bytes
    pooled = lookup.indices.dims[-1]
    read = count * pooled * element + count // shape[2] * pooled * 4
    work = DenseArrayBase.from_list(i64, [0, read + count * element])
    ops[-1].attributes[WORK_ATTR] = work
    return [*views, *ops]
